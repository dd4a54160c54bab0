"""The files a kustomization reads, found before kustomize runs: every path field of every kustomization it
reaches, each resolved inside the repository. What must not run is refused here, with `file:line`: a remote
base (rendering has no network), a path leaving the repository (a `../../..` or a symlink out), a missing
file or base, and Helm inflation (`helmCharts`: charts are rendered from the repository config instead).

Pure apart from reading the repository's files; nothing here starts a process.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import ManifestError
from reconciler.model.loader import KUSTOMIZATION_NAMES
from reconciler.model.yamldocs import yaml_error

MAX_KUSTOMIZATION_BYTES = 1024 * 1024
MAX_INPUT_FILES = 20_000
# A path that kustomize would fetch: a URL, scp-like git, or host/org/repo.
_REMOTE = re.compile(r"^(?:[a-z][a-z0-9+.-]*://|git@|[a-z0-9-]+(?:\.[a-z0-9-]+)+/)", re.IGNORECASE)
# Fields whose entries are files or directories, and fields whose entries carry them.
_LIST_FIELDS = ("resources", "bases", "components", "crds", "configurations", "generators", "transformers",
                "validators", "patchesStrategicMerge")  # fmt: skip
_DIRECTORY_FIELDS = frozenset(
    {"resources", "bases", "components", "generators", "transformers", "validators"}
)
_PATH_ITEM_FIELDS = ("patches", "patchesJson6902", "replacements")


def kustomization_file(directory: Path) -> Path | None:
    """The kustomization file a directory holds, if any (the names kustomize accepts, in its order)."""
    for name in KUSTOMIZATION_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


@dataclass
class KustomizeInputs:
    """What rendering one kustomization reads: its kustomization files and every file they reach."""

    top: Path  # the directory rendered
    kustomizations: list[Path] = field(default_factory=list)
    files: set[Path] = field(default_factory=set)

    def digest(self, repo_root: Path) -> str:
        """A hash of every input's path and content: the same inputs render the same objects."""
        hasher = hashlib.sha256()
        for path in sorted(self.files):
            hasher.update(path.relative_to(repo_root).as_posix().encode() + b"\0")
            hasher.update(hashlib.sha256(path.read_bytes()).digest())
        return hasher.hexdigest()


@dataclass(frozen=True)
class _Entry:
    value: str
    line: int
    field: str


Show = Callable[[Path], str]  # how a path of the repository is shown in messages


@dataclass
class _Kustomization:
    document: dict[str, Any]
    key_lines: dict[str, int]  # the line of each top-level key
    values: dict[str, yaml.Node]  # the composed value of each top-level key (for the lines of items)


def scan(repo_root: Path, directory: Path, show: Show) -> KustomizeInputs:
    """Every file rendering `directory` reads, checked; raises ManifestError naming `file:line`."""
    root = repo_root.resolve()
    inputs = KustomizeInputs(top=directory.resolve())
    _visit(root, directory.resolve(), inputs, set(), show)
    return inputs


def _visit(root: Path, directory: Path, inputs: KustomizeInputs, seen: set[Path], show: Show) -> None:
    if directory in seen:
        return
    seen.add(directory)
    file = kustomization_file(directory)
    if file is None:
        raise ManifestError(
            "no kustomization.yaml, kustomization.yml or Kustomization here", where=show(directory)
        )
    inputs.kustomizations.append(file)
    inputs.files.add(file)
    shown = show(file)
    kustomization = _read_kustomization(file, shown)
    document, lines = kustomization.document, kustomization.key_lines
    if "helmCharts" in document or "helmGlobals" in document:
        key = "helmCharts" if "helmCharts" in document else "helmGlobals"
        raise ManifestError(
            f"{key}: Helm inflation inside a kustomization is not run (it would need helm and the network); "
            "list the chart under `charts:` of the repository config (dra-gitops.yaml) instead",
            where=f"{shown}:{lines.get(key, 1)}",
        )
    for entry in _entries(kustomization):
        where = f"{shown}:{entry.line}"
        if _is_inline_patch(entry):
            continue
        if _REMOTE.match(entry.value) and not (directory / entry.value).exists():
            raise ManifestError(
                f"{entry.field}: remote base {entry.value!r} refused: rendering runs without network; "
                "vendor it into the repository",
                where=where,
            )
        target = _inside(root, directory, entry.value, where, entry.field)
        if target.is_dir():
            if entry.field not in _DIRECTORY_FIELDS:
                raise ManifestError(
                    f"{entry.field}: {entry.value} is a directory, a file is expected", where=where
                )
            _visit(root, target, inputs, seen, show)
        else:
            inputs.files.add(target)
        if len(inputs.files) > MAX_INPUT_FILES:
            raise ManifestError(f"the kustomization reads more than {MAX_INPUT_FILES} files", where=where)


