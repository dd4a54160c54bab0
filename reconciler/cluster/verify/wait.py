"""Verification of the DRA chain of the workloads a plan applied (fail fast on terminal DRA signals).

For every workload (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, Pod) its pods are found (label
selector, or the Pod itself; `observe.py`) and, for every claim a pod uses, the chain is checked
(`chain.py`): claim created -> allocated -> reserved for the pod (status.reservedFor uid) -> pod scheduled
on the allocated node -> pod Ready. `verify_workloads` polls until the whole chain holds for every pod and
every workload is rolled out, or a terminal signal appears (`signals.py`), or the timeout passes. A
FailedScheduling "cannot allocate all claims" is terminal only past `grace` (measured from when verify
first saw it, restarted whenever allocations move). On failure the diagnoses of `diagnose.classify` are
attached. The result types and their rendering are in `result.py`.

Optional: annotation `dra-gitops.io/verify-exec: "<command>"` on a workload runs the command in the first
container of each of its pods through the exec API once the chain holds; an error fails verification.
"""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from reconciler.cluster.diagnose import Diagnosis, classify, collect_snapshot
from reconciler.cluster.objects import meta, name_of, namespace_of, nsname, pod_phase
from reconciler.cluster.verify.chain import chain_of
from reconciler.cluster.verify.observe import Observation, observe, workload_key
from reconciler.cluster.verify.result import ClaimEvidence, ExecResult, VerifyResult
from reconciler.cluster.verify.signals import allocation_picture, terminal_signal, workload_done
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

VERIFY_EXEC_ANNOTATION = "dra-gitops.io/verify-exec"
# The terminal signal of a verification `stop` ended.
STOPPED = "stopped"
WORKLOAD_KINDS = frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job", "Pod"})


# ---- the wait ----------------------------------------------------------------------------------------


def verify_workloads(
    client: ClusterClient,
    workloads: Sequence[Mapping[str, Any]],
    *,
    timeout: float = 300.0,
    grace: float = 60.0,
    poll: float = 1.0,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    progress: Callable[[str], None] | None = None,
    stop: Callable[[], str | None] | None = None,
) -> VerifyResult:
    """Wait until the DRA chain of every pod of `workloads` holds; fail fast on terminal signals. `stop`
    is asked at every poll: a reason ends the wait at once (an `abort`, a shutdown, a lost Lease), the
    result failed with terminal signal `stopped`."""
    workloads = [
        w for w in workloads if w.get("kind") in WORKLOAD_KINDS and dra.pod_spec_of(dict(w)) is not None
    ]
    start = clock()
    first_seen: dict[str, float] = {}
    last_status = ""
    last_picture: frozenset[tuple[str, ...]] = frozenset()
    while True:
        obs = observe(client, workloads)
        now = clock()
        # The grace period runs while nothing moves: a claim released or allocated (a rolling update's old
        # pod giving its device to the new one) restarts it, so only a standing shortage is terminal.
        picture = allocation_picture(obs)
        if picture != last_picture:
            first_seen.clear()
            last_picture = picture
        evidence = [
            e for pods in obs.pods.values() for pod in pods for e in chain_of(pod, obs.claims, obs.extended)
        ]
        terminal = terminal_signal(obs, now, grace, first_seen)
        why = stop() if stop is not None else None
        if why:
            return VerifyResult(False, evidence, [], f"verification stopped: {why}", [], now - start, STOPPED)
        if terminal is not None:
            return _failed(client, obs, evidence, f"verification failed: {terminal}", now - start, terminal)
        waiting = [f"{e.pod}: {e.problem}" for e in evidence if e.problem]
        for wl in workloads:
            done, why = workload_done(wl, obs)
            if not done:
                waiting.append(why)
        if not waiting:
            exec_results = _run_exec(client, workloads, obs)
            failed = [x for x in exec_results if not x.ok]
            message = (
                f"verified {len(workloads)} workload(s), {len([e for e in evidence if e.claim])} claim(s)"
            )
            if failed:
                message = (
                    f"verification failed: verify-exec in {failed[0].pod}: {failed[0].output.strip()[:300]}"
                )
            return VerifyResult(not failed, evidence, [], message, exec_results, clock() - start)
        if progress is not None and waiting[0] != last_status:
            last_status = waiting[0]
            progress(f"waiting: {last_status}")
        if now - start >= timeout:
            return _failed(
                client,
                obs,
                evidence,
                f"verification timed out after {timeout:g}s: {'; '.join(waiting[:3])}",
                now - start,
                "",
            )
        sleep(max(0.0, min(poll, timeout - (now - start))))


def _failed(
    client: ClusterClient,
    obs: Observation,
    evidence: list[ClaimEvidence],
    message: str,
    elapsed: float,
    terminal: str,
) -> VerifyResult:
    pods = [p for ps in obs.pods.values() for p in ps]
    try:
        snapshot = collect_snapshot(client, pods=pods)
        diagnoses = classify(snapshot)
    except DraGitopsError as exc:
        diagnoses = [Diagnosis("pending", "cluster", f"diagnosis unavailable: {exc}")]
    return VerifyResult(False, evidence, diagnoses, message, [], elapsed, terminal)


def _run_exec(
    client: ClusterClient, workloads: Sequence[Mapping[str, Any]], obs: Observation
) -> list[ExecResult]:
    out: list[ExecResult] = []
    for wl in workloads:
        command = as_dict(meta(wl).get("annotations")).get(VERIFY_EXEC_ANNOTATION)
        if not isinstance(command, str) or not command.strip():
            continue
        argv = shlex.split(command)
        for pod in obs.pods.get(workload_key(wl), []):
            if pod_phase(pod) != "Running":
                continue
            containers = as_list(as_dict(pod.get("spec")).get("containers"))
            container = str(as_dict(containers[0]).get("name")) if containers else None
            try:
                output = client.exec(namespace_of(pod), name_of(pod), argv, container=container)
                out.append(ExecResult(nsname(pod), container, command, True, output))
            except DraGitopsError as exc:
                out.append(ExecResult(nsname(pod), container, command, False, exc.detail))
    return out


__all__ = ["VERIFY_EXEC_ANNOTATION", "verify_workloads"]
