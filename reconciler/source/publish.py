"""Refs a target publishes to its repository for other controllers, and reads back: the commit it
verified, `refs/dra-gitops/<target>/verified` (`publishVerified`, `promoteFrom: {ref: ...}`).

A published ref only moves forward (a push without `+`): a commit that does not descend from the one
published is refused by the remote, never forced over it.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.errors import EnvironmentProblem
from reconciler.source.gitcmd import GitFailed, GitRunner, fetch_remote_ref

# Where a followed ref is fetched to in the cache (beside the followed branch, never under refs/heads).
_FOLLOWED = "refs/dra-gitops/followed/"


def fetch_ref(runner: GitRunner, repo_dir: Path, ref: str) -> str | None:
    """The commit `ref` points at on the remote (fetched with its objects), None when the remote has none."""
    return fetch_remote_ref(runner, repo_dir, ref, _FOLLOWED + ref.removeprefix("refs/"), ref)


def publish_ref(runner: GitRunner, repo_dir: Path, sha: str, ref: str) -> None:
    """Point `ref` on the remote at `sha`, fast-forward only."""
    try:
        runner.run(
            ["push", "--quiet", "--end-of-options", runner.url, f"{sha}:{ref}"], cwd=repo_dir, remote=True
        )
    except GitFailed as exc:
        why = exc.summary()
        if "non-fast-forward" in exc.stderr.lower() or "fetch first" in exc.stderr.lower():
            why = f"{ref} holds a commit {sha[:12]} does not descend from (fast-forward only)"
        raise EnvironmentProblem(
            f"cannot publish {sha[:12]} as {ref}: {why}", where=runner.shown_url
        ) from exc
