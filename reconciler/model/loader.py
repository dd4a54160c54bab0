"""Load Kubernetes manifests from files, directories or in-memory blobs, keeping `path:line` per object.

Parsing and the limits on hostile YAML live in `yamldocs`; this module finds the files (symlinks must stay
inside the repository, hidden entries are skipped), loads an object defined twice with the same content
once (`duplicates`), and says how to leave out a file that holds no Kubernetes object.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import ManifestError, NotAnObject
from reconciler.model.duplicates import Duplicate, deduplicate
from reconciler.model.objects import Manifest
from reconciler.model.scope import Scopes, rescope
from reconciler.model.yamldocs import DEFAULT_LIMITS, Limits, load_repo_config, parse_documents

__all__ = [
    "DEFAULT_LIMITS",
    "CHART_FILE",
    "KUSTOMIZATION_NAMES",
    "MANIFEST_SUFFIXES",
    "REPO_CONFIG_NAMES",
    "Duplicate",
    "Limits",
    "LoadResult",
    "deduplicate",
    "exclude_advice",
    "is_manifest_file",
    "load_blobs",
    "load_paths",
    "load_repo_config",
    "parse_documents",
    "shown_path",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
REPO_CONFIG_NAMES = ("dra-gitops.yaml", ".dra-gitops.yaml")
# The names kustomize reads a kustomization from, in its order. A directory holding one is rendered as a
# whole when it is checked or listed in `paths`; met while walking other directories it is passed over.
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# A directory holding one is a Helm chart: rendered from the repository config's `charts:`, never walked.
CHART_FILE = "Chart.yaml"


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


# Version-control metadata is never a manifest: not walked, not reported.
VCS_DIRECTORIES = frozenset({".git", ".hg", ".svn"})
# A skipped file is reported when its start mentions both fields every Kubernetes object has, so a CI
# workflow or a package.json beside the manifests is not called a skipped manifest.
SNIFF_BYTES = 64 * 1024
IGNORED = ""  # skip_reason's answer for a file that is no manifest at all


def looks_like_manifest(head: bytes) -> bool:
    return b"apiVersion" in head and b"kind" in head


def skip_reason(relative: str) -> str | None:
    """Why the manifest-named file at `relative` (posix, from the checked root) is not loaded.

    None when it is loaded; IGNORED for the repository config at the root. The same rules hold for a
    directory on disk and a Git tree.
    """
    parts = relative.split("/")
    if len(parts) == 1 and parts[0] in REPO_CONFIG_NAMES:
        return IGNORED
    for part in parts[:-1]:
        if part.startswith("."):
            return f"in hidden directory {part}"
    if parts[-1].startswith("."):
        return "hidden file"
    if parts[-1] in REPO_CONFIG_NAMES:
        return f"named {parts[-1]}, read as the repository config only at the root"
    return None


def kustomization_reason() -> str:
    return "a kustomization: rendered only when its directory is checked or listed in `paths`"


def chart_reason() -> str:
    return "a Helm chart: rendered only as a release listed in `charts` of the repository config"


def outside_paths_reason(config_path: str) -> str:
    return f"outside the `paths` of {config_path}"


def excluded_reason(config_path: str) -> str:
    return f"matches the `exclude` of {config_path}"


def is_excluded(relative: str, patterns: Iterable[str]) -> bool:
    """`relative` (a posix path from the repository root) matches a shell-style `exclude` pattern.

    A pattern matches the whole path (`*` crosses `/`, as in `.gitignore`'s `**`; a leading `**/` also
    matches at the root, a leading `./` is the root), or names a directory whose files it excludes
    (`drafts` or `drafts/`)."""
    for pattern in patterns:
        pattern = pattern.removeprefix("./").strip("/")
        if fnmatch.fnmatchcase(relative, pattern) or relative.startswith(pattern + "/"):
            return True
        if pattern.startswith("**/") and is_excluded(relative, [pattern[3:]]):
            return True
    return False


def exclude_advice(relative: str, config: str) -> str:
    """How to leave out the file at `relative` (posix, from the root of the repository config `config`)."""
    pattern = "".join(f"[{c}]" if c in "*?[" else c for c in relative)  # matches this file only
    return f"if it is another tool's file, leave it out: add `{pattern}` to `exclude` in {config}"


def _parse(content: bytes, shown: str, limits: Limits, advice: Callable[[], str] | None) -> list[Manifest]:
    try:
        return parse_documents(content, shown, limits)
    except NotAnObject as exc:
        if advice is None:
            raise
        raise NotAnObject(f"{exc.detail}; {advice()}", where=exc.where) from exc


def is_manifest_file(name: str) -> bool:
    return name.endswith(MANIFEST_SUFFIXES) and name not in REPO_CONFIG_NAMES


def _walk(
    root: Path,
    limits: Limits,
    skipped: list[tuple[str, str]],
    *,
    prefix: str = "",
    prune: frozenset[str] = frozenset(),
    visited: set[Path] | None = None,
    follow_links: bool = True,
) -> Iterator[str]:
    """Manifest files under `root` as paths relative to it, depth-first in name order (like `find | sort`).

    Files `skip_reason` rejects go to `skipped` with the reason instead ( `prefix` is where `root` lies in
    the checked tree); hidden directories are searched only for that, without following symlinks, and
    version-control directories not at all. `prune` names relative paths not to enter. Symlinks must stay
    inside the repository (without `follow_links` they are passed over: a search for skipped files must
    not fail on links it would not load); a directory reached twice through links is read once. Works on
    `os.scandir` entries, so a file costs no extra stat.
    """
    real_root = root.resolve()
    visited = set() if visited is None else visited
    count = 0
    # Files and directories share one stack, pushed in reverse name order so they pop in name order.
    stack: list[tuple[str, bool]] = [("", True)]
    while stack:
        relative, is_dir = stack.pop()
        if not is_dir:
            count += 1
            if count > limits.max_files:
                raise ManifestError(f"more than {limits.max_files} manifest files", where=str(root))
            yield relative
            continue
        directory = root / relative if relative else root
        real_dir = _resolve(directory, root)
        if real_dir in visited:  # a symlink loop inside the repository
            continue
        visited.add(real_dir)
        entries = sorted(os.scandir(directory), key=lambda e: e.name, reverse=True)
        if relative:
            kustomization = next((e.name for e in entries if e.name in KUSTOMIZATION_NAMES), None)
            if kustomization is not None:  # its files are a kustomization's inputs, not manifests
                skipped.append((f"{relative}/{kustomization}", kustomization_reason()))
                continue
            if any(e.name == CHART_FILE for e in entries):  # templates, not manifests
                skipped.append((f"{relative}/{CHART_FILE}", chart_reason()))
                continue
        for entry in entries:
            child = f"{relative}/{entry.name}" if relative else entry.name
            if child in prune:
                continue
            if entry.name.startswith("."):
                if entry.name not in VCS_DIRECTORIES:
                    _hidden(entry, child, prefix, skipped, limits)
                continue
            if entry.is_symlink():
                if not follow_links:
                    continue
                target = _resolve(root / child, root)
                if not target.is_relative_to(real_root):
                    raise ManifestError(f"symlink points outside the repository (to {target})", where=child)
            if entry.is_dir():
                stack.append((child, True))
            elif entry.is_file() and entry.name.endswith(MANIFEST_SUFFIXES):
                reason = skip_reason(f"{prefix}{child}")
                if reason is None:
                    stack.append((child, False))
                elif reason:
                    skipped.append((child, reason))


def _hidden(
    entry: os.DirEntry[str], child: str, prefix: str, skipped: list[tuple[str, str]], limits: Limits
) -> None:
    """Record the manifest-named files of a hidden entry (`child`, relative to the walk root)."""
    if entry.is_symlink():
        return
    walk_root = entry.path[: len(entry.path) - len(child)]
    if entry.is_file():
        paths = [child]
    elif entry.is_dir():
        paths = []
        for directory, dirs, files in os.walk(entry.path):
            dirs[:] = sorted(d for d in dirs if d not in VCS_DIRECTORIES)
            base = directory[len(walk_root) :]
            paths.extend(f"{base}/{name}" for name in sorted(files))
            if len(paths) > limits.max_files:
                break
    else:
        return
    for path in paths:
        if path.endswith(MANIFEST_SUFFIXES) and not os.path.islink(walk_root + path):
            reason = skip_reason(f"{prefix}{path}")
            if reason:
                skipped.append((path, reason))


def _resolve(path: Path, root: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (RuntimeError, OSError) as exc:  # 3.11 raises RuntimeError on a symlink loop, 3.13 OSError
        raise ManifestError("symlink loop", where=_rel(path, root)) from exc


def _rel(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


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
                advice = functools.partial(exclude_advice, _rel(file, root), config)
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
        for relative in _walk(
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
        relative = _rel(path, selection.root)
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
        if is_excluded(_rel(file, selection.root), selection.exclude):
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
