"""A revert commit of a failed commit, built without a working tree and pushed to a branch for review."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import git

from reconciler.errors import EnvironmentProblem, UserError
from reconciler.source.gitcmd import GitFailed, GitRunner, fetch_remote_ref

_PERSON = re.compile(r"^\s*(?P<name>[^<>]+?)\s*<(?P<email>[^<>\s]+)>\s*$")


def _identity(author: str) -> dict[str, str]:
    match = _PERSON.match(author)
    if match is None:
        raise UserError("the revert author must look like 'Name <email>'", where=repr(author))
    name, email = match["name"], match["email"]
    return {
        "GIT_AUTHOR_NAME": name,
        "GIT_AUTHOR_EMAIL": email,
        "GIT_COMMITTER_NAME": name,
        "GIT_COMMITTER_EMAIL": email,
    }


def _remote_head(runner: GitRunner, repo_dir: Path, branch: str) -> str | None:
    """The remote's head of `branch`, fetched into a private ref; None when the remote has no such branch."""
    local = f"refs/dra-gitops/revert/{branch}"
    return fetch_remote_ref(runner, repo_dir, f"refs/heads/{branch}", local, f"branch {branch!r}")


def _reverted_tree(runner: GitRunner, repo_dir: Path, failed: git.Commit, base: str) -> str:
    """The tree of `base` with the changes of `failed` (against its first parent) taken back out."""
    parent = failed.parents[0]
    if base == failed.hexsha:
        return parent.tree.hexsha
    # Three-way merge in a throw-away index: merge base = the failed commit, ours = base, theirs = parent.
    with tempfile.TemporaryDirectory(prefix="dra-gitops-revert-") as scratch:
        index = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        args = ["read-tree", "-i", "-m", "--aggressive", failed.hexsha, base, parent.hexsha]
        status, _, err = runner.execute(args, cwd=repo_dir, extra_env=index)
        if status == 0:
            status, out, err = runner.execute(["write-tree"], cwd=repo_dir, extra_env=index)
            if status == 0:
                return out.strip()
    raise UserError(
        f"commit {failed.hexsha[:12]} does not revert cleanly onto the branch (the same files changed since); "
        "revert it by hand",
        where=failed.hexsha,
    )


def revert_commit(
    runner: GitRunner,
    repo: git.Repo,
    sha: str,
    branch: str,
    *,
    fallback_base: str,
    author: str,
    reason: str,
) -> str:
    """Push a commit reverting `sha` onto the remote `branch` (created from `fallback_base` if missing).

    Returns the branch's new head; when the branch already has the changes reverted, its head unchanged.
    """
    repo_dir = Path(repo.git_dir)
    try:
        failed = repo.commit(sha)
    except (ValueError, git.BadName, git.BadObject) as exc:
        raise UserError("no such commit in the cache", where=sha) from exc
    if not failed.parents:
        raise UserError("the repository's first commit cannot be reverted", where=sha)
    base = _remote_head(runner, repo_dir, branch) or fallback_base
    tree = _reverted_tree(runner, repo_dir, failed, base)
    if tree == repo.commit(base).tree.hexsha:
        return base  # nothing left to revert: the branch already has it
    subject = str(failed.summary)
    message = f'Revert "{subject}"\n\nThis reverts commit {sha}.\n'
    if reason:
        message += f"\ndra-gitops rolled it back: {reason}\n"
    env = _identity(author)
    status, out, err = runner.execute(
        ["commit-tree", tree, "-p", base, "-F", "-"], cwd=repo_dir, stdin=message.encode(), extra_env=env
    )
    if status != 0:
        raise EnvironmentProblem(f"cannot write the revert commit: {err.strip()}", where=str(repo_dir))
    new = out.strip()
    try:
        runner.run(
            ["push", "--quiet", "--end-of-options", runner.url, f"{new}:refs/heads/{branch}"],
            cwd=repo_dir,
            remote=True,
        )
    except GitFailed as exc:
        raise EnvironmentProblem(
            f"cannot push the revert of {sha[:12]} to branch {branch!r}: {exc.summary()}",
            where=runner.shown_url,
        ) from exc
    return new
