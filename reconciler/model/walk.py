"""Which files of a checked tree are manifests: the walk of a directory on disk, and why a file is skipped.

The same rules hold for a directory on disk and a Git tree: hidden entries and repository configs below
the root are skipped, a kustomization's or Helm chart's directory is passed over, `exclude` patterns of
the repository config leave files out, and symlinks must stay inside the repository.
"""

from __future__ import annotations

import fnmatch
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from reconciler.errors import ManifestError
from reconciler.model.yamldocs import Limits

MANIFEST_SUFFIXES = (".yaml", ".yml", ".json")
REPO_CONFIG_NAMES = ("dra-gitops.yaml", ".dra-gitops.yaml")
# The names kustomize reads a kustomization from, in its order. A directory holding one is rendered as a
# whole when it is checked or listed in `paths`; met while walking other directories it is passed over.
KUSTOMIZATION_NAMES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
# A directory holding one is a Helm chart: rendered from the repository config's `charts:`, never walked.
CHART_FILE = "Chart.yaml"


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


def is_manifest_file(name: str) -> bool:
    return name.endswith(MANIFEST_SUFFIXES) and name not in REPO_CONFIG_NAMES


def walk(
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
        real_dir = resolve_inside(directory, root)
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
                    _hidden_files(entry, child, prefix, skipped, limits)
                continue
            if entry.is_symlink():
                if not follow_links:
                    continue
                target = resolve_inside(root / child, root)
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


def _hidden_files(
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


def resolve_inside(path: Path, root: Path) -> Path:
    try:
        return path.resolve(strict=False)
    except (RuntimeError, OSError) as exc:  # 3.11 raises RuntimeError on a symlink loop, 3.13 OSError
        raise ManifestError("symlink loop", where=relative_path(path, root)) from exc


def relative_path(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()
