"""The probe of a wave (issue 32): on each wave node, a ResourceClaim of the probe's class and a pod of its image
must allocate and run before the deadline.

`run_probe` creates, per node, a ResourceClaim (in the cluster's served resource.k8s.io version: `exactly` in
v1/v1beta2, the flat request before) whose request tolerates the wave's own DeviceTaintRule taint
(`TAINT_KEY`, NoSchedule: the probe must land on the drained devices), and a pod with
`restartPolicy: Never` that uses it, pinned to the node by a required node affinity on its name
(`matchFields` `metadata.name`, as the DaemonSet controller pins its pods; not `nodeName`: a pod with
`nodeName` bypasses the scheduler, and with it the claim's allocation). The pod meets Pod Security `restricted` (non-root, no privilege escalation, no capabilities,
RuntimeDefault seccomp, no ServiceAccount token), so it may run in the reconciler's own namespace, where
deploy/base grants its claims and pods. The pod tolerates the node's NoSchedule taints (GPU nodes are commonly tainted so only
workloads asking for them land there; the driver's own plugin runs there), not its NoExecute ones.

A node passes when its pod is Running or Succeeded with its claim allocated a device of the driver. It fails
at once on what never heals by waiting (a container that failed or cannot pull its image, a selector error,
a device of another driver), and otherwise at the deadline, with the evidence: the claim's allocation
status, the pod's phase and PodScheduled condition, its events (FailedScheduling,
FailedPrepareDynamicResources, ...) and its containers' states. Everything it created is deleted, also on
failure; leftovers of an earlier probe of the driver on these nodes (a killed process) are deleted first.
"""

from __future__ import annotations

import hashlib
import logging
import re
import secrets
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.diagnose import events_for, selector_failure_in
from reconciler.cluster.objects import condition, meta, name_of, pod_phase
from reconciler.cluster.readiness.health import pod_failure
from reconciler.errors import DraGitopsError
from reconciler.model.driver_rollout import Probe
from reconciler.model.readers import as_dict, as_list

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient
    from reconciler.cluster.client.discovery import ResourceInfo

log = logging.getLogger("dra_gitops.probe")

DRA_GROUP = "resource.k8s.io"
TAINT_KEY = "dra-gitops.io/driver-upgrade"  # the wave's DeviceTaintRule taint (reconciler/cluster/wave.py)
PROBE_LABEL = "dra-gitops.io/probe"  # value: the driver
NODE_ANNOTATION = "dra-gitops.io/probe-node"
REQUEST = "probe"
WARNINGS = ("FailedScheduling", "FailedPrepareDynamicResources")
NESTED_REQUEST_VERSIONS = ("v1", "v1beta2")  # `requests[].exactly`; older versions keep the flat request


def probe_toleration() -> dict[str, Any]:
    """The device toleration of the wave's own taint (any value: the wave number)."""
    return {"key": TAINT_KEY, "operator": "Exists", "effect": "NoSchedule"}


def claim_body(
    api_version: str, name: str, namespace: str, labels: Mapping[str, str], probe: Probe
) -> dict[str, Any]:
    """The probe's ResourceClaim in `api_version`'s shape."""
    exactly = {"deviceClassName": probe.device_class, "tolerations": [probe_toleration()]}
    version = api_version.rsplit("/", 1)[-1]
    request = (
        {"name": REQUEST, "exactly": exactly}
        if version in NESTED_REQUEST_VERSIONS
        else {"name": REQUEST, **exactly}
    )
    return {
        "apiVersion": api_version,
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": {"devices": {"requests": [request]}},
    }


