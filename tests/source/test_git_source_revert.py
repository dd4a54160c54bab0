"""`revert`: a commit undoing a failed commit, pushed to a review branch, built without a working tree."""

from __future__ import annotations

from pathlib import Path

import pytest
from gitrepos import Remote, manifest, run_git

from reconciler.errors import UserError
from reconciler.source.remote import GitSource


def tree_of(repo: Path, rev: str) -> str:
    return run_git(repo, "rev-parse", f"{rev}^{{tree}}")


def test_revert_of_the_head_creates_a_review_branch(remote: Remote, tmp_path: Path) -> None:
    good = remote.commit({"a.yaml": manifest("a")}, "good")
    failed = remote.commit({"a.yaml": manifest("a", "v2"), "b.yaml": manifest("b")}, "asks for too many GPUs")
    remote.push()
    with GitSource(remote.url, tmp_path / "cache") as source:
        assert source.fetch().sha == failed
        new = source.revert(
            failed, "revert/asks-for-too-many", reason="verification failed: claim unallocated"
        )
        assert remote.server_head("revert/asks-for-too-many") == new
        assert remote.server_head("main") == failed  # the followed branch is left alone
        assert tree_of(remote.server, new) == tree_of(remote.server, good)
        assert run_git(remote.server, "rev-parse", f"{new}^") == failed
        message = run_git(remote.server, "log", "-1", "--format=%an <%ae>%n%B", new)
        assert message.startswith('dra-gitops <dra-gitops@localhost>\nRevert "asks for too many GPUs"')
        assert f"This reverts commit {failed}." in message and "claim unallocated" in message
        # Asking again changes nothing: the branch already has the revert.
        assert source.revert(failed, "revert/asks-for-too-many") == new


def test_revert_onto_an_existing_branch_keeps_its_other_changes(remote: Remote, tmp_path: Path) -> None:
    remote.commit({"a.yaml": manifest("a"), "c.yaml": manifest("c")}, "good")
    failed = remote.commit({"a.yaml": manifest("a", "v2")}, "failed")
    remote.push()
    remote.git("checkout", "--quiet", "-b", "fixes")
    later = remote.commit({"c.yaml": manifest("c", "v9")}, "unrelated fix")
    remote.push("fixes")
    with GitSource(remote.url, tmp_path / "cache") as source:
        source.fetch()
        new = source.revert(failed, "fixes", author="Reconciler Bot <bot@example.com>")
    assert run_git(remote.server, "rev-parse", f"{new}^") == later
    assert run_git(remote.server, "show", f"{new}:a.yaml") == manifest("a").strip()  # reverted
    assert run_git(remote.server, "show", f"{new}:c.yaml") == manifest("c", "v9").strip()  # kept
    assert (
        run_git(remote.server, "log", "-1", "--format=%an <%ae>", new) == "Reconciler Bot <bot@example.com>"
    )


def test_revert_that_conflicts_is_refused(remote: Remote, tmp_path: Path) -> None:
    remote.commit({"a.yaml": manifest("a")}, "good")
    failed = remote.commit({"a.yaml": manifest("a", "v2")}, "failed")
    remote.push()
    remote.git("checkout", "--quiet", "-b", "fixes")
    remote.commit({"a.yaml": manifest("a", "v3")}, "same file again")
    remote.push("fixes")
    with GitSource(remote.url, tmp_path / "cache") as source:
        source.fetch()
        with pytest.raises(UserError, match="does not revert cleanly"):
            source.revert(failed, "fixes")
        with pytest.raises(UserError, match="Name <email>"):
            source.revert(failed, "other", author="nobody")
