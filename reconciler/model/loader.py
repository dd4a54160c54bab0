"""Load Kubernetes manifests from files, directories or in-memory blobs, keeping `path:line` per object.

Parsing and the limits on hostile YAML live in `yamldocs`; which files are manifests and why one is
skipped in `walk` (symlinks must stay inside the repository, hidden entries are skipped). This module loads
them, loads an object defined twice with the same content once (`duplicates`), and says how to leave out a
file that holds no Kubernetes object. The names of `walk` are importable from here as before.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import ManifestError, NotAnObject
from reconciler.model.duplicates import Duplicate, deduplicate
from reconciler.model.objects import Manifest
from reconciler.model.scope import Scopes, rescope
from reconciler.model.walk import (
    CHART_FILE,
    KUSTOMIZATION_NAMES,
    MANIFEST_SUFFIXES,
    REPO_CONFIG_NAMES,
    SNIFF_BYTES,
    chart_reason,
    exclude_advice,
    excluded_reason,
    is_excluded,
    is_manifest_file,
    kustomization_reason,
    looks_like_manifest,
    outside_paths_reason,
    relative_path,
    skip_reason,
    walk,
)
from reconciler.model.yamldocs import DEFAULT_LIMITS, Limits, load_repo_config, parse_documents

__all__ = [
    "DEFAULT_LIMITS",
    "CHART_FILE",
    "KUSTOMIZATION_NAMES",
    "MANIFEST_SUFFIXES",
    "REPO_CONFIG_NAMES",
    "SNIFF_BYTES",
    "Duplicate",
    "Limits",
    "LoadResult",
    "Selection",
    "SkippedFile",
    "chart_reason",
    "deduplicate",
    "exclude_advice",
    "excluded_reason",
    "is_excluded",
    "is_manifest_file",
    "kustomization_reason",
    "load_blobs",
    "load_paths",
    "load_repo_config",
    "looks_like_manifest",
    "outside_paths_reason",
    "parse_documents",
    "shown_path",
    "skip_reason",
]


@dataclass(frozen=True)
class SkippedFile:
    """A manifest file that is neither checked nor applied, and why (`kubectl apply -R` would apply it)."""

    path: str  # as file paths are shown in findings: relative to the display root or the repository
    reason: str


@dataclass
class LoadResult:
    manifests: list[Manifest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    # Objects defined again with the same content: left out of `manifests`, reported as warnings.
    duplicates: list[Duplicate] = field(default_factory=list)
    # (group, kind) of the kinds whose scope nothing knew (taken as namespaced): see `scope_kinds`.
    unscoped: list[tuple[str, str]] = field(default_factory=list)

    def deduplicate(self) -> None:
        self.manifests, self.duplicates = deduplicate(self.manifests)

    def scope_kinds(self, scopes: Scopes) -> None:
        """References as `scopes` and the CustomResourceDefinitions among the manifests scope them: an object
        of a cluster-scoped custom kind has no namespace (one defined twice in two namespaces is then a
        duplicate like any other)."""
        rescoped = rescope(self.manifests, scopes)
        self.manifests, self.unscoped = rescoped.manifests, rescoped.unknown
        if rescoped.changed:
            earlier = self.duplicates
            self.deduplicate()
            self.duplicates = [*earlier, *self.duplicates]


def _parse(content: bytes, shown: str, limits: Limits, advice: Callable[[], str] | None) -> list[Manifest]:
    try:
        return parse_documents(content, shown, limits)
    except NotAnObject as exc:
        if advice is None:
            raise
        raise NotAnObject(f"{exc.detail}; {advice()}", where=exc.where) from exc


def _read(path: Path, shown: str, limits: Limits) -> bytes:
    size = path.stat().st_size
    if size > limits.max_file_bytes:
        # Refuse before reading: a 50 MB file never reaches memory.
        raise ManifestError(
            f"file is {size} bytes, over the {limits.max_file_bytes}-byte limit", where=f"{shown}:1"
        )
    return path.read_bytes()


@dataclass(frozen=True)
class Selection:
    """A directory whose repository config (shown as `config`) names the `paths` to load inside it."""

    root: Path
    paths: tuple[Path, ...]
    config: str
    exclude: tuple[str, ...] = ()


def load_paths(
    paths: Iterable[Path | Selection], limits: Limits = DEFAULT_LIMITS, *, display_root: Path | None = None
) -> LoadResult:
    """Load every manifest under the given directories, files and selections.

    Paths in locations are shown relative to `display_root` (default: the current directory when the file
    lies under it), so reports carry the path a user typed or a CI annotator expects. Manifest files a
    directory holds but the load passes over (hidden, or outside the `paths` of a selection) are listed in
    `skipped` when they look like Kubernetes objects.
    """
    shown_root = (display_root or Path.cwd()).resolve()
    result = LoadResult()
    candidates: list[tuple[Path, str, str]] = []  # file, shown, reason
    loaded: set[str] = set()  # a file reached through two of the given paths is read once
    for given in paths:
        root: Path | None = None  # where an `exclude` pattern for the given path's files starts
        config = ""
        if isinstance(given, Selection):
            files = _load_selection(given, limits, shown_root, candidates)
            root, config = given.root, given.config
        elif given.is_dir():
            files = _walk_shown(given, limits, shown_root, candidates)
            root, config = given, _config_shown(given, shown_root)
        elif given.exists() or given.is_symlink():
            files = [(given, _shown(given, shown_root))]
        else:
            raise ManifestError("no such file or directory", where=str(given))
        for file, shown in files:
            key = os.path.normpath(file.absolute())
            if key in loaded:
                continue
            loaded.add(key)
            result.files.append(shown)
            advice = None
            if root is not None:
                advice = functools.partial(exclude_advice, relative_path(file, root), config)
            result.manifests.extend(_parse(_read(file, shown, limits), shown, limits, advice))
    result.deduplicate()
    result.skipped = sorted(
        (
            SkippedFile(shown, reason)
            for file, shown, reason in candidates
            if reason in (kustomization_reason(), chart_reason()) or looks_like_manifest(_head(file))
        ),
        key=lambda skipped: skipped.path,
    )
    return result


def _walk_shown(
    directory: Path,
    limits: Limits,
    shown_root: Path,
    candidates: list[tuple[Path, str, str]],
    *,
    prefix: str = "",
    prune: frozenset[str] = frozenset(),
    visited: set[Path] | None = None,
    follow_links: bool = True,
) -> list[tuple[Path, str]]:
    """The files of `directory` to load with their shown paths; what it skips goes to `candidates`."""
    if not directory.exists() and not directory.is_symlink():
        raise ManifestError("no such file or directory", where=str(directory))
    # Where the directory is shown, once; its files are shown by joining their relative paths.
    shown_dir = _shown(directory, shown_root)

    def shown(relative: str) -> str:
        return relative if shown_dir == "." else f"{shown_dir}/{relative}"

    skipped: list[tuple[str, str]] = []
    files = [
        (directory / relative, shown(relative))
        for relative in walk(
            directory, limits, skipped, prefix=prefix, prune=prune, visited=visited, follow_links=follow_links
        )
    ]
    candidates.extend((directory / relative, shown(relative), reason) for relative, reason in skipped)
    return files


def _load_selection(
    selection: Selection, limits: Limits, shown_root: Path, candidates: list[tuple[Path, str, str]]
) -> list[tuple[Path, str]]:
    """The files under the selected paths, in their order; the rest of the root is searched for skips."""
    files: list[tuple[Path, str]] = []
    seen: set[Path] = set()  # directories the selected paths reach, so links into them are not "outside"
    selected: set[str] = set()
    for path in selection.paths:
        relative = relative_path(path, selection.root)
        selected.add(relative)
        if path.is_dir():
            prefix = "" if relative == "." else f"{relative}/"
            files += _walk_shown(path, limits, shown_root, candidates, prefix=prefix, visited=seen)
        elif path.exists() or path.is_symlink():
            files.append((path, _shown(path, shown_root)))
        else:
            raise ManifestError("no such file or directory", where=str(path))
    outside = _walk_shown(
        selection.root,
        limits,
        shown_root,
        candidates,
        prune=frozenset(selected),
        visited=seen,
        follow_links=False,
    )
    reason = outside_paths_reason(selection.config)
    candidates.extend((file, shown, reason) for file, shown in outside)
    if not selection.exclude:
        return files
    kept = []
    for file, shown in files:
        if is_excluded(relative_path(file, selection.root), selection.exclude):
            candidates.append((file, shown, excluded_reason(selection.config)))
        else:
            kept.append((file, shown))
    return kept


def _config_shown(directory: Path, shown_root: Path) -> str:
    """The repository config of `directory` as shown: the one there, else where one would go."""
    name = next((n for n in REPO_CONFIG_NAMES if (directory / n).is_file()), REPO_CONFIG_NAMES[0])
    return _shown(directory / name, shown_root)


def _head(path: Path) -> bytes:
    try:
        with path.open("rb") as stream:
            return stream.read(SNIFF_BYTES)
    except OSError:
        return b"apiVersion kind"  # unreadable: say it was skipped rather than guess it is no manifest


def shown_path(path: Path, display_root: Path | None = None) -> str:
    """A path as `load_paths` shows it: relative to `display_root` (default: the current directory)."""
    return _shown(path, (display_root or Path.cwd()).resolve())


def _shown(path: Path, shown_root: Path) -> str:
    """`path` relative to the (resolved) display root. A file itself is not resolved, so a symlinked
    manifest keeps its own name rather than its target's; a directory may be."""
    candidates = [path.absolute(), path.parent.resolve() / path.name]
    if path.is_dir():
        candidates.append(path.resolve())
    for candidate in candidates:
        try:
            return candidate.relative_to(shown_root).as_posix()
        except ValueError:
            continue
    return path.as_posix()