def pod_body(
    name: str, namespace: str, node: str, claim: str, labels: Mapping[str, str], probe: Probe
) -> dict[str, Any]:
    """The probe pod: pinned to `node` through the scheduler, using the claim, never restarted."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": dict(labels),
            "annotations": {NODE_ANNOTATION: node},
        },
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            # Pod Security `restricted` (the reconciler's own namespace enforces it)
            "securityContext": {
                "runAsNonRoot": True,
                "runAsUser": 65534,
                "seccompProfile": {"type": "RuntimeDefault"},
            },
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        # the node by name, as the DaemonSet controller pins its pods (the hostname
                        # label may differ from the name: --hostname-override, some clouds)
                        "nodeSelectorTerms": [
                            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                        ]
                    }
                }
            },
            "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}],
            "resourceClaims": [{"name": REQUEST, "resourceClaimName": claim}],
            "containers": [
                {
                    "name": "probe",
                    "image": probe.image,
                    "resources": {"claims": [{"name": REQUEST}]},
                    "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                }
            ],
        },
    }


def _name(node: str, token: str) -> str:
    clean = re.sub(r"[^a-z0-9-]+", "-", node.lower()).strip("-")[:30].rstrip("-")
    digest = hashlib.sha256(node.encode()).hexdigest()[:6]
    return f"dra-gitops-probe-{clean}-{digest}-{token}"


def label_value(driver: str) -> str:
    """The driver as a label value (a driver name is a DNS subdomain of at most 63 characters)."""
    clean = re.sub(r"[^A-Za-z0-9._-]+", "-", driver)[:63].strip("-._")
    return clean or "driver"


def allocated_results(claim: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    allocation = as_dict(as_dict((claim or {}).get("status")).get("allocation"))
    return [as_dict(r) for r in as_list(as_dict(allocation.get("devices")).get("results"))]


def devices_of(results: Iterable[Mapping[str, Any]]) -> str:
    return ", ".join(f"{r.get('driver')}/{r.get('pool')}/{r.get('device')}" for r in results)


def claim_state(claim: Mapping[str, Any] | None, ref: str, seen: list[dict[str, Any]] | None = None) -> str:
    """The claim's allocation status, as evidence (`seen`: its allocation as last seen, if released since)."""
    if claim is None:
        return f"claim {ref}: gone"
    results = allocated_results(claim)
    if results:
        return f"claim {ref}: allocated {devices_of(results)}"
    return f"claim {ref}: not allocated" + (f" (released; it was {devices_of(seen)})" if seen else "")


def container_states(pod: Mapping[str, Any]) -> list[str]:
    out = []
    status = as_dict(pod.get("status"))
    for cs in [*as_list(status.get("initContainerStatuses")), *as_list(status.get("containerStatuses"))]:
        cs = as_dict(cs)
        for state, body in as_dict(cs.get("state")).items():
            body = as_dict(body)
            if state == "terminated":
                text = f"terminated {body.get('reason') or ''} (exit code {body.get('exitCode')})".replace(
                    "  ", " "
                )
            elif state == "waiting":
                text = f"waiting {body.get('reason') or ''}"
            else:
                text = state
            message = str(body.get("message") or "").strip()
            out.append(f"container {cs.get('name')} {text}{': ' + message if message else ''}")
    return out


def pod_state(pod: Mapping[str, Any] | None, ref: str, events: Iterable[Mapping[str, Any]]) -> str:
    """The pod's phase, scheduling, events and containers, as evidence."""
    if pod is None:
        return f"pod {ref}: gone"
    parts = [f"pod {ref}: {pod_phase(pod)}"]
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.get("status") != "True":
        parts.append(
            f"PodScheduled={scheduled.get('status')} {scheduled.get('reason') or ''}: {scheduled.get('message') or ''}"
        )
    node = as_dict(pod.get("spec")).get("nodeName")
    if node:
        parts.append(f"bound to {node}")
    seen: dict[str, str] = {}  # the last message of each warning reason
    for ev in events:
        if ev.get("type") == "Warning" or ev.get("reason") in WARNINGS:
            seen[str(ev.get("reason"))] = str(ev.get("message") or ev.get("note") or "").strip()
    said = str((scheduled or {}).get("message") or "").strip()
    parts += [f"event {reason}: {message}" for reason, message in seen.items() if message != said]
    parts += container_states(pod)
    return "; ".join(parts)


