"""Git edge: read manifests of a revision straight from the object database (no checkout).

Only this package imports GitPython. Everything returned is plain data the pure core can load.
"""

from __future__ import annotations

import posixpath
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import git
from git.objects import Blob, Tree

from reconciler.errors import EnvironmentProblem, ManifestError, UserError
from reconciler.model.loader import (
    CHART_FILE,
    DEFAULT_LIMITS,
    KUSTOMIZATION_NAMES,
    MANIFEST_SUFFIXES,
    REPO_CONFIG_NAMES,
    SNIFF_BYTES,
    Limits,
    SkippedFile,
    looks_like_manifest,
    skip_reason,
)

_SYMLINK_MODE = 0o120000


@dataclass(frozen=True)
class CommitInfo:
    sha: str
    parent: str | None
    message: str
    author: str
    signed: bool


@dataclass(frozen=True)
class TreeFiles:
    """Manifest blobs of one revision, the repository config if any, and the commit they came from.

    `skipped`: manifest files under the subdirectory that the loader's rules pass over (hidden ones, a
    nested repository config), as `kubectl apply -R` would still apply them.
    """

    commit: CommitInfo
    blobs: list[tuple[str, bytes]]
    config: tuple[str, bytes] | None
    skipped: list[SkippedFile] = field(default_factory=list)
    # The kustomization files and Chart.yaml files under the subdirectory, and (only when there is one, or
    # the config lists charts) every file of the revision: rendering writes them out and runs there.
    kustomizations: list[str] = field(default_factory=list)
    support: list[tuple[str, bytes]] = field(default_factory=list)
    # The blob id of each manifest path (same id, same content: parsed once across revisions).
    ids: dict[str, str] = field(default_factory=dict)


def open_repo(path: Path) -> git.Repo:
    try:
        return git.Repo(path, search_parent_directories=False)
    except git.NoSuchPathError as exc:
        raise UserError("no such directory", where=str(path)) from exc
    except git.InvalidGitRepositoryError as exc:
        raise UserError("not a Git repository", where=str(path)) from exc


def resolve(repo: git.Repo, rev: str) -> git.Commit:
    try:
        return repo.commit(rev)
    except (git.BadName, ValueError, git.GitCommandError) as exc:
        raise UserError(
            f"unknown revision {rev!r} ({exc.__class__.__name__})", where=str(repo.working_dir)
        ) from exc


def commit_info(commit: git.Commit) -> CommitInfo:
    return CommitInfo(
        sha=commit.hexsha,
        parent=commit.parents[0].hexsha if commit.parents else None,
        message=str(commit.message).strip(),
        author=f"{commit.author.name} <{commit.author.email}>",
        signed=bool(commit.gpgsig),
    )


def _blob_at(tree: Tree, path: str) -> Blob | None:
    try:
        item = tree / path
    except KeyError:
        return None
    return item if isinstance(item, Blob) else None


def _follow(tree: Tree, blob: Blob, path: str, hops: int = 8) -> Blob:
    """Resolve a symlink blob to the blob it points at; links leaving the tree are refused."""
    current, current_path = blob, path
    for _ in range(hops):
        if current.mode != _SYMLINK_MODE:
            return current
        target = current.data_stream.read().decode("utf-8", "replace")
        joined = posixpath.normpath(posixpath.join(posixpath.dirname(current_path), target))
        if target.startswith("/") or joined == ".." or joined.startswith("../"):
            raise ManifestError(f"symlink points outside the repository (to {target})", where=path)
        resolved = _blob_at(tree, joined)
        if resolved is None:
            raise ManifestError(f"symlink target {target} does not exist in this revision", where=path)
        current, current_path = resolved, joined
    raise ManifestError("symlink chain too long", where=path)


def _manifest_blobs(
    tree: Tree, subdir: str, limits: Limits, skipped: list[SkippedFile], kustomizations: list[str]
) -> Iterator[tuple[str, Blob]]:
    root: Tree = tree
    if subdir:
        try:
            found = tree / subdir.strip("/")
        except KeyError:
            return
        if not isinstance(found, Tree):
            raise UserError("--path must name a directory of the repository", where=subdir)
        root = found
    start = len(str(root.path)) + 1 if root.path else 0
    for item in root.traverse():
        if not isinstance(item, Blob):
            continue
        path = str(item.path)
        if item.name in KUSTOMIZATION_NAMES or item.name == CHART_FILE:
            kustomizations.append(path)
        if not path.endswith(MANIFEST_SUFFIXES):
            continue
        reason = skip_reason(path[start:])
        if reason is None:
            yield path, item
        elif (
            reason and item.mode != _SYMLINK_MODE and looks_like_manifest(item.data_stream.read(SNIFF_BYTES))
        ):
            skipped.append(SkippedFile(path, reason))