def load_blobs(
    blobs: Iterable[tuple[str, bytes]],
    limits: Limits = DEFAULT_LIMITS,
    skipped: Iterable[SkippedFile] = (),
    *,
    root: str = "",
    config: str | None = None,
    ids: Mapping[str, str] | None = None,
    parsed: dict[tuple[str, str], list[Manifest]] | None = None,
) -> LoadResult:
    """Load manifests from (path, content) pairs, e.g. the blobs of a Git tree, noting what was skipped.

    With `ids` (path to blob id) and a `parsed` cache shared by several calls, a file with the same path
    and blob id as one loaded before is not parsed again: its manifests are the same objects (not to be
    modified).

    `config` is the repository config (shown path) whose `exclude` patterns start at `root`, a prefix of
    the blob paths; with it, a file that holds no Kubernetes object is refused with how to leave it out.
    """
    result = LoadResult(skipped=sorted(skipped, key=lambda file: file.path))
    for path, content in blobs:
        result.files.append(path)
        key = (path, ids[path]) if ids is not None and path in ids else None
        manifests = parsed.get(key) if parsed is not None and key is not None else None
        if manifests is None:
            advice = functools.partial(exclude_advice, path.removeprefix(root), config) if config else None
            manifests = _parse(content, path, limits, advice)
            if parsed is not None and key is not None:
                parsed[key] = manifests
        result.manifests.extend(manifests)
    result.deduplicate()
    return result
