"""Errors on rendered objects name where they came from: a dry-run the API server rejects, in `plan` text,
JSON and markdown; and the loop records a revision whose kustomization cannot render as invalid, held, with
the last good revision kept."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote
from render_support import follow

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.outcome import Outcome
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kustomize"


@pytest.fixture
def overlay_repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    monkeypatch.chdir(root)
    return root


def test_a_rendered_object_the_dry_run_rejects_is_named_with_its_overlay(
    cluster: SimCluster, overlay_repo: Path, tmp_path: Path
) -> None:
    # The overlay's patch makes the trainer's selector miss its pod labels: the API server refuses it.
    patch = overlay_repo / "overlays/prod/trainer-replicas.yaml"
    doc = yaml.safe_load(patch.read_text())
    doc["spec"]["selector"] = {"matchLabels": {"app": "someone-else"}}
    patch.write_text(yaml.safe_dump(doc))
    kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
    result = CliRunner().invoke(cli, ["plan", "overlays/prod", "--kubeconfig", str(kubeconfig), "-q"])
    assert result.exit_code == 1, result.output
    line = next(x for x in result.output.splitlines() if x.startswith("! error Deployment/ml-team/trainer"))
    assert "overlays/prod/kustomization.yaml from base/40-workloads/trainer.yaml:" in line
    assert "selector" in line
    as_json = CliRunner().invoke(
        cli, ["plan", "overlays/prod", "--kubeconfig", str(kubeconfig), "-q", "-o", "json"]
    )
    [trainer] = [o for o in json.loads(as_json.stdout)["objects"] if o["ref"] == "Deployment/ml-team/trainer"]
    assert (trainer["path"], trainer["rendered_by"]) == (
        "base/40-workloads/trainer.yaml",
        "overlays/prod/kustomization.yaml",
    )


def test_the_loop_records_a_kustomization_that_cannot_render_as_invalid_and_keeps_the_last_good(
    client: ClusterClient, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    good = remote.commit_and_push("overlays")
    reconciler = follow(client, remote, tmp_path, path="overlays/prod")
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    kustomization = remote.work / "overlays/prod/kustomization.yaml"
    kustomization.write_text(kustomization.read_text().replace("../../base", "../../bse"))
    bad = remote.commit_and_push("a base that does not exist")
    result = reconciler.reconcile()
    assert result.outcome == Outcome.INVALID, (result.message, result.records)
    assert result.message.startswith("overlays/prod/kustomization.yaml:"), result.message
    assert "../../bse does not exist" in result.message
    state = StateStore(client, "gpu-cluster").load()
    assert state.last_good == good and state.last_attempted is not None and state.last_attempted.sha == bad
    assert reconciler.reconcile().outcome == Outcome.HELD
