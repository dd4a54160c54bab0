"""The Git source of the long-running reconciler: a remote followed through a local cache.

The cache is a bare repository owned by this module: cloned once, then updated by one `git fetch` per pass;
trees are read from its object database without a checkout. A fetch hands back a sha only when the commit
and every object under the followed path are present, so nothing half-read is ever applied. A cache that is
damaged, foreign or left half-written by a killed process is cloned again beside it and swapped in; the old
cache stays in place until the new one is complete.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import git
from git.objects import Blob, Tree

from reconciler.errors import EnvironmentProblem, UserError
from reconciler.model.loader import DEFAULT_LIMITS, Limits
from reconciler.source.git import TreeFiles, read_tree
from reconciler.source.gitcmd import GitCredentials, GitFailed, GitRunner
from reconciler.source.publish import fetch_ref, publish_ref
from reconciler.source.revert import revert_commit
from reconciler.source.signatures import SignatureCheck, SignaturePolicy, SignatureVerifier
from reconciler.source.tags import newest_tag

log = logging.getLogger(__name__)

_CACHE_MARK = "dra-gitops.url"  # config key naming the remote a cache belongs to
_BAD_REF_CHARS = re.compile(r"[\x00-\x20~^:?*\[\\\x7f]|\.\.|@\{|//")
# Failures that are the remote's or the network's: cloning again would not help.
_REMOTE_FAILURES = (
    "could not read from remote repository",
    "unable to access",
    "does not appear to be a git repository",
    "repository not found",
    "authentication failed",
    "permission denied",
    "host key verification failed",
    "could not resolve host",
    "connection refused",
    "connection timed out",
    "terminal prompts disabled",
    "the remote end hung up",
)


class RefNotFound(EnvironmentProblem):
    """The followed branch, or every tag matching the pattern, is gone from the remote."""


@dataclass(frozen=True)
class FetchResult:
    """What the source points at now."""

    sha: str
    ref: str  # refs/heads/main or refs/tags/v1.2.0
    forced: bool  # history was rewritten: `sha` does not descend from `previous`
    previous: str | None  # the sha seen before this fetch (the caller's, else the cache's)

    @property
    def changed(self) -> bool:
        return self.sha != self.previous


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def check_ref_name(name: str, what: str) -> str:
    """Refuse names git would reject or read as something else inside a refspec."""
    if (
        not name
        or name.startswith(("-", "/", ".", "+"))
        or name.endswith(("/", ".", ".lock"))
        or _BAD_REF_CHARS.search(name)
    ):
        raise UserError(f"not a valid {what} name", where=repr(name))
    return name


class GitSource:
    """One remote repository followed at a branch, or at the newest tag matching a pattern."""

    def __init__(
        self,
        url: str,
        cache_dir: Path,
        *,
        branch: str | None = "main",
        tag_pattern: str | None = None,
        path: str = "",
        credentials: GitCredentials = GitCredentials(),  # noqa: B008 - frozen, never mutated
        signatures: SignaturePolicy | None = None,
        timeout: float = 60.0,
    ) -> None:
        if (branch is None) == (tag_pattern is None):
            raise UserError("follow either a branch or a tag pattern (set one, not both)", where=url)
        self.branch = check_ref_name(branch, "branch") if branch is not None else None
        self.tag_pattern = tag_pattern
        self.path = path.strip("/")
        self.cache_dir = Path(cache_dir)
        self._runner = GitRunner(url, credentials, timeout)
        self.url = self._runner.shown_url  # safe to print
        self._verifier = SignatureVerifier(signatures, self._runner) if signatures is not None else None
        self._thread_lock = threading.RLock()
        self._repo: git.Repo | None = None
        self._repo_identity: int | None = None  # inode of the cache directory `_repo` was opened on
        self._complete: set[str] = set()  # shas whose objects under `path` were all found present
        self._damaged = False  # a read failed on a missing object: clone again on the next fetch

    # -- the cache ---------------------------------------------------------------------------------------

    @contextmanager
    def _exclusive(self) -> Iterator[None]:
        """One writer per cache, across threads and processes (a flock on a file beside the cache)."""
        self.cache_dir.parent.mkdir(parents=True, exist_ok=True)
        lock_path = self.cache_dir.parent / f".{self.cache_dir.name}.lock"
        with self._thread_lock, open(lock_path, "a") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)

    def _clear_leftovers(self) -> None:
        """Remove what a killed git or a killed clone left: we hold the lock, so no one else is writing."""
        for stale in self.cache_dir.parent.glob(f".{self.cache_dir.name}.new-*"):
            _remove(stale)
        if self.cache_dir.is_dir():
            for lock in [*self.cache_dir.glob("*.lock"), *(self.cache_dir / "refs").rglob("*.lock")]:
                lock.unlink(missing_ok=True)

    def _open(self) -> git.Repo | None:
        """The cache repository if it is one of ours for this URL, else None."""
        try:
            identity = os.stat(self.cache_dir).st_ino
        except OSError:
            identity = None
        if self._repo is not None and identity == self._repo_identity:
            return self._repo
        self._close()  # another GitSource on this cache swapped in a fresh clone: reopen
        if identity is None or not (self.cache_dir / "HEAD").is_file():
            return None
        try:
            repo = git.Repo(self.cache_dir)
            mark = repo.config_reader("repository").get_value("dra-gitops", "url", default="")
        except Exception:  # any parse or read failure means: not a usable cache
            return None
        if not repo.bare or mark != self._runner.url:
            repo.close()
            return None
        self._repo, self._repo_identity = repo, identity
        return repo

    def _close(self) -> None:
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def close(self) -> None:
        """Stop the helper processes GitPython keeps for the cache."""
        with self._thread_lock:
            self._close()

    def __enter__(self) -> GitSource:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _clone_fresh(self) -> git.Repo:
        """Clone into a new directory beside the cache and swap it in only once complete."""
        fresh = Path(tempfile.mkdtemp(prefix=f".{self.cache_dir.name}.new-", dir=self.cache_dir.parent))
        try:
            self._runner.run(["init", "--quiet", "--bare", str(fresh)], cwd=self.cache_dir.parent)
            self._runner.run(["config", _CACHE_MARK, self._runner.url], cwd=fresh)
            self._fetch_into(fresh)
        except BaseException:
            shutil.rmtree(fresh, ignore_errors=True)
            raise
        self._close()
        if self.cache_dir.exists() or self.cache_dir.is_symlink():
            old = self.cache_dir.parent / f".{self.cache_dir.name}.new-old-{os.getpid()}"
            self.cache_dir.rename(old)
            _remove(old)
        fresh.rename(self.cache_dir)
        self._complete.clear()
        self._damaged = False
        repo = self._open()
        if repo is None:
            raise EnvironmentProblem("the fresh clone cannot be opened", where=str(self.cache_dir))
        return repo

    def _refspecs(self) -> list[str]:
        if self.branch is not None:
            return [f"+refs/heads/{self.branch}:refs/heads/{self.branch}"]
        return ["+refs/tags/*:refs/tags/*"]

    def _fetch_into(self, repo_dir: Path) -> None:
        args = ["fetch", "--quiet", "--atomic", "--prune", "--no-tags", "--no-write-fetch-head"]
        self._runner.run(
            [*args, "--end-of-options", self._runner.url, *self._refspecs()], cwd=repo_dir, remote=True
        )

    def _failure(self, exc: GitFailed, doing: str) -> EnvironmentProblem:
        text = exc.stderr.lower()
        if "couldn't find remote ref" in text:
            return RefNotFound(
                f"branch {self.branch!r} does not exist on the remote (deleted or renamed?)", where=self.url
            )
        return EnvironmentProblem(f"cannot {doing}: {exc.summary()}", where=self.url)

    # -- following the remote ----------------------------------------------------------------------------

    def _followed(self, repo: git.Repo) -> tuple[str, str] | None:
        """(ref, commit sha) the cache holds for what we follow, or None."""
        if self.branch is not None:
            ref = f"refs/heads/{self.branch}"
            try:
                return ref, git.SymbolicReference.dereference_recursive(repo, ref)
            except ValueError:
                return None
        assert self.tag_pattern is not None
        tags = {tag.name: tag for tag in repo.tags}
        newest = newest_tag(tags, self.tag_pattern)
        if newest is None:
            return None
        return f"refs/tags/{newest}", tags[newest].commit.hexsha  # peels annotated tags

    def _followed_or_none(self, repo: git.Repo | None) -> tuple[str, str] | None:
        if repo is None:
            return None
        try:
            return self._followed(repo)
        except (ValueError, git.BadName, git.BadObject, git.GitCommandError):
            return None  # a damaged cache: it will be cloned again

    def fetch(self, previous: str | None = None) -> FetchResult:
        """Bring the cache up to date and return the commit to reconcile.

        `previous` is the sha the caller reconciled last (e.g. from its state); by default the sha the
        cache held before this fetch. Raises EnvironmentProblem when the remote cannot be reached or
        refuses us, RefNotFound when what we follow is gone; the cache stays usable either way.
        """
        with self._exclusive():
            self._clear_leftovers()
            repo = self._open()
            before = self._followed_or_none(repo)
            if repo is None or self._damaged:
                repo = self._clone_or_raise()
            else:
                try:
                    self._fetch_into(self.cache_dir)
                except GitFailed as exc:
                    problem = self._failure(exc, "fetch")
                    if isinstance(problem, RefNotFound) or any(
                        s in exc.stderr.lower() for s in _REMOTE_FAILURES
                    ):
                        raise problem from exc
                    log.warning(
                        "%s: fetch into the cache failed (%s); cloning again", self.url, exc.summary()
                    )
                    repo = self._clone_or_raise()
            followed = self._followed(repo)
            if followed is None:
                raise RefNotFound(f"no tag matches {self.tag_pattern!r}", where=self.url)
            ref, sha = followed
            if not self._objects_present(repo, sha):
                log.warning("%s: the cache lacks objects of %s; cloning again", self.url, sha[:12])
                repo = self._clone_or_raise()
                ref, sha = self._followed(repo) or (ref, sha)
                if not self._objects_present(repo, sha):
                    raise EnvironmentProblem(
                        f"commit {sha} is incomplete even in a fresh clone", where=self.url
                    )
            seen = previous if previous is not None else (before[1] if before is not None else None)
            forced = seen is not None and seen != sha and not self._descends(repo, sha, seen)
            if forced:
                log.warning("%s: %s was rewritten: %s does not descend from %s", self.url, ref, sha, seen)
            return FetchResult(sha=sha, ref=ref, forced=forced, previous=seen)

    def _clone_or_raise(self) -> git.Repo:
        try:
            return self._clone_fresh()
        except GitFailed as exc:
            raise self._failure(exc, "clone") from exc

    def _objects_present(self, repo: git.Repo, sha: str) -> bool:
        """Is the commit there with every tree and blob under `path`? Checked once per sha."""
        if sha in self._complete:
            return True
        try:
            tree: Tree = repo.commit(sha).tree
            if self.path:
                found = tree / self.path
                if not isinstance(found, Tree):
                    self._complete.add(sha)  # tree() reports a path that is not a directory
                    return True
                tree = found
            for item in tree.traverse():
                if isinstance(item, Blob):
                    repo.odb.info(item.binsha)
        except KeyError:  # `path` absent at this sha: complete as far as we are concerned
            pass
        except (ValueError, git.BadName, git.BadObject, git.GitCommandError, OSError):
            return False
        self._complete.add(sha)
        return True

    def _descends(self, repo: git.Repo, newer: str, older: str) -> bool:
        status, _, _ = self._runner.execute(
            ["merge-base", "--is-ancestor", older, newer], cwd=Path(repo.git_dir)
        )
        return status == 0  # 1: not an ancestor; 128: `older` is not even in the cache

    # -- reading -----------------------------------------------------------------------------------------

    def _repo_or_raise(self) -> git.Repo:
        repo = self._open()
        if repo is None:
            raise EnvironmentProblem("the cache is empty: fetch first", where=str(self.cache_dir))
        return repo

    def tree(self, sha: str, limits: Limits = DEFAULT_LIMITS) -> TreeFiles:
        """Every manifest under `path` at `sha`, read from the object database (no checkout).

        A sha missing from the cache (e.g. a last good commit a force-push dropped) is fetched by id once.
        """
        with self._thread_lock:
            repo = self._repo_or_raise()
            if not self._objects_present(repo, sha):
                with self._exclusive():
                    try:
                        self._runner.run(
                            [
                                "fetch",
                                "--quiet",
                                "--no-tags",
                                "--no-write-fetch-head",
                                "--end-of-options",
                                self._runner.url,
                                sha,
                            ],
                            cwd=self.cache_dir,
                            remote=True,
                        )
                    except GitFailed as exc:
                        raise EnvironmentProblem(
                            f"commit {sha} is not in the cache and cannot be fetched: {exc.summary()}",
                            where=self.url,
                        ) from exc
                if not self._objects_present(repo, sha):
                    self._damaged = True
                    raise EnvironmentProblem(
                        f"commit {sha} is incomplete in the cache; it will be cloned again", where=self.url
                    )
            if self.path:
                try:
                    found = repo.commit(sha).tree / self.path
                except KeyError:
                    # cause hidden: GitPython's KeyError names the same path
                    raise UserError(f"no such directory at {sha[:12]}", where=self.path) from None
                if not isinstance(found, Tree):
                    raise UserError(f"not a directory at {sha[:12]}", where=self.path)
            return read_tree(repo, sha, self.path, limits)

    def verify(self, sha: str) -> SignatureCheck:
        """The signature verdict on `sha`; without a SignaturePolicy every commit is accepted."""
        with self._thread_lock:
            repo = self._repo_or_raise()
            if self._verifier is None:
                return SignatureCheck(sha, "ok", "signature verification is off")
            try:
                signature = str(repo.commit(sha).gpgsig or "")
            except (ValueError, git.BadName, git.BadObject) as exc:
                raise EnvironmentProblem(
                    f"commit {sha} is not in the cache ({exc.__class__.__name__})", where=self.url
                ) from exc
            return self._verifier.verify(Path(repo.git_dir), sha, signature)

    def revert(
        self, sha: str, branch: str, author: str = "dra-gitops <dra-gitops@localhost>", reason: str = ""
    ) -> str:
        """Push a commit reverting `sha` onto `branch` for review and return its sha.

        The branch is created from the followed head when the remote has no such branch yet. The remote's
        branch is never force-pushed: if it moved meanwhile, the push is refused and reported.
        """
        check_ref_name(branch, "branch")
        with self._exclusive():
            repo = self._repo_or_raise()
            followed = self._followed(repo)
            if followed is None:
                raise EnvironmentProblem("nothing fetched yet: fetch first", where=self.url)
            return revert_commit(
                self._runner, repo, sha, branch, fallback_base=followed[1], author=author, reason=reason
            )

    # -- refs published for other controllers (`source/publish.py`) -------------------------------------

    def fetch_ref(self, ref: str) -> str | None:
        """The commit `ref` points at on the remote, its objects fetched into the cache; None when absent."""
        with self._exclusive():
            repo = self._repo_or_raise()
            return fetch_ref(self._runner, Path(repo.git_dir), ref)

    def publish(self, sha: str, ref: str) -> None:
        """Push `sha` (in the cache) to the remote as `ref`, fast-forward only."""
        with self._exclusive():
            repo = self._repo_or_raise()
            publish_ref(self._runner, Path(repo.git_dir), sha, ref)
