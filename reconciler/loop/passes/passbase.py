"""What every pass of one target shares: the target's state store, Events and ApplySet id, the revisions
it reads (a few kept in memory), and the delivery hooks that keep `inProgress` current stage by stage."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from reconciler.cluster import applyset
from reconciler.cluster.apply import Fingerprints
from reconciler.cluster.client import ClusterClient, Forbidden
from reconciler.cluster.events import EventRecorder
from reconciler.cluster.waverollout import WaveControl
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.desired import DesiredState, empty_state
from reconciler.delivery.pipeline import DeliverHooks, DeliverOptions, cluster_capabilities_of, deliver
from reconciler.delivery.result import Delivery
from reconciler.errors import DraGitopsError, EnvironmentProblem
from reconciler.loop.passes.reconcile_types import Cancelled, PassResult, ReconcileOptions, RevisionSource
from reconciler.loop.store.records import InProgress
from reconciler.loop.store.state import StateConflict, StateStore, TargetState, now_iso
from reconciler.model.objects import ObjRef
from reconciler.model.wave_progress import RolloutProgress, with_rollout
from reconciler.render.capabilities import cluster_capabilities

Progress = Callable[[str], None]
log = logging.getLogger("dra_gitops.reconcile")
# How often a pass waiting on verification reads what verbs wrote into its state (an `abort`).
VERB_POLL = 1.0


class ClusterChanged(EnvironmentProblem):
    """Another cluster answers where the target's cluster was (its kube-system Namespace's uid differs)."""


def short_sha(sha: str | None) -> str:
    return (sha or "(none)")[:12]


class PassBase:
    """The parts of a target's reconciler every step of a pass uses (`Reconciler` is the pass itself)."""

    def __init__(
        self,
        client: ClusterClient,
        source: RevisionSource,
        options: ReconcileOptions,
        check_options: CheckOptions,
        *,
        progress: Progress | None = None,
        should_stop: Callable[[], str | None] | None = None,
        on_deliver: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.source = source
        self.options = options
        self.check_options = check_options
        self.progress: Progress = progress or (lambda message: log.info("%s", message))
        # Asked between stages: a reason to stop (shutting down, lease lost), or None.
        self.should_stop: Callable[[], str | None] = should_stop or (lambda: None)
        # Told the sha when a pass begins delivering a new commit (its commit status turns pending).
        self.on_deliver: Callable[[str], None] = on_deliver or (lambda sha: None)
        self.store = StateStore(client, options.target, options.state_namespace)
        self.events = EventRecorder(client, options.state_namespace, self.store.name, options.identity)
        self.set_id = applyset.applyset_id(options.target, options.state_namespace)
        self.fingerprints: Fingerprints = {}
        self._desired_cache: dict[str, DesiredState] = {}
        self._drift_reported: dict[str, list[str]] = {}  # with selfHeal off: the drift last reported
        self.cluster_id: str | None = None  # the identity of the cluster this process first reached
        # Told each step of a driver rollout in waves (the controller's metrics).
        self.on_rollout: Callable[[RolloutProgress], None] = lambda progress: None
        # The rollout in waves an interrupted (or suspended) apply left, by sha: the next delivery of that
        # sha resumes it (`rollback.py`'s recovery sets it).
        self.resumable: tuple[str | None, dict[tuple[str, str], RolloutProgress]] | None = None

    # ---- helpers ----------------------------------------------------------------------------------

    def check_cluster(self, state: TargetState) -> None:
        """The cluster must be the one this target's state (or, if the state is gone, this process) first
        saw: the uid of its kube-system Namespace. Another cluster answering at the same address is an
        environment problem (ClusterChanged), never a place to write; the first pass records the uid."""
        namespaces = self.client.resource_for("v1", "Namespace")
        try:
            live = self.client.get(namespaces, None, "kube-system")
        except Forbidden:
            return  # a role without `get namespaces`: nothing to tell clusters apart by (deploy/ grants it)
        found = str(((live or {}).get("metadata") or {}).get("uid") or "")
        if not found:
            return  # a server without kube-system (some test doubles): nothing to tell clusters apart by
        expected = state.cluster_id or self.cluster_id
        if expected and found != expected:
            raise ClusterChanged(
                f"this is another cluster: the kube-system Namespace's uid is {found}, the target's cluster "
                f"was {expected} (recorded at its first pass); nothing is written here. Point the "
                "kubeconfig back at the target's cluster, or delete the target's state to adopt this one",
                where=f"{self.client.host} ({self.store.ref})",
            )
        self.cluster_id = found
        if state.cluster_id is None and state.resource_version is not None:
            state.cluster_id = found
            self.store.save_during_pass(state)
        elif state.cluster_id is None:
            state.cluster_id = found  # written with the first state the pass saves

    def _desired(self, sha: str | None) -> DesiredState:
        if sha is None:
            return empty_state()
        cached = self._desired_cache.get(sha)
        if cached is None:
            with cluster_capabilities(
                cluster_capabilities_of(self.client)
            ):  # charts render as for this cluster
                cached = self.source.desired(sha)
            if len(self._desired_cache) >= 4:
                self._desired_cache.pop(next(iter(self._desired_cache)))
            self._desired_cache[sha] = cached
        return cached

    def keep_last_good(self, sha: str | None) -> None:
        """Keep the last good revision's files beside the state: written when it became last good, and
        again whenever the copy is found missing (its namespace deleted, the ConfigMap removed)."""
        if sha:
            self.source.keep(sha)

    def _deliver_options(
        self, *, rollback: bool = False, keep: frozenset[ObjRef] = frozenset()
    ) -> DeliverOptions:
        """A rollback skips the policies (its revision was judged when it was applied), prunes first and
        recreates claims whose immutable spec differs."""
        return replace(
            self.options.delivery,
            check=not rollback,
            keep=keep,
            prune_first=rollback,
            recreate_immutable=rollback,
        )

    def hooks_for(self, state: TargetState, marker: InProgress) -> DeliverHooks:
        """Mark the state in progress before the first write, and note each stage as it finishes."""

        def before_write() -> None:
            state.in_progress = replace(marker, stage="", since=now_iso())
            self.store.save_during_pass(state)

        def after_stage(label: str) -> None:
            if state.in_progress is not None:
                state.in_progress.stage = label
                try:
                    self.store.save_during_pass(state)
                except StateConflict as exc:
                    # Lost the state to another writer mid-pass: stop before the next stage.
                    raise Cancelled("the state was written by someone else during the pass") from exc

        def cancelled() -> str | None:
            if state.abort is not None:  # written by `dra-gitops abort`, taken in by the last save
                return f"aborted by {state.abort.by}"
            return self.should_stop()

        polled = [time.monotonic()]

        def during_verify() -> str | None:
            # Nothing is saved while verification waits: read what a verb wrote (an `abort`) each second.
            if time.monotonic() - polled[0] >= VERB_POLL:
                polled[0] = time.monotonic()
                try:
                    if not self.store.take_operator_writes(state):
                        return "the state was written by someone else during the pass"
                except DraGitopsError as exc:
                    log.debug("reading the state during verification: %s", exc)
            return cancelled()

        return DeliverHooks(
            before_write=before_write,
            after_stage=after_stage,
            cancelled=cancelled,
            during_verify=during_verify,
            waves=self._wave_control(state, marker, during_verify),
        )

    def _wave_control(
        self, state: TargetState, marker: InProgress, poll: Callable[[], str | None]
    ) -> WaveControl:
        """How a delivery's driver rollouts in waves follow the pass: progress saved in `inProgress.rollout`
        (fenced as every write), resumed from what an interrupted pass left, stopped by an `abort` or a lost
        Lease at every poll, paused between waves by `suspend`, told as Events and metrics."""

        def resume(namespace: str, name: str) -> RolloutProgress | None:
            if self.resumable is None or marker.operation != "apply":
                return None
            sha, left = self.resumable
            return left.get((namespace, name)) if sha == marker.sha else None

        def save(progress: RolloutProgress) -> None:
            self.on_rollout(progress)
            if state.in_progress is None:
                return
            state.in_progress.rollout = with_rollout(state.in_progress.rollout, progress)
            try:
                self.store.save_during_pass(state)
            except StateConflict as exc:
                raise Cancelled("the state was written by someone else during the pass") from exc

        def pause() -> str | None:
            poll()  # takes in what verbs wrote
            s = state.suspended
            return f"suspended by {s.by}" + (f": {s.reason}" if s.reason else "") if s is not None else None

        def event(reason: str, message: str, warning: bool) -> None:
            self.events.emit(reason, message, warning=warning)

        return WaveControl(
            resume=resume,
            save=save,
            stop=poll,
            pause=pause,
            event=event,
            revert=marker.operation == "rollback",
            wave_timeout=self.options.delivery.stage_timeout,
            probe_namespace=self.options.state_namespace,  # deploy/base lets the probe write there only
        )

    def _deliver(
        self,
        state: TargetState,
        desired: DesiredState,
        marker: InProgress,
        options: DeliverOptions,
        base: DesiredState | None = None,
    ) -> Delivery:
        """Deliver `desired`; from its first write the state shows `marker` in progress."""
        hooks = self.hooks_for(state, marker)
        return deliver(self.client, desired, self.check_options, options, self.progress, base, hooks=hooks)

    def _finish(self, state: TargetState, result: PassResult) -> PassResult:
        for record in reversed(result.records):
            state.record(record)
        self.store.save_during_pass(state)
        return result
