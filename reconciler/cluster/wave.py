"""One wave of a driver upgrade in waves (issue 32): drain, replace the plugin, verify the slices, undrain.

`run_wave` works on the nodes of one planned wave (`reconciler.model.waves`) of a main driver DaemonSet that
was delivered with `updateStrategy: OnDelete` and a new template, so its controller replaces nothing by itself:

1. it reads each wave node's ResourceSlices of the driver (pools, devices, slice objects, generations);
2. with `drain_devices`, one DeviceTaintRule per pool of those nodes (`NoSchedule`: new claims go elsewhere,
   running pods keep their devices), in the version the cluster serves; a cluster that serves none fails the
   wave before anything is touched (a drain is never skipped silently);
3. it deletes the DaemonSet's pods on those nodes that do not run its current revision (its newest
   ControllerRevision's `controller-revision-hash`); the controller creates the new ones;
4. it waits for each node's new pod Ready (a pod that will not become Ready by itself, or a node that is not
   Ready, fails the node at once, with the evidence);
5. it waits for each node's slices republished by the new pod (a pool's generation moved on, or its slices
   are new objects), complete, with the same devices: the same names, and the same values of the attributes
   the driver's DeviceClasses select on (a device that disappeared fails the node);
6. it removes the taint rules when every node passed; on a failure they stay (the revert needs the devices
   drained) and `release_wave` removes them.

Each step is recorded in order with its time (`WaveResult.steps`). The caller judges `maxFailedNodes`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.objects import meta, name_of, node_ready, owned_by, pod_ready
from reconciler.cluster.readiness.health import pod_failure
from reconciler.model import dra
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

REVISION_LABEL = "controller-revision-hash"
TAINT_KEY = "dra-gitops.io/driver-upgrade"
ROLLOUT_LABEL = "dra-gitops.io/rollout"
DRA_GROUP = "resource.k8s.io"


@dataclass(frozen=True)
class WaveTarget:
    """What one wave works on."""

    namespace: str
    daemonset: str
    driver: str
    number: int
    nodes: tuple[str, ...]
    drain_devices: bool = False


@dataclass(frozen=True)
class Step:
    at: float  # time.monotonic()
    action: str  # taint, delete-pod, pod-ready, slices-republished, untaint, node-failed
    node: str
    detail: str


@dataclass
class WaveResult:
    number: int
    failed_nodes: dict[str, str] = field(default_factory=dict)  # node -> the evidence
    problem: str | None = None  # the wave could not start (nothing was touched)
    steps: list[Step] = field(default_factory=list)
    taint_rules: list[str] = field(default_factory=list)  # left in place (a failed wave)

    @property
    def ok(self) -> bool:
        return self.problem is None and not self.failed_nodes

    def actions(self, node: str | None = None) -> list[str]:
        return [s.action for s in self.steps if node is None or s.node == node]


@dataclass(frozen=True)
class Pool:
    """A node's pool of the driver as published: its generation, slice objects and devices."""

    generation: int
    slice_uids: frozenset[str]
    complete: bool
    devices: Mapping[str, Mapping[str, Any]]  # device name -> attributes (qualified names)


def node_pools(slices: list[dict[str, Any]], driver: str, node: str) -> dict[str, Pool]:
    """The pools `driver` publishes for `node` (the newest generation of each)."""
    mine = [s for s in slices if dra.slice_driver(s) == driver and dra.slice_node(s) == node]
    pools: dict[str, Pool] = {}
    for name in sorted({dra.slice_pool(s) or "" for s in mine}):
        of_pool = [s for s in mine if (dra.slice_pool(s) or "") == name]
        generation = max(
            int(as_dict(as_dict(s.get("spec")).get("pool")).get("generation") or 0) for s in of_pool
        )
        current = [
            s
            for s in of_pool
            if int(as_dict(as_dict(s.get("spec")).get("pool")).get("generation") or 0) == generation
        ]
        expected = max(
            int(as_dict(as_dict(s.get("spec")).get("pool")).get("resourceSliceCount") or 1) for s in current
        )
        devices = {
            str(d.get("name")): dict(as_dict(d.get("attributes")))
            for s in current
            for d in dra.slice_devices(s)
        }
        uids = frozenset(str(meta(s).get("uid")) for s in current)
        pools[name] = Pool(generation, uids, len(current) >= expected, devices)
    return pools


