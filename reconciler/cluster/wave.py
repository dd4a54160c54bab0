"""One wave of a driver upgrade in waves (issue 32): drain, replace the plugin, verify the slices, undrain.

`run_wave` works on the nodes of one planned wave (`reconciler.model.waves`) of a main driver DaemonSet that
was delivered with `updateStrategy: OnDelete` and a new template, so its controller replaces nothing by itself:

1. it reads each wave node's ResourceSlices of the driver (pools, devices, slice objects, generations) and
   gives what the comparison of step 5 needs to `keep` (`wave_snapshot.WaveSnapshot`, saved in the rollout's
   progress); a wave resumed after a pass that died compares its nodes with the `saved` snapshot instead;
2. with `drain_devices`, one DeviceTaintRule per pool of those nodes (`NoSchedule`: new claims go elsewhere,
   running pods keep their devices), in the version the cluster serves; a cluster that serves none fails the
   wave before anything is touched (a drain is never skipped silently);
3. it deletes the DaemonSet's pods on those nodes that do not run its current revision (its newest
   ControllerRevision's `controller-revision-hash`); the controller creates the new ones;
4. it waits for each node's new pod Ready (a pod that will not become Ready by itself fails the node at once,
   with the evidence);
5. it waits for each node's slices republished by the new pod (a pool's generation moved on, or its slices
   are new objects), complete, with the same devices: the same names, and the same values of the attributes
   the driver's DeviceClasses select on (a device that disappeared fails the node);
6. with a `probe`, on each node still good, a ResourceClaim of the probe's class (tolerating the wave's taint)
   and a pod of its image must allocate and run (`reconciler/cluster/probe.py`; steps `probe`/`probe-failed`);
7. it removes the taint rules when every node passed; on a failure they stay (the revert needs the devices
   drained) and `release_wave` removes them.

A wave node that is gone or not Ready is a failed node, with the evidence (`node X is not Ready since
<lastTransitionTime>: <reason>: <message>`): already so when the wave starts, it is not touched (no taint,
its plugin pod left alone); going NotReady at any later point, until the untaint, fails it then.

Each step is recorded in order with its time (`WaveResult.steps`). The caller judges `maxFailedNodes`.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from reconciler.cluster.objects import condition, meta, name_of, owned_by, pod_ready
from reconciler.cluster.probe import TAINT_KEY, run_probe
from reconciler.cluster.readiness.health import pod_failure
from reconciler.cluster.readiness.rollout import newest_revision_hash
from reconciler.cluster.wave_pools import Pool, devices_problem, node_pools, republished, selected_attributes
from reconciler.cluster.wave_snapshot import WaveSnapshot
from reconciler.model.driver_rollout import Probe
from reconciler.model.readers import as_dict

if TYPE_CHECKING:
    from reconciler.cluster.client import ClusterClient

REVISION_LABEL = "controller-revision-hash"
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
    probe: Probe | None = None  # run on the wave's nodes after their slices are republished (None: no probe)
    # where the probe's claims and pods go ("": the DaemonSet's namespace); deploy/base grants the
    # reconciler's own namespace (dra-gitops)
    probe_namespace: str = ""


@dataclass(frozen=True)
class Step:
    at: float  # time.monotonic()
    action: str  # taint, delete-pod, pod-ready, slices-republished, probe, probe-failed, untaint, node-failed
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


def _dns_name(*parts: str) -> str:
    raw = "-".join(parts).lower()
    clean = re.sub(r"[^a-z0-9.-]+", "-", raw).strip("-.")
    digest = hashlib.sha256(raw.encode()).hexdigest()[:8]
    return f"{clean[:200].rstrip('-.')}-{digest}"


def rollout_label(namespace: str, daemonset: str) -> str:
    """The value of ROLLOUT_LABEL on the DeviceTaintRules of one DaemonSet's waves."""
    return _dns_name(namespace, daemonset)[-63:].lstrip("-.")


