"""Parse YAML/JSON manifest streams into objects with `path:line`, refusing hostile input.

YAML alias bombs, files and documents over the size limits, deeply nested documents, non-mapping
documents, objects without apiVersion/kind/metadata.name, mis-cased keys (`apiversion`) and repeated keys are
refused with a `ManifestError` that names the file and line; a document that is no Kubernetes object at all
(a values file, a tool's config) raises its subclass `NotAnObject`.

Parsing uses PyYAML's C loader when available and builds each document from its node graph, so the line of
every document (and of every item of a `List`) comes for free from the composer's marks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.errors import ManifestError, NotAnObject
from reconciler.model.objects import Manifest, ref_of

try:  # the C loader is several times faster; fall back so a machine without libyaml still works
    from yaml import CSafeLoader as _BaseLoader
except ImportError:  # pragma: no cover - libyaml ships in PyYAML's wheels
    from yaml import SafeLoader as _BaseLoader  # type: ignore[assignment]


@dataclass(frozen=True)
class Limits:
    """Bounds that keep a hostile repository from exhausting the checker."""

    max_file_bytes: int = 16 * 1024 * 1024
    max_document_bytes: int = 4 * 1024 * 1024
    # Nodes a document may expand to through aliases; a manifest with anchors rarely exceeds a few hundred.
    max_expanded_nodes: int = 100_000
    max_files: int = 100_000
    # libyaml composes recursively in C: tens of thousands of nested `[` crash the process, not raise.
    max_flow_depth: int = 1_000


DEFAULT_LIMITS = Limits()


class _Loader(_BaseLoader):
    """Safe loader whose timestamps stay strings and which refuses duplicate keys, as kubectl does."""

    # Set per stream: whether `<<` occurs at all. Without merge keys every key node is the mapping's own,
    # so the duplicate check costs one length comparison per mapping.
    may_merge = True

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        # Keys written in this mapping (`<<` merges are expanded by the base class and may be overridden).
        own = (
            [key for key, _ in node.value if key.tag != "tag:yaml.org,2002:merge"]
            if self.may_merge and isinstance(node, yaml.MappingNode)
            else None
        )
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)
        # A repeated key would silently win here while kubectl refuses the file: judge what gets applied.
        if len(mapping) != len(node.value):
            seen: set[Any] = set()
            for key_node in own if own is not None else [key for key, _ in node.value]:
                key = self.construct_object(key_node, deep=True)
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        "while constructing a mapping",
                        node.start_mark,
                        f"found duplicate key {key!r}",
                        key_node.start_mark,
                    )
                seen.add(key)
        return mapping

    def construct_tree(self, node: yaml.Node) -> Any:
        """`construct_document` for a document without aliases: the same values in a fraction of the calls.

        Strings, decimal ints, string-keyed mappings and sequences are built directly; any other node (other
        scalar types, explicit tags, merge keys, non-string keys) and any mapping with a repeated key goes
        through the base constructor, which gives the same value or the same error. Without anchors every
        node occurs once, so no identity or recursion bookkeeping is needed (an anchor alone shares nothing).
        """
        try:
            return self._tree(node)
        finally:  # what construct_document resets, for the nodes handed to the base constructor
            self.constructed_objects = {}
            self.recursive_objects = {}
            self.state_generators = []
            self.deep_construct = False

    def _tree(self, node: yaml.Node) -> Any:
        kind = type(node)
        tag = node.tag
        if kind is yaml.ScalarNode:
            if tag == _STR_TAG:
                return node.value
            value = node.value
            if tag == _INT_TAG and value.isdigit() and value.isascii() and (value[0] != "0" or value == "0"):
                return int(value)
        elif kind is yaml.MappingNode and tag == _MAP_TAG:
            mapping: dict[Any, Any] = {}
            tree = self._tree
            for key_node, value_node in node.value:
                if key_node.tag != _STR_TAG or type(key_node) is not yaml.ScalarNode:
                    return self.construct_object(node, deep=True)
                mapping[key_node.value] = tree(value_node)
            if len(mapping) != len(node.value):
                return self.construct_object(node, deep=True)  # refuses the repeated key, naming it
            return mapping
        elif kind is yaml.SequenceNode and tag == _SEQ_TAG:
            tree = self._tree
            return [tree(child) for child in node.value]
        return self.construct_object(node, deep=True)

    def resolve(self, kind: type[yaml.Node], value: Any, implicit: Any) -> str:
        # Called by the C composer for every node, so kept short. With no path resolvers (see below), a
        # plain scalar's tag depends on its text alone: remember it, since keys and common values repeat
        # across every object of a repository. Quoted scalars and collections get the default tags.
        if kind is yaml.ScalarNode:
            if implicit[0]:
                tag = _RESOLVED.get(value)
                if tag is None:
                    tag = super().resolve(kind, value, implicit)
                    if len(_RESOLVED) < _RESOLVED_MAX:
                        _RESOLVED[value] = tag
                return tag
            return _STR_TAG
        return _MAP_TAG if kind is yaml.MappingNode else _SEQ_TAG

    # Path resolvers are not used (and `resolve` relies on it), so the composer's bookkeeping calls for
    # them can return at once.
    def descend_resolver(self, _current_node: Any, _current_index: Any) -> None:
        return None

    def ascend_resolver(self) -> None:
        return None


_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_MAP_TAG = "tag:yaml.org,2002:map"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_RESOLVED: dict[str, str] = {}
_RESOLVED_MAX = 100_000


if _BaseLoader.yaml_path_resolvers:  # pragma: no cover - only if someone registers one on PyYAML's loader
    raise ImportError("reconciler.model.yamldocs assumes PyYAML's safe loader has no path resolvers")

# Kubernetes never sees YAML timestamps: `2024-01-01` must stay the string the user wrote.
_Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _BaseLoader.yaml_implicit_resolvers.items()
}


def _expanded_size(node: yaml.Node, limit: int, where: str) -> int:
    """Node count of a document with every alias expanded, refusing once it passes `limit`.

    Memoised per node, so an alias bomb is measured in time linear in its *unexpanded* size.
    """
    sizes: dict[int, int] = {}

    def size(n: yaml.Node) -> int:
        known = sizes.get(id(n))
        if known is not None:
            return known
        total = 1
        if isinstance(n, yaml.SequenceNode):
            total += sum(size(child) for child in n.value)
        elif isinstance(n, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in n.value)
        if total > limit:
            raise ManifestError(
                f"document expands to more than {limit} nodes through YAML aliases (alias bomb?)",
                where=where,
            )
        sizes[id(n)] = total
        return total

    return size(node)


def _check_flow_depth(raw: bytes, path: str, limit: int) -> None:
    """Refuse flow collections nested deeper than `limit` before libyaml sees them.

    Counting brackets is free in C; the exact (quote-blind, so conservative) walk runs only for the rare
    file that has more brackets than the limit at all.
    """
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return
    depth = 0
    line = 1
    for byte in raw:
        if byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                raise ManifestError(
                    f"flow collections nested deeper than {limit} levels", where=f"{path}:{line}"
                )
        elif byte in (0x5D, 0x7D) and depth:  # ] }
            depth -= 1
        elif byte == 0x0A:
            line += 1


_COMPACT_NESTING = re.compile(rb"(?:[-?][ \t]+){50}")
_INDICATOR_PAIR = re.compile(rb"[-?][ \t]+[-?][ \t]")


def _check_compact_nesting(raw: bytes, path: str) -> None:
    """Refuse `- - - - ...`: compact block collections nest one level per two bytes, as deep as brackets.

    Indentation-nested blocks need quadratic bytes, so the document size limit already bounds them; only
    long runs of compact indicators on one line can reach a depth that crashes libyaml.
    """
    # Any such run starts with two indicators in a row; the exact pattern runs only from the first pair.
    pair = _INDICATOR_PAIR.search(raw)
    match = _COMPACT_NESTING.search(raw, pair.start()) if pair else None
    if match:
        line = raw.count(b"\n", 0, match.start()) + 1
        raise ManifestError(
            "block collections nested 50 or more levels deep on one line", where=f"{path}:{line}"
        )


# An alias token (`*name`) where YAML allows one: at a line start, after blanks or a flow indicator. Only
# aliases share nodes (an anchor alone is a label), so only a stream that may hold one needs the
# alias-aware construction and the expansion limit. A `*` that merely looks like one (`a *b` in a string)
# takes that slower path too; CEL's `&&` and `x * y` do not.
_BEFORE_ALIAS = frozenset(b" \t\r\n[{,:?-")
_NOT_ALIAS_NAME = frozenset(b" \t\r\n,[]{}")


def _may_alias(raw: bytes) -> bool:
    at = raw.find(b"*")
    while at != -1:
        after = raw[at + 1] if at + 1 < len(raw) else None
        if (at == 0 or raw[at - 1] in _BEFORE_ALIAS) and after is not None and after not in _NOT_ALIAS_NAME:
            return True
        at = raw.find(b"*", at + 1)
    return False


def _items_lines(node: yaml.Node) -> list[int]:
    """Lines of the elements of a List document's `items`, in order."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if getattr(key, "value", None) == "items" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []


