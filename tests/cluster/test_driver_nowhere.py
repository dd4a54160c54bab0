"""A main driver DaemonSet that runs on no node fails stage 1 at once, over HTTP against the simulated cluster.

Its DaemonSet controller (the sim's, which picks nodes as the real one does) observes it and desires 0
pods: the rollout is "complete" and would verify nothing. `dra-gitops apply` fails the stage naming the
nodeAffinity or nodeSelector that matched no node; the reconcile loop rolls the commit back. Unchanged,
or in a cluster with no nodes at all, it is a warning.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote, wait_for

from reconciler.checklist.gather import gather_facts
from reconciler.cli import cli
from reconciler.cluster.apply import apply_plan
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.inventory import collect_inventory
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.model import dra
from reconciler.model.loader import load_paths
from reconciler.model.plan import compute_plan
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
MAIN = "10-driver/kubelet-plugin.yaml"
MAIN_REF = "DaemonSet/gpu-system/gpu-example-kubelet-plugin"
GPU_PRESENT = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "nvidia.com/gpu.present", "operator": "In", "values": ["true"]}
                    ]
                }
            ]
        }
    }
}
AFFINITY_MISS = (
    f"{MAIN_REF}: driver {MAIN_REF} runs on no node: its nodeAffinity requires nvidia.com/gpu.present In "
    "[true]: no node has the label nvidia.com/gpu.present (0 pods desired), so it verifies nothing"
)


def sim_with(nodes: int) -> Iterator[SimCluster]:
    """`nodes` nodes with two devices each, the first a canary node (the main driver avoids it)."""
    with SimCluster() as cluster:
        labels = [{"dra-gitops.io/canary": "true"}] + [{}] * max(0, nodes - 1)
        plane = install(cluster, nodes=nodes, devices_per_node=2, node_labels=labels[:nodes])
        try:
            yield cluster
        finally:
            plane.stop()


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    yield from sim_with(2)


def edit_main(root: Path, change: Any) -> None:
    path = root / MAIN
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(doc["spec"]["template"]["spec"])
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def require_gpu_present(spec: dict[str, Any]) -> None:
    spec["affinity"] = GPU_PRESENT


def select_gpu_nodes(spec: dict[str, Any]) -> None:
    del spec["affinity"]
    spec["nodeSelector"] = {"example.com/gpu": "true"}


def drivers_only(tmp_path: Path, change: Any = None, canary: bool = True) -> Path:
    """The example's namespaces, RBAC and drivers (stages 0 and 1): nothing that needs devices."""
    root = tmp_path / "drivers"
    for part in ("00-foundation", "10-driver"):
        shutil.copytree(EXAMPLE / part, root / part)
    if not canary:
        (root / "10-driver" / "kubelet-plugin-canary.yaml").unlink()
    if change is not None:
        edit_main(root, change)
    return root


def main_daemonset(client: ClusterClient) -> dict[str, Any]:
    live = client.get(client.resource_for("apps/v1", "DaemonSet"), "gpu-system", "gpu-example-kubelet-plugin")
    assert live is not None
    return live


def test_apply_fails_stage_1_when_the_main_drivers_affinity_matches_no_node(
    sim: SimCluster, tmp_path: Path
) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    edit_main(repo, require_gpu_present)
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(
        cli,
        ["apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json", "--stage-timeout", "120"],
    )
    assert result.exit_code == 1, result.output
    report = json.loads(result.stdout)
    assert report["outcome"] == "apply-failed", report["outcome"]
    failed = [s for s in report["stages"] if s.get("error")]
    assert [s["label"] for s in failed] == ["1 drivers"], report["stages"]
    # fail fast, not the stage timeout: the controller said 0 pods and the Nodes say why
    assert (
        failed[0]["error"]
        == f"stage 1 drivers: fail fast: {AFFINITY_MISS}; label the nodes that have its devices so that they match, or correct the affinity"
    )
    assert not any(s["label"].startswith(("2 ", "3 ", "4 ")) and s.get("applied") for s in report["stages"])


def test_a_node_selector_that_matches_no_node_fails_and_unchanged_warns(
    sim: SimCluster, tmp_path: Path
) -> None:
    manifests = load_paths([drivers_only(tmp_path, select_gpu_nodes)]).manifests
    plan = compute_plan([], manifests)
    with ClusterClient.for_url(sim.url) as client:
        first = apply_plan(client, plan, applyset_id=None, stage_timeout=60)
        again = apply_plan(client, plan, applyset_id=None, stage_timeout=60)
        # Without any policy: `inventory` warns and the checklist notes it on the driver.
        inventory = collect_inventory(client)
        facts = gather_facts(client, "gpu-cluster", "dra-gitops")
    assert not first.ok
    error = first.error or ""
    assert error.startswith(f"stage 1 drivers: fail fast: {MAIN_REF}: driver {MAIN_REF} runs on no node: "), (
        error
    )
    assert (
        "its nodeSelector example.com/gpu=true matches no node (no node has the label example.com/gpu)"
        in error
    )
    assert error.endswith(
        "label the nodes that have its devices: kubectl label node <node> example.com/gpu=true"
    )
    # The same revision again: the DaemonSet is unchanged, so it is a warning (it changed nothing this time).
    assert again.ok, again.error
    warnings = [w for stage in again.stages for w in stage.warnings]
    assert any(
        w.startswith(f"{MAIN_REF}: driver {MAIN_REF} runs on no node: its nodeSelector") for w in warnings
    )
    idle = f"driver {MAIN_REF} runs on no node: its nodeSelector example.com/gpu=true matches no node"
    assert any(w.startswith(idle) for w in inventory.warnings), inventory.warnings
    (main,) = [w for w in facts.driver_workloads if w.ref == MAIN_REF]
    assert (main.idle_reason or "").startswith(idle), main


