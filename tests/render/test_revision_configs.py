"""Each revision of a pull request is rendered with its own `dra-gitops.yaml` (charts, values, value files,
paths, exclude): an inline `values:` upgrade of the main release is seen and judged by `check --repo`,
`apply --base` and the loop alike; a removed release deletes its objects; a values file added in the same
change renders; an object that moved between paths is an update, not a delete plus a create."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner
from helpers import GitRemote
from render_support import follow, seeded

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.desired import load_git_revisions
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.model.plan import compute_plan
from reconciler.outcome import Outcome
from reconciler.sim.server import SimCluster

REPO = Path(__file__).resolve().parents[2]
MAIN = "DaemonSet/gpu-system/gpu-driver-kubelet-plugin"
CANARY = "DaemonSet/gpu-system/gpu-driver-canary-kubelet-plugin"


def edit_config(remote: GitRemote, change: Any) -> None:
    path = remote.work / "dra-gitops.yaml"
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def check_json(remote: GitRemote, base: str, head: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-q", "-o", "json", *extra]
    )
    return result.exit_code, json.loads(result.stdout)


def inline_upgrade(data: dict[str, Any]) -> None:
    data["charts"][0]["values"] = {"image": {"tag": "v0.4.0"}}


def image_of(client: ClusterClient, name: str) -> str:
    live = client.get(client.resource_for("apps/v1", "DaemonSet"), "gpu-system", name) or {}
    return str(live["spec"]["template"]["spec"]["containers"][0]["image"])


def test_an_inline_values_upgrade_is_denied_by_check_apply_base_and_the_loop_alike(
    client: ClusterClient, cluster: SimCluster, tmp_path: Path
) -> None:
    remote = seeded(tmp_path, "helm")
    base = remote.commit_and_push("driver v0.3.0 from the chart")
    reconciler = follow(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    edit_config(remote, inline_upgrade)
    head = remote.commit_and_push("main release to v0.4.0 by an inline value")

    code, report = check_json(remote, base, head)
    assert code == 1
    assert report["summary"]["changes"]["update"] >= 1
    [denial] = [f for f in report["findings"] if f["severity"] == "deny"]
    assert denial["rule"] == "driver-canary" and denial["ref"] == MAIN

    kubeconfig = str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    applied = CliRunner().invoke(
        cli,
        ["apply", "--repo", str(remote.work), "--rev", head, "--base", base, "--kubeconfig", kubeconfig]
        + ["--target", "gpu-cluster", "-q", "-o", "json"],
    )
    assert applied.exit_code == 1, applied.output
    assert json.loads(applied.stdout)["outcome"] == "denied"

    looped = reconciler.reconcile()
    assert looped.outcome == Outcome.DENIED, looped.message
    assert image_of(client, "gpu-driver-kubelet-plugin").endswith(":v0.3.0")


def test_a_removed_release_deletes_its_objects(tmp_path: Path) -> None:
    remote = seeded(tmp_path, "helm")
    base = remote.commit_and_push("two releases")
    edit_config(remote, lambda data: data["charts"].pop(1))
    head = remote.commit_and_push("drop the canary release")
    _, report = check_json(remote, base, head)
    assert report["summary"]["changes"] == {"create": 0, "update": 0, "delete": 1}, report
    old, new = load_git_revisions(remote.work, [base, head], "", DEFAULT_LIMITS)
    plan = compute_plan(old.manifests.manifests, new.manifests.manifests)
    assert [(c.op, str(c.ref)) for c in plan.changes] == [("delete", CANARY)]


def test_a_values_file_added_in_the_same_change_renders(tmp_path: Path) -> None:
    remote = seeded(tmp_path, "helm")
    base = remote.commit_and_push("base")
    (remote.work / "values/extra.yaml").write_text(yaml.safe_dump({"priorityClassName": "x"}))

    def add_file(data: dict[str, Any]) -> None:
        data["charts"][1]["valueFiles"].append("values/extra.yaml")

    edit_config(remote, add_file)
    head = remote.commit_and_push("an extra values file for the canary")
    code, report = check_json(remote, base, head)
    assert code == 0, report
    assert not any("does not exist" in f["message"] for f in report["findings"])


def test_an_object_that_moved_between_paths_is_an_update(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(REPO / "manifests-example", remote.work / "old", dirs_exist_ok=True)
    (remote.work / "dra-gitops.yaml").write_text("paths: [old]\n")
    base = remote.commit_and_push("manifests under old/")
    shutil.move(remote.work / "old", remote.work / "new")
    (remote.work / "dra-gitops.yaml").write_text("paths: [new]\n")
    head = remote.commit_and_push("moved to new/")
    code, report = check_json(remote, base, head)
    assert code == 0, report
    assert report["summary"]["changes"] == {"create": 0, "update": 0, "delete": 0}
