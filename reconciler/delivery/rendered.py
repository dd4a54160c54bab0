"""Rendered parts of a revision read from Git: kustomizations (the subdirectory itself, or the `paths` of the
repository config that hold one) and chart releases (the config's `charts`), rendered from the revision's
files written out to a temporary directory. Every other kustomization or chart is passed over, and no file
of one is read as a manifest."""

from __future__ import annotations

import posixpath
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.errors import ManifestError
from reconciler.model.loader import CHART_FILE, Limits, SkippedFile, chart_reason, kustomization_reason
from reconciler.model.objects import Manifest
from reconciler.render.capabilities import Capabilities
from reconciler.render.helm import ChartRelease, chart_inputs, render_releases
from reconciler.render.kustomize import find_engine, render_kustomization

if TYPE_CHECKING:
    from reconciler.source.git import TreeFiles


@dataclass
class TreeRender:
    """What rendering a tree left: the blobs still to read raw, the rendered objects and their inputs."""

    blobs: list[tuple[str, bytes]]
    manifests: list[Manifest] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    skipped: list[SkippedFile] = field(default_factory=list)
    inputs: set[str] = field(default_factory=set)  # every file of the tree the renders read


def _under(path: str, directory: str) -> bool:
    return not directory or path == directory or path.startswith(f"{directory}/")


def render_tree(
    tree: TreeFiles,
    prefix: str,
    wanted: Sequence[str],
    limits: Limits,
    releases: Sequence[ChartRelease] = (),
    capabilities: Capabilities | None = None,
) -> TreeRender:
    """Render what of `tree` its subdirectory (`prefix`), its `wanted` paths and its `releases` name."""
    if not tree.kustomizations and not releases:
        return TreeRender(blobs=list(tree.blobs))
    area = prefix.rstrip("/")
    markers = {posixpath.dirname(file): file for file in tree.kustomizations}
    kustomized = {d: f for d, f in markers.items() if posixpath.basename(f) != CHART_FILE}
    if wanted:
        to_render = [f"{prefix}{w}".rstrip("/") for w in wanted if f"{prefix}{w}".rstrip("/") in kustomized]
    else:
        to_render = [area] if area in kustomized else []
    charts = {f"{prefix}{r.chart}" for r in releases}
    result = TreeRender(blobs=[(p, d) for p, d in tree.blobs if not any(_under(p, k) for k in markers)])
    read: set[str] = set()  # the kustomization files the renders read (an overlay's bases)
    if to_render or releases:
        read = _render(tree, area, to_render, releases, limits, result, capabilities)
    for directory, file in sorted(markers.items()):
        inside_a_render = any(_under(directory, r) for r in to_render) or directory in charts
        if _under(directory, area) and not inside_a_render and file not in read:
            reason = chart_reason() if posixpath.basename(file) == CHART_FILE else kustomization_reason()
            result.skipped.append(SkippedFile(file, reason))  # its files are never manifests
    return result


def _render(
    tree: TreeFiles,
    area: str,
    directories: list[str],
    releases: Sequence[ChartRelease],
    limits: Limits,
    result: TreeRender,
    capabilities: Capabilities | None,
) -> set[str]:
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
        if directories:
            engine = find_engine()
            for directory in directories:
                manifests, inputs = render_kustomization(root, root / directory, show, engine, limits=limits)
                result.manifests.extend(manifests)
                result.files.extend(sorted(show(file) for file in inputs.files))
                read.update(show(file) for file in inputs.kustomizations)
        if releases:
            base = root / area if area else root
            result.manifests.extend(render_releases(base, releases, show, limits, capabilities))
            for relative in chart_inputs(releases):
                target = base / relative
                files = [target] if target.is_file() else [p for p in target.rglob("*") if p.is_file()]
                result.inputs.update(show(file) for file in files)
        result.inputs.update(result.files)
        return read
