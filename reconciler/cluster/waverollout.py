"""A driver upgrade in waves, whole (issue 32): stage 1 of a main driver DaemonSet that has a `rollout`.

The DaemonSet was applied with `updateStrategy: OnDelete` (`model/wave_progress.with_wave_strategy`), so its
controller replaces nothing by itself. `DriverRollout.run` then:

1. waits for the controller to observe the spec (its newest ControllerRevision is the revision delivered);
2. plans the waves over the nodes the DaemonSet runs a pod on (`model/waves.plan_waves`: the nodes of the
   driver's canary first, then the zones in turn, then names), judged as stage 1 judges a DaemonSet on no
   node (a failure unless the driver allows no nodes);
3. runs wave after wave (`cluster/wave.run_wave`: drain, replace, verify, undrain), judging `maxFailedNodes`
   after each, and soaks between waves once a wave verified;
4. saves its progress (`RolloutProgress`) through `WaveControl.save` after each step that matters, and
   resumes from the progress `WaveControl.resume` gives (a pass that died, a rollout suspended);
5. asks `WaveControl.stop` at every poll (an `abort`, a Lease lost: the stage fails with that reason, the
   caller reverts) and `WaveControl.pause` between waves (`suspend`: the progress says `suspended`).

In a rollback (`WaveControl.revert`) it puts the old plugin back instead: the old spec was re-applied, so
the pods off the current revision (the nodes the failed rollout touched) are replaced in one wave, and every
DeviceTaintRule of the rollout is removed.

Nothing here knows the state store or Events: the caller (the reconcile pass) gives the callbacks.
"""

from __future__ import annotations

import contextlib
import time
from datetime import timedelta
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.objects import meta, name_of, node_ready, owned_by
from reconciler.cluster.wave import (
    REVISION_LABEL,
    WaveResult,
    WaveTarget,
    observed_revision,
    release_wave,
    run_wave,
)
from reconciler.cluster.wave_snapshot import WaveSnapshot
from reconciler.cluster.wavecontrol import (
    NOT_NEEDED,
    RolloutOutcome,
    Stopped,
    WaveControl,
    clear_wave_taints,
    iso,
    now,
    parse_iso,
)
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.driver_rollout import RolloutSpec
from reconciler.model.readers import as_dict
from reconciler.model.wave_progress import (
    DONE,
    DRAINING,
    FAILED,
    REPLACING,
    REVERTING,
    SOAKING,
    SUSPENDED,
    VERIFYING,
    RolloutProgress,
)
from reconciler.model.waves import PlannedWave, TargetNode, WavePlan, plan_waves

# The phase a wave's step moves the rollout to.
_STEP_PHASE = {
    "taint": DRAINING,
    "delete-pod": REPLACING,
    "pod-ready": VERIFYING,
    "slices-republished": VERIFYING,
}