@dataclass
class _NodeProbe:
    node: str
    pod: str
    claim: str
    evidence: str | None = None
    done: bool = False
    detail: str = ""
    # the claim's allocation results as last seen (the claim of a pod that ended is released)
    results: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ProbeRun:
    """One probe over the wave's nodes; `run_probe` is its entry point."""

    client: ClusterClient
    namespace: str
    driver: str
    probe: Probe
    deadline: float
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll: float = 0.2
    progress: Callable[[str], None] | None = None
    nodes: dict[str, _NodeProbe] = field(default_factory=dict)
    created: list[tuple[ResourceInfo, str]] = field(default_factory=list)

    @property
    def labels(self) -> dict[str, str]:
        return {PROBE_LABEL: label_value(self.driver), "app.kubernetes.io/managed-by": "dra-gitops"}

    @property
    def selector(self) -> str:
        return f"{PROBE_LABEL}={label_value(self.driver)}"

    def _say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)

    def _ref(self, name: str) -> str:
        return f"{self.namespace}/{name}"

    def sweep(self, nodes: Iterable[str], pods_api: ResourceInfo, claims_api: ResourceInfo) -> None:
        """Delete what an earlier probe of the driver left on these nodes (a killed process)."""
        wanted = set(nodes)
        pods = self.client.list(pods_api, self.namespace, label_selector=self.selector)
        claimed: set[str] = set()
        for pod in pods:
            if as_dict(meta(pod).get("annotations")).get(NODE_ANNOTATION) in wanted:
                self._delete(pods_api, name_of(pod))
                claimed |= {
                    str(as_dict(c).get("resourceClaimName"))
                    for c in as_list(as_dict(pod.get("spec")).get("resourceClaims"))
                }
        for claim in self.client.list(claims_api, self.namespace, label_selector=self.selector):
            if name_of(claim) in claimed:
                self._delete(claims_api, name_of(claim))

    def create(self, nodes: Iterable[str], pods_api: ResourceInfo, claims_api: ResourceInfo) -> None:
        token = secrets.token_hex(3)
        for node in nodes:
            name = _name(node, token)
            entry = self.nodes[node] = _NodeProbe(node, name, name)
            try:
                body = claim_body(claims_api.api_version, name, self.namespace, self.labels, self.probe)
                self.client.create(claims_api, body)
                self.created.append((claims_api, name))
                self.client.create(
                    pods_api, pod_body(name, self.namespace, node, name, self.labels, self.probe)
                )
                self.created.append((pods_api, name))
            except DraGitopsError as exc:
                entry.done, entry.evidence = True, f"probe on {node}: could not create it: {exc}"

    def wait(self, started: float) -> None:
        pods_api = self.client.resource_for("v1", "Pod")
        claims_api = self.claims_api()
        while True:
            waiting = [e for e in self.nodes.values() if not e.done]
            if not waiting:
                return
            pods = {
                name_of(p): p
                for p in self.client.list(pods_api, self.namespace, label_selector=self.selector)
            }
            claims = {
                name_of(c): c
                for c in self.client.list(claims_api, self.namespace, label_selector=self.selector)
            }
            timed_out = self.clock() >= self.deadline
            events: list[dict[str, Any]] | None = None
            for entry in waiting:
                pod, claim = pods.get(entry.pod), claims.get(entry.claim)
                entry.results = allocated_results(claim) or entry.results
                verdict = self._verdict(entry, pod, claim)
                if verdict is None and not timed_out:
                    continue
                if verdict == "":
                    entry.done = True
                    self._say(f"probe {entry.node}: {entry.detail}")
                    continue
                if events is None:
                    events = self.client.list_kind("", "Event", self.namespace)
                why = verdict or f"did not allocate and run within {self.deadline - started:.3g}s"
                entry.done, entry.evidence = True, self._evidence(entry, why, pod, claim, events)
                self._say(f"probe {entry.node}: failed: {why}")
            if any(not e.done for e in self.nodes.values()):
                self.sleep(self.poll)

    def _evidence(
        self,
        entry: _NodeProbe,
        why: str,
        pod: Mapping[str, Any] | None,
        claim: Mapping[str, Any] | None,
        events: list[dict[str, Any]],
    ) -> str:
        """Why the node's probe failed, then its claim's allocation, its pod's state and events."""
        uid = str(meta(pod or {}).get("uid") or "") or None
        mine = events_for(events, "Pod", self.namespace, entry.pod, uid)
        held = claim_state(claim, self._ref(entry.claim), entry.results)
        return f"probe on {entry.node}: {why} — {held}; {pod_state(pod, self._ref(entry.pod), mine)}"

    def _verdict(
        self, entry: _NodeProbe, pod: Mapping[str, Any] | None, claim: Mapping[str, Any] | None
    ) -> str | None:
        """None: still waiting; "": passed; else why it failed (for good: waiting cannot help)."""
        if pod is None or claim is None:
            return "the probe pod or claim disappeared"
        failure = pod_failure(dict(pod))
        if failure is not None:
            return failure
        scheduled = condition(pod, "PodScheduled") or {}
        failing = selector_failure_in([str(scheduled.get("message") or "")])
        if failing is not None:
            return f"selector error: {failing.group(0)}"
        if pod_phase(pod) not in ("Running", "Succeeded"):
            return None
        results = entry.results  # a pod that Succeeded already may have its claim released
        others = sorted({str(r.get("driver")) for r in results} - {self.driver})
        if not results or others:
            return (
                f"its claim was allocated devices of {', '.join(others) or 'no driver'}, not of {self.driver}"
            )
        entry.detail = (
            f"pod {pod_phase(pod)}, claim {self._ref(entry.claim)}: allocated {devices_of(results)}"
        )
        return ""

    def claims_api(self) -> ResourceInfo:
        found = self.client.find_kind(DRA_GROUP, "ResourceClaim")
        if found is None:
            raise LookupError("the cluster serves no resource.k8s.io ResourceClaim")
        return found

    def _delete(self, api: ResourceInfo, name: str) -> str | None:
        """Delete one object (gone already is fine); the error when it could not be deleted."""
        try:
            self.client.delete(api, self.namespace, name)
        except DraGitopsError as exc:
            log.warning("could not delete %s %s: %s", api.kind, self._ref(name), exc)
            return str(exc)
        return None

    def cleanup(self) -> None:
        """Delete what this probe created: pods first, then their claims (the claim controller deallocates).

        What cannot be deleted fails its node's probe (a passed one too): nothing is left behind silently."""
        owners = {e.pod: e for e in self.nodes.values()}
        for api, name in sorted(self.created, key=lambda c: c[0].kind != "Pod"):
            error = self._delete(api, name)
            entry = owners.get(name)
            if error is None or entry is None:
                continue
            left = f"{api.kind} {self._ref(name)} could not be deleted (left behind): {error}"
            entry.evidence = (
                f"{entry.evidence}; and {left}"
                if entry.evidence
                else f"probe on {entry.node}: it ran, but {left}"
            )
        self.created = []


def run_probe(
    client: ClusterClient,
    namespace: str,
    driver: str,
    nodes: Iterable[str],
    probe: Probe,
    deadline: float,
    **options: Any,
) -> dict[str, str | None]:
    """Probe each node: node -> None (allocated and ran) or the evidence of its failure.

    `deadline` is a time of `clock` (default `time.monotonic`); `options`: clock, sleep, poll, progress.
    """
    run = ProbeRun(client, namespace, driver, probe, deadline, **options)
    wanted = list(dict.fromkeys(nodes))
    started = run.clock()
    pods_api = client.resource_for("v1", "Pod")
    try:
        claims_api = run.claims_api()
        run.sweep(wanted, pods_api, claims_api)
        run.create(wanted, pods_api, claims_api)
        run.wait(started)
    finally:
        run.cleanup()
    return {node: run.nodes[node].evidence for node in wanted}


__all__ = ["PROBE_LABEL", "ProbeRun", "claim_body", "pod_body", "probe_toleration", "run_probe"]
