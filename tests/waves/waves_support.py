"""The harness of the driver-upgrade-in-waves tests (issue 32): a simulated cluster of seven nodes, a canary
node and six GPU nodes in two zones, the example driver (canary and main kubelet plugin) in a Git repository
whose dra-gitops.yaml gives the driver a `rollout`, and a `Reconciler` following it (the path `dra-gitops
run` takes).

Zones: sim-node-1..3 in zone-a, sim-node-4..6 in zone-b, so the waves' order (zones in turn) differs from
the names' order: waves ["1", "2", "50%", "100%"] over six nodes are [1], [4], [2], [5, 3, 6].
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from helpers import GitRemote, wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import PassResult, ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.store.operations import TargetRef, suspend
from reconciler.loop.store.state import StateStore
from reconciler.model.wave_progress import RolloutProgress, current_rollout
from reconciler.outcome import Outcome
from reconciler.sim.controlplane import ControlPlane, install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"
TARGET = "gpu-cluster"
NS = "gpu-system"
MAIN = "gpu-example-kubelet-plugin"
CANARY = "gpu-example-kubelet-plugin-canary"
DRIVER = "gpu.example.com"
OLD, NEW = "v0.3.0", "v0.4.0"
GPU_NODES = [f"sim-node-{i}" for i in range(1, 7)]
WAVES = [["sim-node-1"], ["sim-node-4"], ["sim-node-2"], ["sim-node-5", "sim-node-3", "sim-node-6"]]
ZONE = "topology.kubernetes.io/zone"


def node_labels() -> list[dict[str, str]]:
    labels: list[dict[str, str]] = [{"dra-gitops.io/canary": "true", ZONE: "zone-a"}]
    labels += [{ZONE: "zone-a" if i <= 3 else "zone-b"} for i in range(1, 7)]
    return labels


@dataclass
class Env:
    sim: SimCluster
    plane: ControlPlane
    client: ClusterClient
    remote: GitRemote
    tmp: Path

    def reconciler(self) -> Reconciler:
        source = GitSource(self.remote.url, self.tmp / "cache", branch="main")
        options = ReconcileOptions(
            DeliverOptions(target=TARGET, grace=5.0, stage_timeout=60, verify_timeout=60)
        )
        revisions = GitRevisions(source, kept=KeptRevision(self.client, TARGET))
        return Reconciler(self.client, revisions, options, CheckOptions())

    def store(self) -> StateStore:
        return StateStore(self.client, TARGET, "dra-gitops")

    def rollout(self) -> RolloutProgress | None:
        marker = self.store().load().in_progress
        return current_rollout(marker.rollout) if marker is not None else None

    def set_image(self, name: str, image: str) -> str:
        """Commit the driver workload `name` (main or canary) running `image`; the sha."""
        path = (
            self.remote.work
            / "10-driver"
            / ("kubelet-plugin.yaml" if name == MAIN else "kubelet-plugin-canary.yaml")
        )
        doc = yaml.safe_load(path.read_text())
        doc["spec"]["template"]["spec"]["containers"][0]["image"] = (
            f"registry.example.com/gpu-example-driver:{image}"
        )
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        sha = self.remote.commit(f"{name}: {image}")
        self.remote.git("push", "--quiet", "origin", "main")
        return sha

    def plugin_pods(self, ds: str = MAIN) -> dict[str, dict[str, Any]]:
        """The DaemonSet's pods by node (not terminating)."""
        live = self.client.get(self.client.resource_for("apps/v1", "DaemonSet"), NS, ds) or {}
        uid = live.get("metadata", {}).get("uid")
        out = {}
        for pod in self.client.list_kind("", "Pod", NS):
            owners = pod["metadata"].get("ownerReferences") or []
            if any(o.get("uid") == uid for o in owners) and not pod["metadata"].get("deletionTimestamp"):
                out[pod["spec"]["nodeName"]] = pod
        return out

    def images(self) -> dict[str, str]:
        return {
            node: pod["spec"]["containers"][0]["image"].rsplit(":", 1)[1]
            for node, pod in sorted(self.plugin_pods().items())
        }

    def ready_on(self, image: str, nodes: list[str]) -> bool:
        pods = self.plugin_pods()
        return all(
            node in pods
            and pods[node]["spec"]["containers"][0]["image"].endswith(image)
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (pods[node].get("status") or {}).get("conditions") or []
            )
            for node in nodes
        )

    def taint_rules(self) -> list[dict[str, Any]]:
        return self.client.list_kind("resource.k8s.io", "DeviceTaintRule")

    def writes(self) -> list[tuple[str, str, str]]:
        """(verb, resource, name) of the pod deletions and DeviceTaintRule writes the server saw, in order."""
        assert self.sim.api.audit is not None
        return [
            (e.request.verb, e.request.resource, e.request.name)
            for e in self.sim.api.audit.events
            if not e.dry_run
            and e.code < 400
            and (
                (e.request.verb == "delete" and e.request.resource == "pods" and e.request.namespace == NS)
                or (e.request.verb in ("patch", "delete") and e.request.resource == "devicetaintrules")
            )
        ]


