"""The Git edge of the dashboard: a commit's subject, author and message, read from the target's Git cache
(the bare clone `run` keeps per target, or one `ui` keeps for itself). A commit's policy report is what its
pass recorded (`report.py`), never checked again here. Commit facts are kept in a small bounded cache: a sha never
changes what it holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.source import git as git_source

log = logging.getLogger(__name__)

# Commits kept in memory.
COMMITS_KEPT = 2000
# A sha missing from the cache fetches the remote at most this often.
FETCH_EVERY = 30.0


@dataclass
class GitCache:
    """Where one target's commits are: a Git repository (bare or not), the manifests' sub-path, and how
    to bring it up to date (None: someone else fetches it, as the controller's workers do)."""

    repo: Path
    subdir: str = ""
    fetch: Callable[[], object] | None = None


class _Bounded(OrderedDict[Any, Any]):
    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def put(self, key: Any, value: Any) -> None:
        self[key] = value
        self.move_to_end(key)
        while len(self) > self.limit:
            self.popitem(last=False)


class GitReports:
    def __init__(self, caches: Mapping[str, GitCache]) -> None:
        self.caches = dict(caches)
        self._commits = _Bounded(COMMITS_KEPT)
        self._fetched: dict[str, float] = {}
        self._open: dict[str, Any] = {}  # target -> its open repository
        # One reader at a time: a repository object is not thread-safe.
        self._lock = threading.RLock()

    def _repo(self, target: str, sha: str) -> Any:
        """The target's repository holding `sha` (fetched once if it lacks it), or None. One repository
        object per target is kept open (each holds git helper processes), reopened when it lacks a commit:
        the cache may have been fetched or cloned afresh since."""
        cache = self.caches.get(target)
        if cache is None:
            return None
        for attempt in (0, 1, 2):
            try:
                repo = self._open.get(target)
                if repo is None or attempt:
                    if repo is not None:
                        repo.close()
                    repo = self._open[target] = git_source.open_repo(cache.repo)
                # Reading the commit proves it is there (resolving a full sha alone does not).
                git_source.commit_info(git_source.resolve(repo, sha))
                return repo
            except (DraGitopsError, ValueError):
                if attempt != 1:
                    continue
                if cache.fetch is None or time.monotonic() - self._fetched.get(target, -1e9) < FETCH_EVERY:
                    return None
                self._fetched[target] = time.monotonic()
                try:
                    cache.fetch()
                except DraGitopsError as exc:
                    log.info("ui: fetching %s for commit %s failed: %s", target, sha[:12], exc)
                    return None
        return None

    def commits(self, target: str, shas: Sequence[str]) -> dict[str, dict[str, str]]:
        """sha -> {subject, author, message} of those the cache holds."""
        with self._lock:
            return self._commits_of(target, shas)

    def _commits_of(self, target: str, shas: Sequence[str]) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        repo = None
        for sha in dict.fromkeys(s for s in shas if s):
            known = self._commits.get((target, sha))
            if known is None:
                repo = repo or self._repo(target, sha)
                if repo is None:
                    continue
                try:
                    info = git_source.commit_info(git_source.resolve(repo, sha))
                except (DraGitopsError, ValueError):
                    continue
                known = {
                    "subject": info.message.splitlines()[0] if info.message else "",
                    "author": info.author,
                    "message": info.message,
                }
                self._commits.put((target, sha), known)
            out[sha] = known
        return out
