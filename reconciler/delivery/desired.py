"""The desired state of a revision: manifests loaded from directories on disk or from Git trees.

A `dra-gitops.yaml` at the root (of a directory, or of each revision's tree) selects the `paths` to load,
`exclude`s files and sets the policies' `params`. Git is read only through `source/git.py`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.delivery.rendered import render_tree
from reconciler.errors import UserError
from reconciler.model.loader import (
    REPO_CONFIG_NAMES,
    SNIFF_BYTES,
    Duplicate,
    Limits,
    LoadResult,
    Selection,
    SkippedFile,
    excluded_reason,
    is_excluded,
    load_blobs,
    load_paths,
    load_repo_config,
    looks_like_manifest,
    outside_paths_reason,
    shown_path,
)
from reconciler.model.objects import Manifest
from reconciler.model.repoconfig import DriverDecl, drivers_of
from reconciler.policy.gate import GateSettings
from reconciler.policy.inputdoc import Revision
from reconciler.render.capabilities import Capabilities, effective_scopes, from_config
from reconciler.render.helm import CREATED_NAMESPACE, ChartRelease, chart_inputs, releases_of, render_releases
from reconciler.render.kustomize import find_engine, kustomization_file, render_kustomization

if TYPE_CHECKING:
    from reconciler.source.git import TreeFiles


@dataclass
class DesiredState:
    """The manifests of one revision (or of directories on disk) with the repository config's params."""

    manifests: LoadResult
    revision: Revision
    params: dict[str, Any]
    # Paths (from the repository root) of the files rendering read: all a kept copy needs beside manifests.
    render_inputs: frozenset[str] = frozenset()
    # The `drivers:` the repository config declares.
    drivers: tuple[DriverDecl, ...] = ()
    # The settings that decide how a revision is judged (a revision read from Git): its base's judge it.
    settings: GateSettings | None = None

    @property
    def skipped(self) -> list[SkippedFile]:
        """Manifest files of this state that are neither checked nor applied (hidden, outside `paths`)."""
        return self.manifests.skipped

    @property
    def duplicates(self) -> list[Duplicate]:
        """Objects defined again with the same content, loaded once."""
        return self.manifests.duplicates


def empty_state(sha: str | None = None) -> DesiredState:
    """No objects at all: what a rollback of a target's very first revision delivers."""
    return DesiredState(LoadResult(manifests=[], files=[]), Revision(sha=sha), {})


def load_directories(paths: Sequence[Path], limits: Limits) -> DesiredState:
    """Files and directories on disk; a directory with a `dra-gitops.yaml` loads the `paths` it names, and
    a directory holding a kustomization (given, or listed in `paths`) is rendered by kustomize."""
    to_load: list[Path | Selection] = []
    params: dict[str, Any] = {}
    kustomized: list[tuple[Path, Path]] = []  # (repository root, kustomization directory)
    charted: list[tuple[Path, list[ChartRelease]]] = []  # (the config's directory, its releases)
    drivers: list[DriverDecl] = []
    capabilities: dict[Path, Capabilities | None] = {}
    for path in paths:
        if path.is_dir():
            config_paths, config_params, rendered, releases = _config_paths(path)
            drivers.extend(_config_drivers(path, capabilities))
            to_load.extend(config_paths)
            params.update(config_params)
            kustomized.extend((repository_root(path), directory) for directory in rendered)
            if releases:
                charted.append((path, releases))
        else:
            to_load.append(path)
    loaded = load_paths(to_load, limits) if to_load else LoadResult()
    if kustomized:
        _add_rendered(loaded, kustomized, limits)
    for root, releases in charted:
        _merge(loaded, render_releases(root, releases, shown_path, limits, capabilities.get(root)), [])
        inputs = [shown_path(root / relative) for relative in chart_inputs(releases)]
        loaded.skipped = [  # read by Helm: not skipped
            skip
            for skip in loaded.skipped
            if not any(skip.path == i or skip.path.startswith(f"{i}/") for i in inputs)
        ]
    loaded.scope_kinds(effective_scopes())
    return DesiredState(loaded, Revision(), params, drivers=tuple(drivers))