def selected_attributes(classes: list[dict[str, Any]], driver: str) -> set[str]:
    """Short names of the attributes the driver's DeviceClasses mention in their CEL selectors."""
    text = "\n".join(e for c in classes if dra.class_driver(c) == driver for e in dra.class_selectors(c))
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_.-]*", text))


def devices_problem(before: Pool, after: Pool, pool: str, watched: set[str]) -> str | None:
    """Why the republished pool does not have the devices it had, or None."""
    gone = sorted(set(before.devices) - set(after.devices))
    if gone:
        return f"device(s) {', '.join(gone)} of pool {pool} disappeared after the plugin was replaced"
    for device, attrs in sorted(before.devices.items()):
        new = after.devices[device]
        for name in sorted(set(attrs) | set(new)):
            if name.split("/")[-1] in watched and attrs.get(name) != new.get(name):
                return (
                    f"attribute {name} of device {device} (pool {pool}) changed from {attrs.get(name)} to "
                    f"{new.get(name)}, and a DeviceClass of the driver selects on it"
                )
    return None


def republished(before: Pool, after: Pool) -> bool:
    return after.complete and (
        after.generation > before.generation or not (after.slice_uids & before.slice_uids)
    )


def _dns_name(*parts: str) -> str:
    raw = "-".join(parts).lower()
    clean = re.sub(r"[^a-z0-9.-]+", "-", raw).strip("-.")
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{clean[:200].rstrip('-.')}-{digest}"


def rollout_label(namespace: str, daemonset: str) -> str:
    """The value of ROLLOUT_LABEL on the DeviceTaintRules of one DaemonSet's waves."""
    return _dns_name(namespace, daemonset)[-63:].lstrip("-.")


