"""A pull request's two revisions share most files: each shared blob is read from Git once and parsed once,
and the policy input makes its document once; the changed file is read and parsed on its own."""

from __future__ import annotations

from pathlib import Path

import yaml
from helpers import GitRemote

from reconciler.delivery.desired import load_git_revisions
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.source import git as git_source


def config_map(name: str, value: str) -> str:
    return yaml.safe_dump(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"v": value}}
    )


def test_shared_blobs_are_read_and_parsed_once(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    for index in range(5):
        (remote.work / f"cm-{index}.yaml").write_text(config_map(f"cm-{index}", "1"))
    base = remote.commit("five config maps")
    (remote.work / "cm-0.yaml").write_text(config_map("cm-0", "2"))
    head = remote.commit("one changed")

    repo = git_source.open_repo(remote.work)
    contents: dict[str, bytes] = {}
    trees = [git_source.read_tree(repo, rev, "", DEFAULT_LIMITS, contents) for rev in (base, head)]
    assert len(contents) == 6  # five blobs, and the changed file's new one
    assert trees[0].ids["cm-1.yaml"] == trees[1].ids["cm-1.yaml"] != ""
    assert trees[0].ids["cm-0.yaml"] != trees[1].ids["cm-0.yaml"]

    before, after = load_git_revisions(remote.work, [base, head], "", DEFAULT_LIMITS)
    old = {m.ref.name: m for m in before.manifests.manifests}
    new = {m.ref.name: m for m in after.manifests.manifests}
    assert all(old[f"cm-{i}"] is new[f"cm-{i}"] for i in range(1, 5))  # parsed once, shared
    assert old["cm-0"] is not new["cm-0"] and new["cm-0"].body["data"] == {"v": "2"}