def _config_drivers(root: Path, capabilities: dict[Path, Capabilities | None]) -> tuple[DriverDecl, ...]:
    """The `drivers:` of the config at `root`; its capabilities go to `capabilities`."""
    for name in REPO_CONFIG_NAMES:
        config_file = root / name
        if config_file.is_file():
            config = load_repo_config(config_file.read_bytes(), config_file.as_posix())
            capabilities[root] = _capabilities(config, shown_path(config_file))
            return drivers_of(config)
    return ()


def repository_root(path: Path) -> Path:
    """Where the repository of a directory on disk starts (what a kustomization may read): the nearest
    directory holding `.git`, else the directory itself."""
    start = path.resolve()
    for candidate in (start, *start.parents):
        if (candidate / ".git").exists():
            return candidate
    return start


def _add_rendered(loaded: LoadResult, kustomized: list[tuple[Path, Path]], limits: Limits) -> None:
    engine = find_engine()
    manifests: list[Manifest] = []
    files: list[str] = []
    for root, directory in kustomized:
        objects, inputs = render_kustomization(root, directory, shown_path, engine, limits=limits)
        manifests.extend(objects)
        files.extend(sorted(shown_path(file) for file in inputs.files))
    _merge(loaded, manifests, files)


def _merge(loaded: LoadResult, manifests: list[Manifest], files: list[str]) -> None:
    """Rendered objects join those read raw; one defined both ways is a duplicate like any other (but a
    release namespace `createNamespace` adds gives way to a manifest defining it)."""
    defined = {m.ref for m in loaded.manifests} | {m.ref for m in manifests if not _created(m)}
    manifests = [m for m in manifests if not (_created(m) and m.ref in defined)]
    earlier = loaded.duplicates
    loaded.manifests.extend(manifests)
    loaded.files.extend(files)
    loaded.deduplicate()
    loaded.duplicates = [*earlier, *loaded.duplicates]


def _created(manifest: Manifest) -> bool:
    return manifest.rendered_by.startswith(CREATED_NAMESPACE)


def load_git_revisions(
    repo_dir: Path, revs: Sequence[str], subdir: str, limits: Limits
) -> list[DesiredState]:
    """Revisions read straight from Git, each rendered and selected by its own repository config."""
    from reconciler.source import git as git_source

    repo = git_source.open_repo(repo_dir)
    contents: dict[str, bytes] = {}  # blob id to content: what the revisions share is read once
    trees = [git_source.read_tree(repo, rev, subdir, limits, contents) for rev in revs]
    return desired_from_trees(trees, subdir, limits)


@dataclass(frozen=True)
class _TreeConfig:
    """What one revision's repository config selects: its paths, exclusions, chart releases, params."""

    path: str = ""
    params: dict[str, Any] = field(default_factory=dict)
    wanted: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    releases: tuple[ChartRelease, ...] = ()
    drivers: tuple[DriverDecl, ...] = ()
    capabilities: Capabilities | None = None
    settings: GateSettings = field(default_factory=GateSettings)


def _tree_config(tree: TreeFiles) -> _TreeConfig:
    if tree.config is None:
        return _TreeConfig()
    config_path, config_text = tree.config
    config = load_repo_config(config_text, config_path)
    releases = releases_of(config, config_path)
    return _TreeConfig(
        path=config_path,
        settings=GateSettings(
            params=dict(config.get("params") or {}),
            paths=tuple(str(p) for p in config.get("paths") or ()),
            exclude=tuple(str(p) for p in config.get("exclude") or ()),
            canary_for={r.release_name: r.canary_for for r in releases if r.canary_for},
            where=config_path,
        ),
        params=dict(config.get("params") or {}),
        wanted=tuple(p.strip("/") for p in config.get("paths") or []),
        exclude=(*tuple(config.get("exclude") or ()), *chart_inputs(releases)),
        releases=tuple(releases),
        drivers=drivers_of(config),
        capabilities=_capabilities(config, config_path),
    )


def _capabilities(config: dict[str, Any], where: str) -> Capabilities | None:
    """The `.Capabilities` a config asks charts to render with, if it says (`kubernetesVersion`, ...)."""
    if "kubernetesVersion" in config or "apiVersions" in config:
        return from_config(config, where)
    return None