# TypeMeta and ObjectMeta keys by their lower-case spelling: `apiversion`, `Kind` or `Metadata` would
# otherwise read as missing, and a `Namespace` in metadata would silently place the object in "default".
_TYPE_KEYS = {key.lower(): key for key in ("apiVersion", "kind", "metadata")}
_META_KEYS = {key.lower(): key for key in ("name", "namespace", "generateName", "labels", "annotations")}
_TYPE_EXACT = frozenset(_TYPE_KEYS.values())
_META_EXACT = frozenset(_META_KEYS.values())
# Files of tools that sit among manifests and look like objects, but are never applied.
_TOOL_GROUPS = {"kustomize.config.k8s.io": "a kustomize file"}


def _check_case(
    mapping: dict[Any, Any], exact: frozenset[str], known: dict[str, str], prefix: str, where: str
) -> None:
    for key in mapping:
        if key in exact or not isinstance(key, str):
            continue
        right = known.get(key.lower())
        if right is not None:
            raise ManifestError(
                f"key `{prefix}{key}` must be spelled `{prefix}{right}` (Kubernetes keys are case-sensitive)",
                where=where,
            )


def _check_object(body: Any, where: str) -> None:
    if not isinstance(body, dict):
        raise NotAnObject(
            f"document is a {type(body).__name__}, not a Kubernetes object (mapping)", where=where
        )
    _check_case(body, _TYPE_EXACT, _TYPE_KEYS, "", where)
    meta = body.get("metadata")
    if isinstance(meta, dict):
        _check_case(meta, _META_EXACT, _META_KEYS, "metadata.", where)
    api_version = body.get("apiVersion")
    tool = _TOOL_GROUPS.get(api_version.split("/")[0]) if isinstance(api_version, str) else None
    if tool:
        raise NotAnObject(f"{tool} (apiVersion {api_version}), not a Kubernetes object", where=where)
    missing = [
        key for key in ("apiVersion", "kind") if not isinstance(body.get(key), str) or not body.get(key)
    ]
    if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta.get("name"):
        missing.append("metadata.name")
    if "kind" in missing and ("apiVersion" in missing or "metadata" not in body):
        # A values file, a chart's Chart.yaml, a tool's config: not a broken object but no object at all.
        raise NotAnObject(f"not a Kubernetes object (no {', '.join(missing)})", where=where)
    if missing:
        raise ManifestError(f"object is missing {', '.join(missing)}", where=where)