def seed(remote: GitRemote, rollout: dict[str, Any]) -> None:
    """The example's foundation, driver and class, the driver upgraded in waves (`rollout`)."""
    for folder in ("00-foundation", "10-driver", "20-classes"):
        shutil.copytree(EXAMPLE / folder, remote.work / folder)
    main = remote.work / "10-driver" / "kubelet-plugin.yaml"
    doc = yaml.safe_load(main.read_text())
    del doc["spec"]["updateStrategy"]  # the reconciler delivers OnDelete
    main.write_text(yaml.safe_dump(doc, sort_keys=False))
    config = {
        "paths": ["00-foundation", "10-driver", "20-classes"],
        "drivers": [{"name": DRIVER, "rollout": rollout}],
    }
    (remote.work / "dra-gitops.yaml").write_text(yaml.safe_dump(config, sort_keys=False))


def start(tmp: Path, rollout: dict[str, Any]) -> Iterator[Env]:
    remote = GitRemote(tmp / "git")
    seed(remote, rollout)
    remote.commit("the example driver, upgraded in waves")
    remote.git("push", "--quiet", "origin", "main")
    with SimCluster(served_versions=("v1", "v1beta2"), audit=True) as sim:
        plane = install(sim, nodes=7, devices_per_node=2, node_labels=node_labels(), time_scale=0.05)
        try:
            with ClusterClient.for_url(sim.url) as client:
                yield Env(sim, plane, client, remote, tmp)
        finally:
            plane.stop()


def upgraded_canary(env: Env) -> None:
    """The first commit applied, then the canary on the new image (the driver-canary rule's first step)."""
    first = env.reconciler().reconcile()
    assert first.outcome == "applied", first.message
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old plugin Ready on every GPU node")
    env.set_image(CANARY, NEW)
    canary = env.reconciler().reconcile()
    assert canary.outcome == "applied", canary.message


def node_of_writes(
    env: Env, before: dict[str, dict[str, Any]], writes: list[tuple[str, str, str]]
) -> list[tuple[str, str]]:
    """(action, node) of each write: delete-pod (of the pods in `before`), taint, untaint."""
    pod_nodes = {pod["metadata"]["name"]: node for node, pod in before.items()}
    out = []
    for verb, resource, name in writes:
        if resource == "pods":
            if name in pod_nodes:
                out.append(("delete-pod", pod_nodes[name]))
            continue
        node = next((n for n in sorted(GPU_NODES, key=len, reverse=True) if n in name), "?")
        out.append(("taint" if verb == "patch" else "untaint", node))
    return out


def suspended_while_soaking(env: Env, wave: int) -> str:
    """Deliver the new plugin to the main DaemonSet and `suspend` the rollout while it soaks after `wave`; the
    pass ends suspended. The new commit's sha."""
    sha = env.set_image(MAIN, NEW)
    out: list[PassResult] = []
    thread = threading.Thread(target=lambda: out.append(env.reconciler().reconcile()), daemon=True)
    thread.start()
    wait_for(
        lambda: (p := env.rollout()) is not None and p.wave == wave and p.phase == "soaking",
        60,
        f"the rollout soaking after wave {wave}",
        interval=0.02,
    )
    suspend(env.client, TargetRef(TARGET, "dra-gitops"), "tester", "hold the waves")
    thread.join(120)
    assert out and out[0].outcome == Outcome.SUSPENDED, out
    return sha