def desired_from_trees(trees: Sequence[TreeFiles], subdir: str, limits: Limits) -> list[DesiredState]:
    """Desired states of trees read from Git. Each revision is rendered with its own repository config
    (charts, values, value files, paths, exclude): a pull request's base is what the base would deliver.

    A later tree (a pull request's base) that does not load with its own config, the change fixing it, is
    read with the first tree's config instead, so the fix can be judged."""
    prefix = f"{subdir.strip('/')}/" if subdir else ""
    states = []
    parsed: dict[tuple[str, str], list[Manifest]] = {}  # a file the trees share is parsed once
    first: _TreeConfig | None = None
    for tree in trees:
        try:
            config = _tree_config(tree)
            state = _tree_state(tree, config, prefix, limits, parsed)
        except UserError:
            if first is None:
                raise
            config = first
            state = _tree_state(tree, config, prefix, limits, parsed)
        first = config if first is None else first
        states.append(state)
    return states


def _tree_state(
    tree: TreeFiles,
    config: _TreeConfig,
    prefix: str,
    limits: Limits,
    parsed: dict[tuple[str, str], list[Manifest]],
) -> DesiredState:
    rendered = render_tree(tree, prefix, list(config.wanted), limits, config.releases, config.capabilities)
    skipped = list(tree.skipped) + rendered.skipped
    blobs = _selected(rendered.blobs, prefix, config, skipped)
    commit = tree.commit
    revision = Revision(commit.sha, commit.parent, commit.message, commit.author, commit.signed)
    shown_config = config.path or f"{prefix}{REPO_CONFIG_NAMES[0]}"
    loaded = load_blobs(blobs, limits, skipped, root=prefix, config=shown_config, ids=tree.ids, parsed=parsed)
    if rendered.manifests:
        _merge(loaded, rendered.manifests, rendered.files)
    loaded.scope_kinds(effective_scopes())
    return DesiredState(
        loaded, revision, config.params, frozenset(rendered.inputs), config.drivers, config.settings
    )


def _selected(
    blobs: list[tuple[str, bytes]], prefix: str, config: _TreeConfig, skipped: list[SkippedFile]
) -> list[tuple[str, bytes]]:
    """The blobs inside the config's `paths` and outside its `exclude`; what it leaves out goes to `skipped`."""
    if config.wanted:
        inside = []
        for path, data in blobs:
            if any(path == f"{prefix}{w}" or path.startswith(f"{prefix}{w}/") for w in config.wanted):
                inside.append((path, data))
            elif looks_like_manifest(data[:SNIFF_BYTES]):
                skipped.append(SkippedFile(path, outside_paths_reason(config.path)))
        blobs = inside
    if config.exclude:
        kept = []
        for path, data in blobs:
            if is_excluded(path.removeprefix(prefix), config.exclude):
                if looks_like_manifest(data[:SNIFF_BYTES]):
                    skipped.append(SkippedFile(path, excluded_reason(config.path)))
            else:
                kept.append((path, data))
        blobs = kept
    return blobs


def _config_paths(
    root: Path,
) -> tuple[list[Path | Selection], dict[str, Any], list[Path], list[ChartRelease]]:
    """What a `dra-gitops.yaml` at the root of a directory selects (its `paths`), else the directory; the
    directories among them that hold a kustomization, to render instead of reading; and its `charts`."""
    for name in REPO_CONFIG_NAMES:
        config_file = root / name
        if config_file.is_file():
            config = load_repo_config(config_file.read_bytes(), config_file.as_posix())
            paths = [root / p for p in config.get("paths") or []]
            for path in paths:
                if not path.resolve().is_relative_to(root.resolve()):
                    raise UserError(
                        f"`paths` entry {path} leaves the repository", where=config_file.as_posix()
                    )
            params = dict(config.get("params") or {})
            releases = releases_of(config, shown_path(config_file))
            # The charts' directories and value files are read by Helm, never as manifests.
            exclude = (*tuple(config.get("exclude") or ()), *chart_inputs(releases))
            if not paths:
                if kustomization_file(root) is not None:
                    return [], params, [root], releases
                if not exclude:
                    return [root], params, [], releases
                return [Selection(root, (root,), config_file.as_posix(), exclude)], params, [], releases
            rendered = [p for p in paths if p.is_dir() and kustomization_file(p) is not None]
            read = tuple(p for p in paths if p not in rendered)
            if not read:
                return [], params, rendered, releases
            return [Selection(root, read, config_file.as_posix(), exclude)], params, rendered, releases
    if kustomization_file(root) is not None:
        return [], {}, [root], []
    return [root], {}, [], []