def parse_documents(text: str | bytes, path: str, limits: Limits = DEFAULT_LIMITS) -> list[Manifest]:
    """Every Kubernetes object in one YAML/JSON stream, `List` kinds unpacked, each with its line."""
    if len(text) > limits.max_file_bytes:
        raise ManifestError(
            f"file is {len(text)} bytes, over the {limits.max_file_bytes}-byte limit", where=f"{path}:1"
        )
    raw = text if isinstance(text, bytes) else text.encode("utf-8", "surrogatepass")
    may_alias = _may_alias(raw)
    _check_flow_depth(raw, path, limits.max_flow_depth)
    _check_compact_nesting(raw, path)
    loader = _Loader(text)
    loader.may_merge = b"<<" in raw
    manifests: list[Manifest] = []
    line = 1
    try:
        while loader.check_node():
            node = loader.get_node()
            assert node is not None  # check_node() said there is one
            line = node.start_mark.line + 1
            where = f"{path}:{line}"
            size = node.end_mark.index - node.start_mark.index
            if size > limits.max_document_bytes:
                raise ManifestError(
                    f"document is {size} bytes, over the {limits.max_document_bytes}-byte limit", where=where
                )
            if may_alias:
                _expanded_size(node, limits.max_expanded_nodes, where)
            body = loader.construct_document(node) if may_alias else loader.construct_tree(node)
            if body is None:  # an empty document (`---` alone, comments only)
                continue
            _check_list_or_object(body, node, path, line, manifests)
    except yaml.YAMLError as exc:
        raise yaml_error(exc, path, line) from exc
    except RecursionError as exc:
        raise ManifestError("document is nested too deeply", where=f"{path}:{line}") from exc
    finally:
        loader.dispose()
    return manifests


