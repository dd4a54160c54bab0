"""The values of a reconcile pass: its options and result, and the source it reads revisions from.

`reconcile.py` runs the pass; the controller, `revisions.py` and the commands import these from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from reconciler.cluster.apply import DriftReport
from reconciler.delivery.desired import DesiredState
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.delivery.result import Delivery
from reconciler.errors import DraGitopsError
from reconciler.loop.config.gates import Gates
from reconciler.loop.store.records import HistoryRecord
from reconciler.outcome import Outcome


@dataclass(frozen=True)
class SourceHead:
    sha: str
    ref: str = ""
    forced: bool = False
    previous: str | None = None


class RevisionSource(Protocol):
    """Where revisions come from (a Git remote in production; anything with shas in tests)."""

    def head(self, previous: str | None = None) -> SourceHead:
        """The sha to deliver now; `previous` (the sha last attempted) tells a force-push apart."""
        ...

    def desired(self, sha: str) -> DesiredState: ...

    def verify(self, sha: str) -> tuple[bool, str]: ...

    def keep(self, sha: str) -> None:
        """`sha` became the last good revision: keep what reading it again needs, off the remote."""
        ...

    def revert(self, sha: str, branch: str) -> str: ...

    def publish(self, sha: str, ref: str) -> None:
        """Point `ref` of the repository at `sha`, fast-forward only (`publishVerified`)."""
        ...


@dataclass
class ReconcileOptions:
    """How a target is reconciled. `delivery` is what its deliveries share (target, state namespace,
    grace, timeouts, prune, verify); the pass sets per delivery whether policies run and how a rollback
    prunes (`reconcile.py`)."""

    delivery: DeliverOptions = field(default_factory=DeliverOptions)
    git_revert_branch: str | None = None
    identity: str = ""
    self_heal: bool = True  # false: drift is reported (status, an Event), not corrected
    gates: Gates = field(
        default_factory=Gates
    )  # promotion from an upstream, rehearsal (`loop/config/gates.py`)

    @property
    def target(self) -> str:
        return self.delivery.target

    @property
    def state_namespace(self) -> str:
        return self.delivery.namespace


@dataclass
class PassResult:
    target: str
    outcome: Outcome  # metrics label it; `run --once` prints it
    sha: str | None
    seconds: float = 0.0
    message: str = ""
    records: list[HistoryRecord] = field(default_factory=list)
    delivery: Delivery | None = None
    rollback: Delivery | None = None
    drift: DriftReport | None = None
    violations: dict[tuple[str, str], int] = field(default_factory=dict)  # (rule, severity) -> count


class Cancelled(DraGitopsError):
    """The controller is shutting down; the pass stopped between two stages."""


class LeaseLost(Cancelled):
    """A write of the pass refused before it was sent: this replica no longer holds the target's Lease with
    the renew deadline's margin (paused, partitioned, or taken over); another replica may be writing."""