class WaveRunner:
    """Runs one wave; `clock`/`sleep` are injectable, `progress` gets one line per step."""

    def __init__(
        self,
        client: ClusterClient,
        target: WaveTarget,
        *,
        timeout: float = 300.0,
        poll: float = 0.1,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.client = client
        self.target = target
        self.timeout = timeout
        self.poll = poll
        self.clock = clock
        self.sleep = sleep
        self.progress = progress
        self.result = WaveResult(target.number)
        # Nodes whose old plugin pod this run deleted; the others already ran the current revision when the
        # wave began (a wave resumed after a kill): their slices are not republished again, only checked.
        self.replaced: set[str] = set()

    def _step(self, action: str, node: str, detail: str) -> None:
        self.result.steps.append(Step(self.clock(), action, node, detail))
        if self.progress is not None:
            self.progress(f"wave {self.target.number}: {action} {node}: {detail}")

    def _fail(self, node: str, evidence: str) -> None:
        if node not in self.result.failed_nodes:
            self.result.failed_nodes[node] = evidence
            self._step("node-failed", node, evidence)

    # ------------------------------------------------------------------ reads

    def _daemonset(self) -> dict[str, Any]:
        t = self.target
        found = self.client.get(self.client.resource_for("apps/v1", "DaemonSet"), t.namespace, t.daemonset)
        if found is None:
            raise LookupError(f"DaemonSet/{t.namespace}/{t.daemonset} does not exist")
        return found

    def _current_revision(self, ds: dict[str, Any]) -> str | None:
        """The hash of the DaemonSet's newest ControllerRevision, once its controller observed its spec."""
        if as_dict(ds.get("status")).get("observedGeneration") != meta(ds).get("generation"):
            return None
        owned = [
            r
            for r in self.client.list_kind("apps", "ControllerRevision", self.target.namespace)
            if owned_by(r, ds)
        ]
        if not owned:
            return None
        newest = max(owned, key=lambda r: int(r.get("revision") or 0))
        return str(as_dict(meta(newest).get("labels")).get(REVISION_LABEL) or "") or None

    def _pods(self, ds: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {n: [] for n in self.target.nodes}
        for pod in self.client.list_kind("", "Pod", self.target.namespace):
            node = as_dict(pod.get("spec")).get("nodeName")
            if node in out and owned_by(pod, ds) and not meta(pod).get("deletionTimestamp"):
                out[node].append(pod)
        return out

    def _slices(self) -> list[dict[str, Any]]:
        return self.client.list_kind(DRA_GROUP, "ResourceSlice")

    # ------------------------------------------------------------------ the wave

    def run(self) -> WaveResult:
        t = self.target
        rules_api = self.client.find_kind(DRA_GROUP, "DeviceTaintRule") if t.drain_devices else None
        if t.drain_devices and rules_api is None:
            self.result.problem = (
                "the cluster serves no DeviceTaintRule (DRADeviceTaintRules off), so drainDevices cannot drain the "
                "wave's devices: nothing was touched"
            )
            return self.result
        ds = self._daemonset()
        revision = self._wait_for_revision()
        if revision is None:
            self.result.problem = (
                f"DaemonSet/{t.namespace}/{t.daemonset}: its controller did not observe its spec within "
                f"{self.timeout:g}s (no current ControllerRevision): nothing was touched"
            )
            return self.result
        slices = self._slices()
        before = {node: node_pools(slices, t.driver, node) for node in t.nodes}
        rules = self._taint(before) if rules_api is not None else {}
        self._replace(ds, revision)
        self._wait(ds, revision, before)
        if self.result.failed_nodes:
            self.result.taint_rules = sorted(rules)
            return self.result
        for rule, node in sorted(rules.items()):
            if rules_api is not None:
                self.client.delete(rules_api, None, rule)
            self._step("untaint", node, rule)
        return self.result

    def _wait_for_revision(self) -> str | None:
        deadline = self.clock() + self.timeout
        while True:
            revision = self._current_revision(self._daemonset())
            if revision is not None or self.clock() >= deadline:
                return revision
            self.sleep(self.poll)

    def _taint(self, before: dict[str, dict[str, Pool]]) -> dict[str, str]:
        """One NoSchedule DeviceTaintRule per pool of the wave's nodes: rule name -> node."""
        t = self.target
        rules_api = self.client.find_kind(DRA_GROUP, "DeviceTaintRule")
        assert rules_api is not None
        rules: dict[str, str] = {}
        for node in t.nodes:
            for pool in sorted(before[node]):
                name = _dns_name("dra-gitops-wave", t.daemonset, pool)
                body = {
                    "apiVersion": rules_api.api_version,
                    "kind": "DeviceTaintRule",
                    "metadata": {
                        "name": name,
                        "labels": {ROLLOUT_LABEL: rollout_label(t.namespace, t.daemonset)},
                    },
                    "spec": {
                        "deviceSelector": {"driver": t.driver, "pool": pool},
                        "taint": {"key": TAINT_KEY, "value": f"wave-{t.number}", "effect": "NoSchedule"},
                    },
                }
                self.client.apply(body)
                rules[name] = node
                self._step("taint", node, f"DeviceTaintRule/{name} (pool {pool})")
        return rules

    def _replace(self, ds: dict[str, Any], revision: str) -> None:
        pod_api = self.client.resource_for("v1", "Pod")
        for node, pods in self._pods(ds).items():
            for pod in pods:
                if as_dict(meta(pod).get("labels")).get(REVISION_LABEL) != revision:
                    self.client.delete(pod_api, self.target.namespace, name_of(pod))
                    self.replaced.add(node)
                    self._step("delete-pod", node, name_of(pod))

    def _wait(self, ds: dict[str, Any], revision: str, before: dict[str, dict[str, Pool]]) -> None:
        t = self.target
        watched = selected_attributes(self.client.list_kind(DRA_GROUP, "DeviceClass"), t.driver)
        waiting_pod, waiting_slices = set(t.nodes), set[str]()
        last: dict[str, str] = dict.fromkeys(t.nodes, "no pod of the current revision yet")
        deadline = self.clock() + self.timeout
        while waiting_pod or waiting_slices:
            nodes = {name_of(n): n for n in self.client.list_kind("", "Node")}
            pods = self._pods(ds)
            for node in sorted(waiting_pod):
                verdict = self._pod_verdict(node, nodes.get(node), pods[node], revision, last)
                if verdict is not None:
                    waiting_pod.discard(node)
                    if verdict:
                        self._fail(node, verdict)
                    else:
                        waiting_slices.add(node)
            if waiting_slices:
                slices = self._slices()
                for node in sorted(waiting_slices):
                    verdict = self._slice_verdict(
                        node, before[node], node_pools(slices, t.driver, node), watched
                    )
                    if verdict is not None:
                        waiting_slices.discard(node)
                        if verdict:
                            self._fail(node, verdict)
                        else:
                            self._step("slices-republished", node, ", ".join(sorted(before[node])) or "-")
            if (waiting_pod or waiting_slices) and self.clock() >= deadline:
                for node in sorted(waiting_pod):
                    self._fail(
                        node,
                        f"timed out after {self.timeout:g}s waiting for the new plugin pod: {last[node]}",
                    )
                for node in sorted(waiting_slices):
                    self._fail(
                        node,
                        f"timed out after {self.timeout:g}s waiting for its ResourceSlices of {t.driver} to be "
                        "republished by the new plugin",
                    )
                return
            if waiting_pod or waiting_slices:
                self.sleep(self.poll)

    def _pod_verdict(
        self,
        node: str,
        node_obj: dict[str, Any] | None,
        pods: list[dict[str, Any]],
        revision: str,
        last: dict[str, str],
    ) -> str | None:
        """None: still waiting; "": the new pod is Ready; else the evidence of the node's failure."""
        if node_obj is None:
            return f"node {node} is gone"
        if not node_ready(node_obj):
            return f"node {node} is not Ready"
        for pod in pods:
            if as_dict(meta(pod).get("labels")).get(REVISION_LABEL) != revision:
                continue
            failure = pod_failure(pod)
            if failure is not None:
                return f"pod {name_of(pod)} on {node}: {failure}"
            if pod_ready(pod):
                self._step("pod-ready", node, name_of(pod))
                return ""
            last[node] = (
                f"pod {name_of(pod)} is {as_dict(pod.get('status')).get('phase') or 'Pending'}, not Ready"
            )
        return None

    def _slice_verdict(
        self, node: str, before: dict[str, Pool], after: dict[str, Pool], watched: set[str]
    ) -> str | None:
        """None: still waiting; "": republished with the same devices; else the evidence."""
        if not before or node not in self.replaced:
            return "" if any(p.complete for p in after.values()) else None
        for name, pool in sorted(before.items()):
            now = after.get(name)
            if now is None or not republished(pool, now):
                return None
        for name, pool in sorted(before.items()):
            problem = devices_problem(pool, after[name], name, watched)
            if problem is not None:
                return f"node {node}: {problem}"
        return ""


def run_wave(client: ClusterClient, target: WaveTarget, **options: Any) -> WaveResult:
    """Run one wave (see the module docstring); `options` as `WaveRunner` takes them."""
    return WaveRunner(client, target, **options).run()


def release_wave(client: ClusterClient, result: WaveResult) -> list[str]:
    """Remove the DeviceTaintRules a failed wave left in place (after its revert); returns their names."""
    rules_api = client.find_kind(DRA_GROUP, "DeviceTaintRule")
    removed = []
    for name in result.taint_rules:
        if rules_api is not None:
            client.delete(rules_api, None, name)
        removed.append(name)
    result.taint_rules = []
    return removed


__all__ = [
    "Pool",
    "Step",
    "WaveResult",
    "WaveRunner",
    "WaveTarget",
    "node_pools",
    "release_wave",
    "rollout_label",
    "run_wave",
]
