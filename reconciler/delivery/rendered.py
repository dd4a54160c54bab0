"""Kustomizations in a revision read from Git: the directories to render (the subdirectory itself, or the
`paths` of the repository config that hold one), rendered from the revision's files written out to a
temporary directory; every other kustomization passed over, its files never read as manifests."""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ManifestError
from reconciler.model.loader import Limits, SkippedFile, kustomization_reason
from reconciler.model.objects import Manifest
from reconciler.render.kustomize import find_engine, render_kustomization

if TYPE_CHECKING:
    from reconciler.source.git import TreeFiles


@dataclass
class TreeRender:
    """What rendering a tree's kustomizations left: the blobs still to read raw, the rendered objects."""

    blobs: list[tuple[str, bytes]]
    manifests: list[Manifest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)


def _under(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(f"{directory}/")


def render_tree(tree: TreeFiles, prefix: str, wanted: Sequence[str], limits: Limits) -> TreeRender:
    """Render the kustomizations of `tree` that its subdirectory (`prefix`) or `wanted` paths name."""
    if not tree.kustomizations:
        return TreeRender(blobs=list(tree.blobs))
    area = prefix.rstrip("/")
    directories = {posixpath.dirname(file): file for file in tree.kustomizations}
    if wanted:
        to_render = [f"{prefix}{w}".rstrip("/") for w in wanted if f"{prefix}{w}".rstrip("/") in directories]
    else:
        to_render = [area] if area in directories else []
    result = TreeRender(blobs=[(p, d) for p, d in tree.blobs if not any(_under(p, k) for k in directories)])
    read: set[str] = set()  # the kustomization files the renders read (an overlay's bases)
    if to_render:
        read = _render(tree, to_render, limits, result)
    for directory, file in sorted(directories.items()):
        inside_a_render = any(_under(directory, r) for r in to_render)
        if _under(directory, area) and not inside_a_render and file not in read:
            result.skipped.append(SkippedFile(file, kustomization_reason()))  # its files are never manifests
    return result


def _render(tree: TreeFiles, directories: list[str], limits: Limits, result: TreeRender) -> set[str]:
    engine = find_engine()
    with tempfile.TemporaryDirectory(prefix="dra-gitops-tree-") as scratch:
        root = Path(scratch).resolve()
        for path, data in tree.support:
            target = root / path
            if not target.resolve().is_relative_to(root):
                raise ManifestError("path leaves the repository", where=path)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)

        def show(path: Path) -> str:
            try:
                return path.resolve().relative_to(root).as_posix() or "."
            except ValueError:
                return path.as_posix()

        read: set[str] = set()
        for directory in directories:
            manifests, inputs = render_kustomization(root, root / directory, show, engine, limits=limits)
            result.manifests.extend(manifests)
            result.files.extend(sorted(show(file) for file in inputs.files))
            read.update(show(file) for file in inputs.kustomizations)
        return read
