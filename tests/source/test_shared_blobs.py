"""A pull request's two revisions share most files: each shared blob is read from Git once and parsed once,
and the policy input makes its document once; the changed file is read and parsed on its own."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from helpers import GitRemote

from reconciler.delivery.desired import load_git_revisions
from reconciler.errors import ManifestError
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


def test_many_blobs_are_read_in_bulk_as_their_files_hold_them(tmp_path: Path) -> None:
    """Past a few dozen blobs they are read with one `git cat-file --batch` rather than one round trip each:
    byte for byte what the files hold (a symlink as its target's content), a file over the size limit still
    refused at its path."""
    remote = GitRemote(tmp_path / "git")
    for index in range(100):
        # Every byte a YAML file may hold, newlines and a trailing one missing included.
        text = config_map(f"cm-{index:03}", "line\n" * index + "\x00\xff end")
        (remote.work / f"cm-{index:03}.yaml").write_text(text if index % 2 else text.rstrip("\n"))
    (remote.work / "linked.yaml").symlink_to("cm-007.yaml")
    head = remote.commit("a hundred config maps and a link")

    tree = git_source.read_tree(git_source.open_repo(remote.work), head, "", DEFAULT_LIMITS)
    assert len(tree.blobs) == 101
    for path, data in tree.blobs:
        assert data == (remote.work / path).read_bytes(), path

    (remote.work / "cm-050.yaml").write_text(config_map("cm-050", "x" * 4096))
    big = remote.commit("one config map grows")
    with pytest.raises(ManifestError, match=r"cm-050.yaml:1: file is \d+ bytes, over the 2048-byte limit"):
        git_source.read_tree(
            git_source.open_repo(remote.work), big, "", replace(DEFAULT_LIMITS, max_file_bytes=2048)
        )
