"""The reconcile loop following repositories kept as a chart and as a kustomize overlay, on the simulated
cluster with the example driver: the first pass applies and verifies the rendered objects, a values change
(the canary release's driver image) is delivered and verified, and a pass over an unchanged head writes
nothing and renders nothing again."""

from __future__ import annotations

from pathlib import Path

import yaml
from render_support import follow, seeded

from reconciler.cluster.client import ClusterClient
from reconciler.outcome import Outcome


def daemonset_image(client: ClusterClient, name: str) -> str:
    live = client.get(client.resource_for("apps/v1", "DaemonSet"), "gpu-system", name) or {}
    return str(live["spec"]["template"]["spec"]["containers"][0]["image"])


def test_a_chart_repository_is_applied_verified_and_a_values_change_delivered(
    client: ClusterClient, tmp_path: Path
) -> None:
    remote = seeded(tmp_path, "helm")
    remote.commit_and_push("driver from the chart")
    reconciler = follow(client, remote, tmp_path)
    first = reconciler.reconcile()
    assert first.outcome == Outcome.APPLIED, (first.message, first.records)
    assert daemonset_image(client, "gpu-driver-kubelet-plugin").endswith(":v0.3.0")

    (remote.work / "values/canary.yaml").write_text(
        yaml.safe_dump({"canaryNodes": "only", "image": {"tag": "v0.4.0"}})
    )
    remote.commit_and_push("canary release to v0.4.0")
    canary = reconciler.reconcile()
    assert canary.outcome == Outcome.APPLIED, (canary.message, canary.records)
    assert daemonset_image(client, "gpu-driver-canary-kubelet-plugin").endswith(":v0.4.0")
    assert daemonset_image(client, "gpu-driver-kubelet-plugin").endswith(":v0.3.0")

    writes = client.writes_sent
    steady = reconciler.reconcile()
    assert steady.outcome == Outcome.UNCHANGED
    assert client.writes_sent == writes


def test_a_kustomize_overlay_target_is_applied_and_an_overlay_change_delivered(
    client: ClusterClient, tmp_path: Path
) -> None:
    remote = seeded(tmp_path, "kustomize")
    remote.commit_and_push("base and overlays")
    reconciler = follow(client, remote, tmp_path, path="overlays/staging")
    first = reconciler.reconcile()
    assert first.outcome == Outcome.APPLIED, (first.message, first.records)
    deployments = client.resource_for("apps/v1", "Deployment")
    live = client.get(deployments, "ml-team", "trainer") or {}
    assert live["spec"]["replicas"] == 1
    assert live["metadata"]["labels"]["environment.example.org/name"] == "staging"

    patch = remote.work / "overlays/staging/trainer-replicas.yaml"
    doc = yaml.safe_load(patch.read_text())
    doc["spec"]["replicas"] = 2
    patch.write_text(yaml.safe_dump(doc))
    remote.commit_and_push("staging: two trainers")
    second = reconciler.reconcile()
    assert second.outcome == Outcome.APPLIED, (second.message, second.records)
    assert (client.get(deployments, "ml-team", "trainer") or {})["spec"]["replicas"] == 2


def test_the_kept_copy_holds_only_the_files_rendering_read_and_renders_alone(
    client: ClusterClient, tmp_path: Path
) -> None:
    from pass_support import TARGET

    from reconciler.delivery.desired import desired_from_trees
    from reconciler.loop.passes.keep import KeptRevision
    from reconciler.model.loader import DEFAULT_LIMITS
    from reconciler.source.treecopy import decode_tree

    remote = seeded(tmp_path, "kustomize")
    (remote.work / "docs.md").write_text("not read by any render\n" * 1000)
    sha = remote.commit_and_push("overlays and a document")
    reconciler = follow(client, remote, tmp_path, path="overlays/prod")
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    payload = KeptRevision(client, TARGET).load(sha)
    assert payload is not None
    kept = decode_tree(payload, "kept")
    paths = {path for path, _ in kept.support}
    assert "docs.md" not in paths and "README.md" not in paths
    assert {"overlays/prod/kustomization.yaml", "base/kustomization.yaml"} <= paths
    [state] = desired_from_trees([kept], "overlays/prod", DEFAULT_LIMITS)
    assert len(state.manifests.manifests) == 12
