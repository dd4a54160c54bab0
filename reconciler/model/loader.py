"""Load Kubernetes manifests from files, directories or in-memory blobs, keeping `path:line` per object.

Parsing and the limits on hostile YAML live in `yamldocs`; this module finds the files (symlinks must stay
inside the repository, hidden entries are skipped) and refuses the same object defined twice.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.errors import ManifestError
from reconciler.model.objects import Manifest, ObjRef
from reconciler.model.yamldocs import DEFAULT_LIMITS, Limits, load_repo_config, parse_documents

__all__ = [
    "DEFAULT_LIMITS",
    "MANIFEST_SUFFIXES",
    "REPO_CONFIG_NAMES",
    "Limits",
    "LoadResult",
    "check_duplicates",
    "is_manifest_file",
    "load_blobs",
    "load_paths",
    "load_repo_config",
    "parse_documents",
]

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
REPO_CONFIG_NAMES = ("dra-gitops.yaml", ".dra-gitops.yaml")


@dataclass
class LoadResult:
    manifests: list[Manifest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)


def check_duplicates(manifests: Iterable[Manifest]) -> None:
    """Refuse the same object defined twice: which one wins would depend on file order."""
    seen: dict[ObjRef, Manifest] = {}
    for manifest in manifests:
        first = seen.setdefault(manifest.ref, manifest)
        if first is not manifest:
            raise ManifestError(
                f"{manifest.ref} is defined twice (first at {first.where})", where=manifest.where
            )


def is_manifest_file(name: str) -> bool:
    return name.endswith(MANIFEST_SUFFIXES) and name not in REPO_CONFIG_NAMES


def _walk(root: Path, limits: Limits) -> Iterator[str]:
    """Manifest files under `root` as paths relative to it, depth-first in name order (like `find | sort`).

    Hidden entries are skipped; symlinks must stay inside the repository; a directory reached twice
    through links is read once. Works on `os.scandir` entries, so a file costs no extra stat.
    """
    real_root = root.resolve()
    visited: set[Path] = set()
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
        children = sorted(
            (e for e in os.scandir(directory) if not e.name.startswith(".")), key=lambda e: e.name
        )
        for entry in reversed(children):
            child = f"{relative}/{entry.name}" if relative else entry.name
            if entry.is_symlink():
                target = _resolve(root / child, root)
                if not target.is_relative_to(real_root):
                    raise ManifestError(f"symlink points outside the repository (to {target})", where=child)
            if entry.is_dir():
                stack.append((child, True))
            elif entry.is_file() and is_manifest_file(entry.name):
                stack.append((child, False))


def _resolve(path: Path, root: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (RuntimeError, OSError):  # 3.11 raises RuntimeError on a symlink loop, 3.13 OSError
        raise ManifestError("symlink loop", where=_rel(path, root)) from None


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


def load_paths(
    paths: Iterable[Path], limits: Limits = DEFAULT_LIMITS, *, display_root: Path | None = None
) -> LoadResult:
    """Load every manifest under the given directories and files.

    Paths in locations are shown relative to `display_root` (default: the current directory when the file
    lies under it), so reports carry the path a user typed or a CI annotator expects.
    """
    shown_root = (display_root or Path.cwd()).resolve()
    result = LoadResult()
    for given in paths:
        if not given.exists() and not given.is_symlink():
            raise ManifestError("no such file or directory", where=str(given))
        if given.is_dir():
            # Where the directory is shown, once; its files are shown by joining their relative paths.
            prefix = _shown(given, shown_root)
            files = [
                (given / relative, relative if prefix == "." else f"{prefix}/{relative}")
                for relative in _walk(given, limits)
            ]
        else:
            files = [(given, _shown(given, shown_root))]
        for file, shown in files:
            result.files.append(shown)
            result.manifests.extend(parse_documents(_read(file, shown, limits), shown, limits))
    check_duplicates(result.manifests)
    return result


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


def load_blobs(blobs: Iterable[tuple[str, bytes]], limits: Limits = DEFAULT_LIMITS) -> LoadResult:
    """Load manifests from (path, content) pairs, e.g. the blobs of a Git tree."""
    result = LoadResult()
    for path, content in blobs:
        result.files.append(path)
        result.manifests.extend(parse_documents(content, path, limits))
    check_duplicates(result.manifests)
    return result