def read_tree(
    repo: git.Repo,
    rev: str,
    subdir: str = "",
    limits: Limits = DEFAULT_LIMITS,
    contents: dict[str, bytes] | None = None,
) -> TreeFiles:
    """Every manifest of `rev` under `subdir`, in path order, straight from the object database.

    `contents` (blob id to content), shared by the reads of several revisions, reads a blob they have in
    common once: a pull request's base and head differ in a few files of thousands.
    """
    commit = resolve(repo, rev)
    tree = commit.tree
    blobs: list[tuple[str, bytes]] = []
    ids: dict[str, str] = {}
    skipped: list[SkippedFile] = []
    kustomizations: list[str] = []
    contents = {} if contents is None else contents
    manifest_items = _manifest_blobs(tree, subdir, limits, skipped, kustomizations)
    targets = [(path, _follow(tree, blob, path)) for path, blob in sorted(manifest_items, key=lambda p: p[0])]
    missing = {blob.hexsha: path for path, blob in reversed(targets) if blob.hexsha not in contents}
    contents.update(_read_blobs(repo, missing, limits))
    for path, target in targets:
        data = contents.get(target.hexsha)
        if data is None:
            stream = repo.odb.stream(target.binsha)  # size and content in one round trip
            if stream.size > limits.max_file_bytes:
                raise ManifestError(
                    f"file is {stream.size} bytes, over the {limits.max_file_bytes}-byte limit",
                    where=f"{path}:1",
                )
            data = contents[target.hexsha] = stream.read()
        ids[path] = target.hexsha
        blobs.append((path, data))
    config = None
    for name in REPO_CONFIG_NAMES:
        found = _blob_at(tree, posixpath.join(subdir.strip("/"), name) if subdir else name)
        if found is not None:
            config = (str(found.path), found.data_stream.read())
            break
    skipped.sort(key=lambda file: file.path)
    # Charts may be archives (no Chart.yaml blob): a config naming `charts` asks for the files too.
    wants_files = kustomizations or (config is not None and b"charts" in config[1])
    support = _all_files(tree, limits) if wants_files else []
    return TreeFiles(
        commit=commit_info(commit),
        blobs=blobs,
        config=config,
        skipped=skipped,
        kustomizations=sorted(set(kustomizations)),
        support=support,
        ids=ids,
    )


def _read_blobs(repo: git.Repo, wanted: dict[str, str], limits: Limits) -> dict[str, bytes]:
    """The contents of many blobs (id to the first path showing it) in two `git cat-file` calls instead of a
    round trip each. Sizes first, so nothing over the limit is read (the caller's per-blob reading then
    raises at its path); anything this cannot read is left to that reading too."""
    if len(wanted) < 64:  # a few blobs: the per-blob round trips cost less than two processes
        return {}
    command = ["git", "--git-dir", str(repo.git_dir), "cat-file"]
    ids = list(wanted)
    sizes = subprocess.run(
        [*command, "--batch-check"], input="\n".join(ids).encode() + b"\n", capture_output=True, check=False
    )
    if sizes.returncode != 0:
        return {}
    readable = []
    for line in sizes.stdout.decode("ascii", "replace").splitlines():
        sha, _, rest = line.partition(" ")
        kind, _, size = rest.partition(" ")
        if kind == "blob" and size.isdigit() and int(size) <= limits.max_file_bytes:
            readable.append(sha)
    if not readable:
        return {}
    batch = subprocess.run(
        [*command, "--batch"], input="\n".join(readable).encode() + b"\n", capture_output=True, check=False
    )
    if batch.returncode != 0:
        return {}
    found: dict[str, bytes] = {}
    out, at = batch.stdout, 0
    while at < len(out):  # `<sha> blob <size>\n<content>\n`, one per id asked for
        end = out.index(b"\n", at)
        sha, kind, size = out[at:end].decode("ascii").split(" ")
        start = end + 1
        found[sha] = out[start : start + int(size)]
        at = start + int(size) + 1
    return found


# What rendering may write out of one revision: enough for any repository a person keeps by hand.
MAX_SUPPORT_BYTES = 256 * 1024 * 1024


def _all_files(tree: Tree, limits: Limits) -> list[tuple[str, bytes]]:
    """Every file of the revision (symlinks as their target's content when it is in the tree), bounded."""
    files: list[tuple[str, bytes]] = []
    total = 0
    for item in tree.traverse():
        if not isinstance(item, Blob):
            continue
        path = str(item.path)
        blob: Blob = item
        if item.mode == _SYMLINK_MODE:
            try:
                blob = _follow(tree, item, path)
            except ManifestError:
                continue  # a link out of the tree is not written: a kustomization reading it is refused
        total += blob.size
        if len(files) >= limits.max_files or total > MAX_SUPPORT_BYTES:
            raise ManifestError(
                f"the revision has more than {limits.max_files} files or {MAX_SUPPORT_BYTES} bytes to render from",
                where=path,
            )
        files.append((path, blob.data_stream.read()))
    return files


def fetch(repo: git.Repo, remote: str = "origin") -> None:
    """Fetch a remote; a remote that cannot be reached is an environment problem (exit 4)."""
    try:
        repo.remote(remote).fetch()
    except (git.GitCommandError, ValueError) as exc:
        raise EnvironmentProblem(
            f"cannot fetch from remote {remote!r}: {exc}", where=str(repo.working_dir)
        ) from exc