def _check_list_or_object(body: Any, node: yaml.Node, path: str, line: int, out: list[Manifest]) -> None:
    where = f"{path}:{line}"
    if isinstance(body, dict) and str(body.get("kind", "")).endswith("List") and "items" in body:
        items = body.get("items") or []
        if not isinstance(items, list):
            raise ManifestError("`items` of a List must be a sequence", where=where)
        lines = _items_lines(node)
        for index, item in enumerate(items):
            item_line = lines[index] if index < len(lines) else line
            _check_object(item, f"{path}:{item_line}")
            out.append(Manifest(body=item, ref=ref_of(item), path=path, line=item_line))
        return
    _check_object(body, where)
    out.append(Manifest(body=body, ref=ref_of(body), path=path, line=line))


def yaml_error(exc: yaml.YAMLError, path: str, line: int = 1) -> ManifestError:
    """PyYAML's error as ours, at `path:line:column` where PyYAML saw it (else at `line`)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    at = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else f"{path}:{line}"
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    return ManifestError(f"invalid YAML: {context + ', ' if context else ''}{problem}", where=at)


def load_repo_config(text: str | bytes, path: str) -> dict[str, Any]:
    """Parse a `dra-gitops.yaml` repository config, validated strictly (`repoconfig.SCHEMA`)."""
    from reconciler.model.repoconfig import validate_config

    validate_config(text, path)
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark else path
        raise ManifestError(f"invalid repository config: {exc}", where=at) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ManifestError("repository config must be a mapping", where=f"{path}:1")
    if data.get("kind") == "List" and "config" in data:
        # The kubectl-friendly form: an empty `List` (so `kubectl apply -R` over the repository applies
        # nothing for this file) carrying our settings under `config`.
        if data.get("items"):
            raise ManifestError("the repository config List must have no items", where=f"{path}:1")
        data = data["config"] if isinstance(data["config"], dict) else {}
    for key in ("paths", "exclude"):
        if key in data and not (isinstance(data[key], list) and all(isinstance(p, str) for p in data[key])):
            raise ManifestError(f"`{key}` must be a list of strings", where=f"{path}:1")
    if "params" in data and not isinstance(data["params"], dict):
        raise ManifestError("`params` must be a mapping", where=f"{path}:1")
    return data