class DriverRollout:
    """One main driver DaemonSet's rollout in waves (see the module docstring)."""

    def __init__(
        self, client: ClusterClient, body: dict[str, Any], spec: RolloutSpec, control: WaveControl
    ) -> None:
        self.client = client
        self.body = body
        self.spec = spec
        self.control = control
        self.namespace = str(meta(body).get("namespace") or "default")
        self.name = name_of(body)
        self.ref = f"DaemonSet/{self.namespace}/{self.name}"
        self.driver = dra.workload_driver(body) or ""
        self.progress = RolloutProgress(self.driver, self.namespace, self.name, since=iso(now()))

    # ------------------------------------------------------------------ reads

    def _daemonset(self) -> dict[str, Any] | None:
        return self.client.get(self.client.resource_for("apps/v1", "DaemonSet"), self.namespace, self.name)

    def _pods_by_node(self, ds: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for pod in self.client.list_kind("", "Pod", self.namespace):
            node = as_dict(pod.get("spec")).get("nodeName")
            if node and owned_by(pod, ds) and not meta(pod).get("deletionTimestamp"):
                out[str(node)] = pod
        return out

    def _canary_nodes(self) -> set[str]:
        """Nodes the driver's canary DaemonSet(s) run a pod on."""
        canaries = [
            ds
            for ds in self.client.list_kind("apps", "DaemonSet", self.namespace)
            if dra.canary_for(ds) == self.name
        ]
        if not canaries:
            return set()
        nodes: set[str] = set()
        for pod in self.client.list_kind("", "Pod", self.namespace):
            if any(owned_by(pod, ds) for ds in canaries) and as_dict(pod.get("spec")).get("nodeName"):
                nodes.add(str(pod["spec"]["nodeName"]))
        return nodes

    def _settled(self) -> tuple[dict[str, Any], str, dict[str, dict[str, Any]]]:
        """The DaemonSet, its current revision and its pods by node, once its controller observed the spec
        and runs a pod on every node it desires one on."""
        deadline = time.monotonic() + self.control.wave_timeout
        while True:
            ds = self._daemonset()
            if ds is None:
                raise LookupError(f"{self.ref} does not exist")
            revision = observed_revision(self.client, ds)
            pods = self._pods_by_node(ds) if revision else {}
            desired = as_dict(ds.get("status")).get("desiredNumberScheduled")
            if revision and (not isinstance(desired, int) or len(pods) >= desired):
                return ds, revision, pods
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self.ref}: its controller did not observe its spec and place its pods within "
                    f"{self.control.wave_timeout:g}s"
                )
            self._sleep(self.control.poll)

    # ------------------------------------------------------------------ steering

    def _sleep(self, seconds: float) -> None:
        reason = self.control.stop()
        if reason:
            raise Stopped(reason)
        time.sleep(seconds)

    def _save(self, **changes: Any) -> None:
        for key, value in changes.items():
            setattr(self.progress, key, value)
        self.control.progress[self.progress.key] = self.progress
        self.control.save(self.progress)

    def _event(self, reason: str, message: str, warning: bool = False) -> None:
        self.control.event(reason, f"{self.ref} ({self.driver}): {message}", warning)

    # ------------------------------------------------------------------ the rollout

    def run(self) -> RolloutOutcome:
        try:
            if self.control.revert:
                return self._revert()
            return self._forward()
        except Stopped as exc:
            return RolloutOutcome(
                error=f"fail fast: {exc} (rollout of {self.ref} stopped at wave {self.progress.wave})"
            )
        except (LookupError, TimeoutError) as exc:
            return RolloutOutcome(error=str(exc))

    def _forward(self) -> RolloutOutcome:
        ds, revision, pods = self._settled()
        stale = {node for node, pod in pods.items() if _pod_revision(pod) != revision}
        resumed = self.control.resume(self.namespace, self.name)
        if resumed is not None and (resumed.revision != revision or resumed.phase in (DONE, FAILED)):
            resumed = None
        if not stale and resumed is None:
            return RolloutOutcome(not_needed=True)
        plan = self._plan(pods)
        if plan.failure is not None:
            return RolloutOutcome(error=f"{self.ref}: {plan.failure}")
        if plan.notice is not None:
            return RolloutOutcome(warning=f"{self.ref}: {plan.notice}")
        self.progress.revision = revision
        self.progress.of = len(plan.waves)
        self.progress.nodes = len(plan.order)
        first = 1
        if resumed is not None:
            self.progress.done = [n for n in resumed.done if n in plan.order]
            self.progress.failed_nodes = dict(resumed.failed_nodes)
            self.progress.since = resumed.since or self.progress.since
            self.progress.snapshot = None if resumed.verified else resumed.snapshot
            first = resumed.wave + 1 if resumed.verified else max(1, resumed.wave)
            if resumed.verified and resumed.wave < len(plan.waves):
                self._save(wave=resumed.wave, phase=SOAKING, soak_until=resumed.soak_until)
                paused = self._soak(resumed.soak_until, len(plan.waves))
                if paused is not None:
                    return paused
        for wave in plan.waves[first - 1 :]:
            if wave.number > 1:
                paused = self._paused(len(plan.waves))
                if paused is not None:
                    return paused
            failure = self._wave(plan, wave)
            if failure is not None:
                return failure
            if wave.number < len(plan.waves):
                soak = self.spec.soak_seconds
                until = iso(now() + timedelta(seconds=soak)) if soak else None
                self._save(phase=SOAKING, soak_until=until)
                paused = self._soak(until, len(plan.waves))
                if paused is not None:
                    return paused
        self._save(phase=DONE, soak_until=None)
        self._event("RolloutComplete", f"{len(plan.order)} node(s) upgraded in {len(plan.waves)} wave(s)")
        failed = self.progress.failed_nodes
        if failed:
            listed = "; ".join(f"{node}: {evidence}" for node, evidence in sorted(failed.items()))
            return RolloutOutcome(
                warning=f"{self.ref}: {len(failed)} node(s) failed within maxFailedNodes "
                f"{plan.max_failed_nodes}, their plugin not upgraded: {listed}"
            )
        return RolloutOutcome()

    def _plan(self, pods: dict[str, dict[str, Any]]) -> WavePlan:
        nodes = {name_of(n): n for n in self.client.list_kind("", "Node")}
        targets = [
            TargetNode(
                node, {str(k): str(v) for k, v in as_dict(meta(nodes.get(node) or {}).get("labels")).items()}
            )
            for node in sorted(pods)
        ]
        return plan_waves(
            targets,
            self.spec,
            canary_nodes=self._canary_nodes(),
            allow_no_nodes=dra.allows_no_nodes(self.body),
        )

    def _wave(self, plan: WavePlan, wave: PlannedWave) -> RolloutOutcome | None:
        total = len(plan.waves)
        self._save(
            wave=wave.number, phase=DRAINING if self.spec.drain_devices else REPLACING, soak_until=None
        )
        self._event("WaveStarted", f"wave {wave.number} of {total}: {', '.join(wave.nodes)}")

        def step(line: str) -> None:
            action = line.split(": ", 1)[-1].split(" ", 1)[0] if ": " in line else ""
            phase = _STEP_PHASE.get(action)
            if phase is not None and phase != self.progress.phase:
                self._save(phase=phase)

        result = run_wave(
            self.client,
            WaveTarget(
                self.namespace,
                self.name,
                self.driver,
                wave.number,
                wave.nodes,
                self.spec.drain_devices,
                self.spec.probe,  # a claim and a pod on each wave node before the taint goes (cluster/probe.py)
                probe_namespace=self.control.probe_namespace,
            ),
            timeout=self.control.wave_timeout,
            poll=self.control.poll,
            sleep=self._sleep,
            progress=step,
            # the devices before, kept before any old pod is deleted; kept by a pass that died, compared with
            saved=WaveSnapshot.from_json(self.progress.snapshot),
            keep=lambda snapshot: self._save(snapshot=snapshot.to_json()),
        )
        self.progress.snapshot = None  # the wave is over: saved with its outcome just below
        if result.problem is not None:
            self._save(phase=FAILED)
            self._event("WaveFailed", f"wave {wave.number} of {total}: {result.problem}", True)
            return RolloutOutcome(error=f"{self.ref}: wave {wave.number} of {total}: {result.problem}")
        self.progress.failed_nodes.update(result.failed_nodes)
        done = [n for n in wave.nodes if n not in result.failed_nodes]
        self.progress.done = [*[n for n in self.progress.done if n not in done], *done]
        if plan.halts(len(self.progress.failed_nodes)):
            self._save(phase=FAILED)
            node, evidence = sorted(result.failed_nodes.items())[0] if result.failed_nodes else ("?", "?")
            text = (
                f"wave {wave.number} of {total} failed on node {node}: {evidence} "
                f"({len(self.progress.failed_nodes)} failed node(s), maxFailedNodes {plan.max_failed_nodes})"
            )
            self._event("WaveFailed", text, True)
            return RolloutOutcome(error=f"{self.ref}: {text}", diagnosis=self._diagnosis(wave, total, result))
        if result.taint_rules:  # failed nodes within maxFailedNodes: their devices stay drained no longer
            with contextlib.suppress(DraGitopsError, OSError):
                release_wave(self.client, result)
        self._save(phase=VERIFYING)
        self._event(
            "WaveVerified",
            f"wave {wave.number} of {total}: {len(self.progress.done)}/{len(plan.order)} node(s) done",
        )
        return None

    def _diagnosis(self, wave: PlannedWave, total: int, result: WaveResult) -> dict[str, Any]:
        return {
            "mode": "driver-wave-failed",
            "ref": self.ref,
            "summary": f"the upgrade of driver {self.driver} halted at wave {wave.number} of {total}",
            "evidence": [
                f"wave {wave.number}, node {node}: {evidence}"
                for node, evidence in sorted(result.failed_nodes.items())
            ],
            "recovery": [
                "the nodes the rollout touched got the old plugin back and their devices were undrained; "
                "fix the driver image and push a new commit",
            ],
            "numbers": {"wave": wave.number, "waves": total, "failedNodes": len(self.progress.failed_nodes)},
        }

    def _paused(self, total: int) -> RolloutOutcome | None:
        """Between waves (and while soaking): `suspend` pauses the rollout here, its progress kept."""
        paused = self.control.pause()
        if not paused:
            return None
        self.control.paused = paused
        self._save(phase=SUSPENDED)
        after = f"after wave {self.progress.wave} of {total}"
        self._event("RolloutSuspended", f"paused {after}: {paused}")
        return RolloutOutcome(error=f"paused: {paused} ({after})")

    def _soak(self, until: str | None, total: int) -> RolloutOutcome | None:
        """Wait until `until` (the soak after a verified wave); a pause ends it early (the progress keeps
        its end: a resumed rollout soaks what is left)."""
        end = parse_iso(until)
        while end is not None and now() < end:
            paused = self._paused(total)
            if paused is not None:
                return paused
            self._sleep(min(self.control.poll * 5, max(0.0, (end - now()).total_seconds())))
        return None

    # ------------------------------------------------------------------ the revert

    def _revert(self) -> RolloutOutcome:
        ds, revision, pods = self._settled()
        stale = sorted(node for node, pod in pods.items() if _pod_revision(pod) != revision)
        ready = {name_of(n) for n in self.client.list_kind("", "Node") if node_ready(n)}
        # A node that is not Ready cannot run the old plugin either: said, not waited for.
        touched = tuple(node for node in stale if node in ready)
        unreachable = [node for node in stale if node not in ready]
        warning = (
            f"{self.ref}: the old plugin could not be put back on {', '.join(unreachable)} (not Ready): "
            "its pod is replaced when the node comes back (delete it then)"
            if unreachable
            else None
        )
        self.progress.revision, self.progress.nodes = revision, len(pods)
        if touched:
            self._save(phase=REVERTING)
            self._event("RolloutReverting", f"the old plugin back on {', '.join(touched)}", True)
            result = run_wave(
                self.client,
                WaveTarget(self.namespace, self.name, self.driver, 0, touched, self.spec.drain_devices),
                timeout=self.control.wave_timeout,
                poll=self.control.poll,
                sleep=self._sleep,
            )
            if not result.ok:
                evidence = result.problem or "; ".join(
                    f"{n}: {e}" for n, e in sorted(result.failed_nodes.items())
                )
                return RolloutOutcome(error=f"{self.ref}: the old plugin did not come back: {evidence}")
        removed = clear_wave_taints(self.client, self.namespace, self.name)
        self._save(phase=DONE)
        if touched or removed:
            self._event(
                "RolloutReverted",
                f"old plugin back on {len(touched)} node(s), {len(removed)} taint rule(s) removed",
            )
        return RolloutOutcome(warning=warning)


def _pod_revision(pod: dict[str, Any]) -> str:
    return str(as_dict(meta(pod).get("labels")).get(REVISION_LABEL) or "")


def run_rollout(
    client: ClusterClient, body: dict[str, Any], spec: RolloutSpec, control: WaveControl
) -> RolloutOutcome:
    """Run (or revert) the rollout in waves of the main driver DaemonSet `body` (see the module docstring)."""
    return DriverRollout(client, body, spec, control).run()


__all__ = [
    "NOT_NEEDED",
    "DriverRollout",
    "RolloutOutcome",
    "Stopped",
    "WaveControl",
    "clear_wave_taints",
    "run_rollout",
]