def _read_kustomization(file: Path, shown: str) -> _Kustomization:
    if file.stat().st_size > MAX_KUSTOMIZATION_BYTES:
        raise ManifestError(f"over {MAX_KUSTOMIZATION_BYTES} bytes", where=f"{shown}:1")
    text = file.read_bytes()
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, shown) from exc
    if document is None:
        return _Kustomization({}, {}, {})
    if not isinstance(document, dict) or not isinstance(node, yaml.MappingNode):
        raise ManifestError("a kustomization must be a mapping", where=f"{shown}:1")
    found = _Kustomization(document, {}, {})
    for key_node, value_node in node.value:
        found.key_lines[str(key_node.value)] = key_node.start_mark.line + 1
        found.values[str(key_node.value)] = value_node
    return found


def _entries(kustomization: _Kustomization) -> Iterator[_Entry]:
    document, lines, nodes = kustomization.document, kustomization.key_lines, kustomization.values
    for key in _LIST_FIELDS:
        for index, value in enumerate(_as_list(document.get(key))):
            if isinstance(value, str):
                yield _Entry(value, _item_line(nodes.get(key), index, lines.get(key, 1)), key)
    for key in _PATH_ITEM_FIELDS:
        for index, item in enumerate(_as_list(document.get(key))):
            if isinstance(item, dict) and isinstance(item.get("path"), str):
                yield _Entry(item["path"], _item_line(nodes.get(key), index, lines.get(key, 1)), key)
    for key in ("configMapGenerator", "secretGenerator"):
        for index, item in enumerate(_as_list(document.get(key))):
            if not isinstance(item, dict):
                continue
            line = _item_line(nodes.get(key), index, lines.get(key, 1))
            sources = [*_as_list(item.get("files")), *_as_list(item.get("envs"))]
            if isinstance(item.get("env"), str):
                sources.append(item["env"])
            for source in sources:
                if isinstance(source, str):
                    # `files` entries may be `key=path`.
                    yield _Entry(source.split("=", 1)[1] if "=" in source else source, line, key)
    openapi = document.get("openapi")
    if isinstance(openapi, dict) and isinstance(openapi.get("path"), str):
        yield _Entry(openapi["path"], lines.get("openapi", 1), "openapi")


def _is_inline_patch(entry: _Entry) -> bool:
    # patchesStrategicMerge also takes a patch written inline as a string.
    return entry.field == "patchesStrategicMerge" and "\n" in entry.value


def _inside(root: Path, directory: Path, value: str, where: str, field_name: str) -> Path:
    if os.path.isabs(value):
        raise ManifestError(
            f"{field_name}: absolute path {value} refused: paths stay inside the repository", where=where
        )
    target = (directory / value).resolve()  # symlinks followed: one pointing out is refused too
    if not target.is_relative_to(root):
        raise ManifestError(f"{field_name}: {value} leaves the repository", where=where)
    if not target.exists():
        raise ManifestError(f"{field_name}: {value} does not exist", where=where)
    return target


def _item_line(node: yaml.Node | None, index: int, fallback: int) -> int:
    if isinstance(node, yaml.SequenceNode) and index < len(node.value):
        return int(node.value[index].start_mark.line) + 1
    return fallback


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
