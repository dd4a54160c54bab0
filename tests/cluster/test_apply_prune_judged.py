"""A one-shot `apply DIR` judges what it prunes: the objects it last delivered that this tree no longer has
are deletes in the policy input (no-delete-in-use runs on them), and users that go with a deleted owner
(a Deployment's pods and their generated claims) are not counted."""

from __future__ import annotations

import json
from pathlib import Path

from test_apply_command import copy_example, run, sim, store_snapshot  # noqa: F401  (fixture)

from reconciler.cluster.client import ClusterClient
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan
from reconciler.policy.inputdoc import ClusterFacts, build_input
from reconciler.sim.server import SimCluster


def _apply(repo: Path, kubeconfig: Path) -> tuple[int, dict]:
    result = run(
        "apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json", "--stage-timeout", "60"
    )
    return result.exit_code, json.loads(result.stdout)


def test_removing_an_in_use_class_from_the_tree_is_denied_with_nothing_written(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    assert _apply(repo, kubeconfig)[0] == 0
    (repo / "20-classes" / "gpu-class.yaml").unlink()
    before = store_snapshot(cluster)
    code, report = _apply(repo, kubeconfig)
    assert code == 1
    assert report["outcome"] == "denied"
    [finding] = [f for f in report["findings"] if f["rule"] == "no-delete-in-use"]
    assert finding["ref"] == "DeviceClass/gpu.example.com"
    assert "ResourceClaimTemplate/ml-team/single-gpu" in finding["msg"]
    assert "ResourceClaim/ml-team/shared-gpu" in finding["msg"]
    assert store_snapshot(cluster) == before
    with ClusterClient.for_url(cluster.url) as client:
        assert client.list_kind("resource.k8s.io", "DeviceClass")


def test_a_deployment_and_the_template_only_it_used_deleted_together_pass(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    assert _apply(repo, kubeconfig)[0] == 0
    (repo / "40-workloads" / "trainer.yaml").unlink()
    (repo / "30-claims" / "single-gpu-template.yaml").unlink()
    code, report = _apply(repo, kubeconfig)
    assert [f for f in report["findings"] if f["rule"] == "no-delete-in-use"] == []
    assert (code, report["outcome"]) == (0, "applied"), report
    with ClusterClient.for_url(cluster.url) as client:
        assert client.list_kind("resource.k8s.io", "ResourceClaimTemplate") == []


def _live(kind: str, name: str, uid: str, owners: list[dict], labels: dict | None = None) -> Manifest:
    api = {"Pod": "v1", "ResourceClaim": "resource.k8s.io/v1", "Deployment": "apps/v1", "Job": "batch/v1"}[
        kind
    ]
    meta = {"name": name, "namespace": "ml", "uid": uid, "ownerReferences": owners, "labels": labels or {}}
    body = {"apiVersion": api, "kind": kind, "metadata": meta, "spec": {}}
    return Manifest(body=body, ref=ref_of(body), path="", line=0)


def test_owner_chains_mark_what_goes_with_a_deleted_owner() -> None:
    deployment = _live("Deployment", "trainer", "d1", [])
    rs_owner = [{"kind": "ReplicaSet", "name": "trainer-5d9f", "uid": "rs1"}]
    pod = _live("Pod", "trainer-5d9f-x", "p1", rs_owner, {"pod-template-hash": "5d9f"})
    claim = _live(
        "ResourceClaim", "trainer-5d9f-x-gpu", "c1", [{"kind": "Pod", "name": pod.ref.name, "uid": "p1"}]
    )
    job = _live("Job", "sweep", "j1", [])
    job_pod = _live("Pod", "sweep-abc", "p2", [{"kind": "Job", "name": "sweep", "uid": "j1"}])
    other = _live(
        "Pod",
        "other",
        "p3",
        [{"kind": "ReplicaSet", "name": "other-1", "uid": "rs2"}],
        {"pod-template-hash": "1"},
    )
    live = [deployment, pod, claim, job, job_pod, other]
    plan = compute_plan([deployment, job], [])
    doc = build_input(
        head=[], base=[deployment, job], plan=plan, cluster=ClusterFacts("v1.36.0", {}, objects=live)
    )
    marks = {o["_dra"]["ref"]: o["_dra"].get("removed_with") for o in doc["cluster"]["objects"]}
    assert marks == {
        "Deployment/ml/trainer": None,
        "Pod/ml/trainer-5d9f-x": "Deployment/ml/trainer",
        "ResourceClaim/ml/trainer-5d9f-x-gpu": "Deployment/ml/trainer",
        "Job/ml/sweep": None,
        "Pod/ml/sweep-abc": "Job/ml/sweep",
        "Pod/ml/other": None,
    }