def test_a_driver_that_runs_somewhere_passes(sim: SimCluster, tmp_path: Path) -> None:
    plan = compute_plan([], load_paths([drivers_only(tmp_path)]).manifests)
    with ClusterClient.for_url(sim.url) as client:
        result = apply_plan(client, plan, applyset_id=None, stage_timeout=60)
        assert result.ok, result.error
        assert main_daemonset(client)["status"]["desiredNumberScheduled"] == 1
    assert not any("runs on no node" in w for stage in result.stages for w in stage.warnings)


def test_a_cluster_with_no_nodes_warns_instead_of_blaming_the_selector(tmp_path: Path) -> None:
    # (no canary: a changed canary that runs nowhere fails its own stage, 1a, nodes or not)
    plan = compute_plan([], load_paths([drivers_only(tmp_path, require_gpu_present, canary=False)]).manifests)
    for cluster in sim_with(0):
        with ClusterClient.for_url(cluster.url) as client:
            result = apply_plan(client, plan, applyset_id=None, stage_timeout=60)
    assert result.ok, result.error
    warnings = [w for stage in result.stages for w in stage.warnings]
    assert (
        f"{MAIN_REF}: driver {MAIN_REF} runs on no node: the cluster has no nodes (0 pods desired), so it verifies nothing"
        in warnings
    )


def test_the_loop_rolls_back_a_commit_whose_main_driver_runs_nowhere(sim: SimCluster, tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    with ClusterClient.for_url(sim.url) as client:
        source = GitSource(remote.url, tmp_path / "cache", branch="main")
        options = ReconcileOptions(
            DeliverOptions(target="gpu-cluster", grace=5.0, stage_timeout=120, verify_timeout=60)
        )
        reconciler = Reconciler(client, GitRevisions(source), options, CheckOptions())
        remote.commit_and_push("example")
        assert reconciler.reconcile().outcome == "applied"

        edit_main(remote.work, require_gpu_present)
        remote.commit_and_push("driver: only on nodes labelled nvidia.com/gpu.present")
        result = reconciler.reconcile()
        assert result.outcome == "rolled-back", (result.message, result.records)
        assert result.delivery is not None and result.delivery.outcome == "apply-failed"
        assert result.delivery.applied is not None
        assert AFFINITY_MISS in (result.delivery.applied.error or ""), result.delivery.applied.error
        assert result.rollback is not None and result.rollback.outcome == "applied"

        # Back on the last good template: the driver runs on the non-canary node again.
        def restored() -> dict[str, Any] | None:
            live = main_daemonset(client)
            affinity = live["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
            terms = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            key = terms[0]["matchExpressions"][0]["key"]
            done = key == "dra-gitops.io/canary" and live["status"].get("desiredNumberScheduled") == 1
            return live if done else None

        wait_for(restored, 30, "the main driver back on its last good node affinity")


def allow_no_nodes(root: Path) -> None:
    path = root / MAIN
    (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
    doc["metadata"].setdefault("annotations", {})["dra-gitops.io/allow-no-nodes"] = "true"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))


def test_a_main_driver_allowed_no_nodes_passes_with_a_notice_naming_the_selector(
    sim: SimCluster, tmp_path: Path
) -> None:
    root = drivers_only(tmp_path, select_gpu_nodes)
    allow_no_nodes(root)
    manifests = load_paths([root]).manifests
    with ClusterClient.for_url(sim.url) as client:
        result = apply_plan(client, compute_plan([], manifests), applyset_id=None, stage_timeout=60)
    assert result.ok, result.error
    warnings = [w for stage in result.stages for w in stage.warnings]
    notice = [w for w in warnings if w.startswith(f"{MAIN_REF}: driver {MAIN_REF} runs on no node")]
    assert notice and "its nodeSelector example.com/gpu=true matches no node" in notice[0]
    assert notice[0].endswith(
        'passes: annotation dra-gitops.io/allow-no-nodes: "true" (a node pool may scale to zero)'
    )


CANARY_REF = "DaemonSet/gpu-system/gpu-example-kubelet-plugin-canary"


def test_a_canary_with_0_pods_fails_stage_1_even_allowed_no_nodes(tmp_path: Path) -> None:
    """A canary delivered by the change that runs on no node fails its stage: allowNoNodes (the annotation,
    or `drivers:` in dra-gitops.yaml) covers a main driver's autoscaled pool, never a canary."""
    root = drivers_only(tmp_path)
    for name in (MAIN, "10-driver/kubelet-plugin-canary.yaml"):
        path = root / name
        (doc,) = [d for d in yaml.safe_load_all(path.read_text()) if d]
        doc["metadata"].setdefault("annotations", {})["dra-gitops.io/allow-no-nodes"] = "true"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    manifests = load_paths([root]).manifests
    hints = dra.hints_of(manifests, allow_no_nodes=["gpu.example.com"])
    with SimCluster() as cluster:
        # two nodes, none labelled dra-gitops.io/canary: the canary's nodeSelector matches no node
        plane = install(cluster, nodes=2, devices_per_node=2)
        try:
            with ClusterClient.for_url(cluster.url) as client, dra.driver_hints(hints):
                result = apply_plan(client, compute_plan([], manifests), applyset_id=None, stage_timeout=60)
        finally:
            plane.stop()
    assert not result.ok
    assert [s.stage for s in result.stages if not s.ok] == [1], [(s.stage, s.error) for s in result.stages]
    error = str(result.error)
    assert error.startswith(f"stage 1a drivers: fail fast: {CANARY_REF}: canary {CANARY_REF}"), error
    assert "its nodeSelector dra-gitops.io/canary=true matches no node" in error, error
