"""The kept copy of a revision's files: it reads back as the same tree, and damage is said as such."""

from __future__ import annotations

import pytest

from reconciler.errors import EnvironmentProblem
from reconciler.source.git import CommitInfo, TreeFiles
from reconciler.source.treecopy import decode_tree, encode_tree


def test_a_tree_reads_back_unchanged() -> None:
    tree = TreeFiles(
        CommitInfo("a" * 40, "b" * 40, "subject\n\nbody é", "Dev <dev@example.com>", True),
        [("10-driver/ds.yaml", b"kind: DaemonSet\n"), ("bin.yaml", bytes(range(256)))],
        (".dra-gitops.yaml", b"paths: [10-driver]\n"),
    )
    assert decode_tree(encode_tree(tree), "here") == tree
    bare = TreeFiles(tree.commit, [], None)
    assert decode_tree(encode_tree(bare), "here") == bare


def test_a_damaged_copy_is_an_environment_problem_naming_where() -> None:
    with pytest.raises(EnvironmentProblem, match="^ConfigMap/ns/x: the kept copy .* is damaged"):
        decode_tree(b"not gzip", "ConfigMap/ns/x")
