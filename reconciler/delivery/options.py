"""How one revision is delivered (`DeliverOptions`) and how a caller follows the delivery (`DeliverHooks`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from reconciler.cluster import applyset
from reconciler.cluster.waverollout import WaveControl
from reconciler.model.objects import ObjRef


@dataclass(frozen=True)
class DeliverOptions:
    """How one revision is delivered. The reconcile loop holds one for all its deliveries
    (`loop/passes/reconcile_types.py`'s `ReconcileOptions.delivery`) and sets the last four per delivery."""

    target: str = applyset.DEFAULT_TARGET
    namespace: str = applyset.DEFAULT_NAMESPACE
    stage_timeout: float = 300.0
    verify_timeout: float = 300.0
    grace: float = 60.0
    prune: bool = True
    verify: bool = True
    # Policies judge the revision (off for a rollback to a revision that was judged when it was applied).
    check: bool = True
    # Members of the set never pruned (objects that existed before a first pass adopted them).
    keep: frozenset[ObjRef] = frozenset()
    # A rollback prunes what the failed revision added before applying (those objects may hold the
    # devices the last good revision needs to verify), and deletes and recreates claims and templates whose
    # immutable spec differs (a forward change of one is refused by the dry-run and the `immutable-claim`
    # rule instead).
    prune_first: bool = False
    recreate_immutable: bool = False


@dataclass
class DeliverHooks:
    """How a caller (the reconcile loop) follows a delivery: state is marked before the first write."""

    before_write: Callable[[], None] | None = None
    after_stage: Callable[[str], None] | None = None
    # Asked between stages: a reason to stop (shutting down), or None to go on.
    cancelled: Callable[[], str | None] | None = None
    # Asked at every poll of verification (an `abort` ends it at once), when given.
    during_verify: Callable[[], str | None] | None = None
    # How main driver DaemonSets upgraded in waves are followed (progress saved, resumed, paused).
    waves: WaveControl | None = None


__all__ = ["DeliverHooks", "DeliverOptions"]