def observed_revision(client: ClusterClient, ds: dict[str, Any]) -> str | None:
    """The hash of the DaemonSet's newest ControllerRevision, once its controller observed its spec."""
    if as_dict(ds.get("status")).get("observedGeneration") != meta(ds).get("generation"):
        return None
    namespace = str(meta(ds).get("namespace") or "")
    return newest_revision_hash(ds, client.list_kind("apps", "ControllerRevision", namespace))


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
        saved: WaveSnapshot | None = None,
        keep: Callable[[WaveSnapshot], None] | None = None,
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
        # The wave's snapshot kept before a pass that died (`saved`): its nodes are compared with it, as if
        # this run had replaced them; `keep` is given the snapshot before any old plugin pod is deleted.
        self.saved = saved if saved is not None and saved.wave == target.number else None
        self.keep = keep

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

    def _pods(self, ds: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
        out: dict[str, list[dict[str, Any]]] = {n: [] for n in self.target.nodes}
        for pod in self.client.list_kind("", "Pod", self.target.namespace):
            node = as_dict(pod.get("spec")).get("nodeName")
            if node in out and owned_by(pod, ds) and not meta(pod).get("deletionTimestamp"):
                out[node].append(pod)
        return out

    def _nodes(self) -> dict[str, dict[str, Any]]:
        return {name_of(n): n for n in self.client.list_kind("", "Node")}

    def _good_nodes(self) -> list[str]:
        """The wave's nodes that have not failed (yet)."""
        return [n for n in self.target.nodes if n not in self.result.failed_nodes]

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
        watched = selected_attributes(self.client.list_kind(DRA_GROUP, "DeviceClass"), t.driver)
        slices = self._slices()
        before = {node: node_pools(slices, t.driver, node) for node in t.nodes}
        if self.saved is not None:  # what the old plugin published, read before a pass that died replaced it
            before.update({n: dict(self.saved.pools[n]) for n in t.nodes if n in self.saved.pools})
            watched = set(self.saved.selects)
        if self.keep is not None:
            self.keep(
                WaveSnapshot.of(t.number, before, watched, self.saved is not None and self.saved.digests)
            )
        self._check_nodes(self._nodes())  # a node not Ready already fails before it is touched
        rules = self._taint(before) if rules_api is not None else {}
        self._replace(ds, revision)
        self._wait(ds, revision, before, watched)
        if t.probe is not None:
            self._probe(t.probe)
        self._check_nodes(self._nodes())
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
            revision = observed_revision(self.client, self._daemonset())
            if revision is not None or self.clock() >= deadline:
                return revision
            self.sleep(self.poll)

    def _taint(self, before: dict[str, dict[str, Pool]]) -> dict[str, str]:
        """One NoSchedule DeviceTaintRule per pool of the wave's nodes: rule name -> node."""
        t = self.target
        rules_api = self.client.find_kind(DRA_GROUP, "DeviceTaintRule")
        assert rules_api is not None
        rules: dict[str, str] = {}
        for node in self._good_nodes():
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
            if node in self.result.failed_nodes:
                continue
            for pod in pods:
                if as_dict(meta(pod).get("labels")).get(REVISION_LABEL) != revision:
                    self.client.delete(pod_api, self.target.namespace, name_of(pod))
                    self.replaced.add(node)
                    self._step("delete-pod", node, name_of(pod))

    def _wait(
        self, ds: dict[str, Any], revision: str, before: dict[str, dict[str, Pool]], watched: set[str]
    ) -> None:
        t = self.target
        waiting_pod, waiting_slices = set(self._good_nodes()), set[str]()
        last: dict[str, str] = dict.fromkeys(t.nodes, "no pod of the current revision yet")
        deadline = self.clock() + self.timeout
        while waiting_pod or waiting_slices:
            self._check_nodes(self._nodes())
            waiting_pod -= set(self.result.failed_nodes)
            waiting_slices -= set(self.result.failed_nodes)
            pods = self._pods(ds)
            for node in sorted(waiting_pod):
                verdict = self._pod_verdict(node, pods[node], revision, last)
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
        pods: list[dict[str, Any]],
        revision: str,
        last: dict[str, str],
    ) -> str | None:
        """None: still waiting; "": the new pod is Ready; else the evidence of the node's failure."""
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

    def _check_nodes(self, nodes: Mapping[str, Mapping[str, Any]]) -> None:
        """A wave node that is gone or not Ready while the wave runs is a failed node, with its condition."""
        for node in self.target.nodes:
            if node not in self.result.failed_nodes:
                evidence = node_not_ready(node, nodes.get(node))
                if evidence is not None:
                    self._fail(node, evidence)

    def _probe(self, probe: Probe) -> None:
        """The probe on each node that passed so far: a claim of its class and a pod of its image must run."""
        t = self.target
        nodes = self._good_nodes()
        if not nodes:
            return
        progress = self.progress
        verdicts = run_probe(
            self.client,
            t.probe_namespace or t.namespace,
            t.driver,
            nodes,
            probe,
            self.clock() + self.timeout,
            clock=self.clock,
            sleep=self.sleep,
            poll=self.poll,
            progress=None if progress is None else (lambda line: progress(f"wave {t.number}: {line}")),
        )
        for node in nodes:
            evidence = verdicts.get(node)
            if evidence is None:
                self._step("probe", node, f"{probe.device_class} / {probe.image}")
            else:
                self._step("probe-failed", node, evidence)
                self._fail(node, evidence)

    def _slice_verdict(
        self, node: str, before: dict[str, Pool], after: dict[str, Pool], watched: set[str]
    ) -> str | None:
        """None: still waiting; "": republished with the same devices; else the evidence."""
        saved = self.saved is not None and node in self.saved.pools
        after = self.saved.comparable(after) if saved and self.saved is not None else after
        if not before or (node not in self.replaced and not saved):
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


def node_not_ready(name: str, node: Mapping[str, Any] | None) -> str | None:
    """Why `node` cannot take part in a wave (gone, or not Ready: since when, its reason and message), or None."""
    if node is None:
        return f"node {name} is gone"
    ready = condition(node, "Ready")
    if ready is not None and ready.get("status") == "True":
        return None
    if ready is None:
        return f"node {name} is not Ready: it reports no Ready condition"
    status = ready.get("status")
    since = ready.get("lastTransitionTime") or "an unknown time"
    state = "" if status == "False" else f" (Ready={status})"
    why = ": ".join(str(x) for x in (ready.get("reason"), ready.get("message")) if x)
    return f"node {name} is not Ready since {since}{state}" + (f": {why}" if why else "")


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
    "TAINT_KEY",
    "Pool",
    "Step",
    "WaveResult",
    "WaveRunner",
    "WaveTarget",
    "node_not_ready",
    "node_pools",
    "release_wave",
    "rollout_label",
    "run_wave",
]
