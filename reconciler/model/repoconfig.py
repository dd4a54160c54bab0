"""The repository config, `dra-gitops.yaml`: parsed and validated strictly against its JSON Schema.

An unknown key (`path:` for `paths:`), a value of the wrong type or a `config:` block outside the `kind: List`
form is an error at `file:line` naming the closest known key: a mistake here never passes silently (a
misspelt `paths` would check every file, a misspelt `canaryFor` would leave a driver without its canary).
The schema is published as `docs/repo-config.schema.json` (`python -m reconciler.model.repoconfig` prints it).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from reconciler.errors import ManifestError

_STRINGS = {"type": "array", "items": {"type": "string"}}

_RELEASE: dict[str, Any] = {
    "type": "object",
    "description": "A Helm release rendered as `helm template` would (the chart's own engine).",
    "required": ["releaseName", "chart", "namespace"],
    "additionalProperties": False,
    "properties": {
        "releaseName": {"type": "string", "description": "The release name (as `helm install NAME`)."},
        "chart": {"type": "string", "description": "A chart directory or .tgz in the repository."},
        "namespace": {"type": "string", "description": "The release namespace."},
        "valueFiles": {**_STRINGS, "description": "Values files of the repository, merged in order."},
        "values": {"type": "object", "description": "Inline values, merged last."},
        "canaryFor": {"type": "string", "description": "The main release this release is the canary of."},
        "createNamespace": {
            "type": "boolean",
            "description": "Create the release namespace when no manifest does (helm --create-namespace).",
        },
    },
}

_DRIVER: dict[str, Any] = {
    "type": "object",
    "description": "A DRA driver whose workloads nothing else recognizes, or whose settings differ.",
    "required": ["name"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "description": "The driver's name, as DeviceClasses select it."},
        "workloads": {
            "type": "array",
            "description": "The driver's workloads (kubelet plugin, controller).",
            "items": {
                "type": "object",
                "required": ["kind", "name"],
                "additionalProperties": False,
                "properties": {
                    "kind": {"type": "string", "enum": ["DaemonSet", "Deployment", "StatefulSet"]},
                    "namespace": {"type": "string"},
                    "name": {"type": "string"},
                },
            },
        },
        "allowNoNodes": {
            "type": "boolean",
            "description": "A main driver DaemonSet with 0 desired pods passes (a pool autoscaled to zero).",
        },
    },
}

_SETTINGS: dict[str, Any] = {
    "paths": {**_STRINGS, "description": "Folders (or files) holding manifests; the rest is skipped."},
    "exclude": {**_STRINGS, "description": "Shell-style patterns or folders to leave out."},
    "params": {"type": "object", "description": "Policy params (policies/README.md)."},
    "charts": {"type": "array", "items": _RELEASE, "description": "Helm releases to render."},
    "drivers": {"type": "array", "items": _DRIVER, "description": "DRA drivers declared by name."},
    "kubernetesVersion": {
        "type": "string",
        "description": "The cluster version charts render for (.Capabilities.KubeVersion) without a cluster.",
    },
    "apiVersions": {
        **_STRINGS,
        "description": "API versions the cluster serves (.Capabilities.APIVersions) without a cluster.",
    },
    "target": {"type": "string", "description": "The delivery target's name, for `apply`."},
    "namespace": {"type": "string", "description": "The namespace of the target's state, for `apply`."},
}

SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "dra-gitops repository config (dra-gitops.yaml)",
    "description": "Settings at the root of the repository, or in the `config` block of an empty `List`.",
    "type": "object",
    "oneOf": [
        {"additionalProperties": False, "properties": _SETTINGS},
        {
            "additionalProperties": False,
            "required": ["kind", "config"],
            "properties": {
                "apiVersion": {"const": "v1"},
                "kind": {"const": "List"},
                "metadata": {"type": "object"},
                "items": {"type": "array", "maxItems": 0},
                "config": {"type": "object", "additionalProperties": False, "properties": _SETTINGS},
            },
        },
    ],
}

_LIST_KEYS = {"apiVersion", "kind", "metadata", "items", "config"}
_TYPES = {"object": yaml.MappingNode, "array": yaml.SequenceNode}
_YAML = "tag:yaml.org,2002:"
# A number where a string belongs (`kubernetesVersion: 1.33`) is read as written.
_SCALAR_TAGS = {
    "string": {f"{_YAML}str", f"{_YAML}int", f"{_YAML}float"},
    "boolean": {f"{_YAML}bool"},
}


def schema_text() -> str:
    return json.dumps(SCHEMA, indent=2) + "\n"


def closest(key: str, known: list[str]) -> str:
    """`; did you mean `paths`?` for the known key closest to `key`, else nothing."""
    found = difflib.get_close_matches(key, known, n=1, cutoff=0.5)
    if not found:
        found = [k for k in known if key.lower() in k.lower() or k.lower() in key.lower()][:1]
    return f"; did you mean `{found[0]}`?" if found else f" (known keys: {', '.join(sorted(known))})"


def _is_scalar(node: yaml.Node, kind: str) -> bool:
    return isinstance(node, yaml.ScalarNode) and node.tag in _SCALAR_TAGS[kind]


@dataclass(frozen=True)
class _At:
    path: str

    def line(self, node: yaml.Node) -> str:
        return f"{self.path}:{node.start_mark.line + 1}"


def _validate(node: yaml.Node, schema: Mapping[str, Any], where: str, at: _At) -> None:
    kind = schema.get("type")
    if kind == "array" and schema.get("items", {}).get("type") == "string":
        items = node.value if isinstance(node, yaml.SequenceNode) else None
        if items is None or not all(_is_scalar(i, "string") for i in items):
            raise ManifestError(f"`{where}` must be a list of strings", where=at.line(node))
        return
    if kind in _TYPES:
        if not isinstance(node, _TYPES[kind]):
            raise ManifestError(
                f"`{where}` must be {'a mapping' if kind == 'object' else 'a list'}", where=at.line(node)
            )
    elif kind in _SCALAR_TAGS:
        if not _is_scalar(node, kind):
            raise ManifestError(f"`{where}` must be a {kind}", where=at.line(node))
        enum = schema.get("enum")
        if enum and node.value not in enum:
            raise ManifestError(
                f"`{where}` must be one of {', '.join(enum)}, not {node.value!r}", where=at.line(node)
            )
    if isinstance(node, yaml.MappingNode) and "properties" in schema:
        properties: Mapping[str, Any] = schema["properties"]
        seen = set()
        for key_node, value_node in node.value:
            key = str(key_node.value)
            seen.add(key)
            child = f"{where}.{key}" if where else key
            if key not in properties:
                if schema.get("additionalProperties") is False:
                    raise ManifestError(
                        f"unknown key `{child}`{closest(key, list(properties))}", where=at.line(key_node)
                    )
                continue
            _validate(value_node, properties[key], child, at)
        for required in schema.get("required") or ():
            if required not in seen:
                raise ManifestError(f"`{where}` needs `{required}`", where=at.line(node))
    if isinstance(node, yaml.SequenceNode) and "items" in schema:
        for index, item in enumerate(node.value):
            _validate(item, schema["items"], f"{where}[{index}]", at)


def _is_list_form(node: yaml.MappingNode) -> bool:
    return any(k.value == "kind" and getattr(v, "value", None) == "List" for k, v in node.value)


def validate_config(text: str | bytes, path: str) -> None:
    """Raise a ManifestError at `path:line` for anything the schema does not allow."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{path}:{mark.line + 1}" if mark else path
        raise ManifestError(f"invalid repository config: {exc}", where=at) from exc
    if root is None or (isinstance(root, yaml.ScalarNode) and root.tag.endswith(":null")):
        return
    where = _At(path)
    if not isinstance(root, yaml.MappingNode):
        raise ManifestError("repository config must be a mapping", where=f"{path}:1")
    if _is_list_form(root):
        for key_node, value_node in root.value:
            key = str(key_node.value)
            if key not in _LIST_KEYS:
                raise ManifestError(
                    f"unknown key `{key}` beside the `config` block of the List form{closest(key, sorted(_LIST_KEYS))}",
                    where=where.line(key_node),
                )
            if key == "items" and isinstance(value_node, yaml.SequenceNode) and value_node.value:
                raise ManifestError(
                    "the repository config List must have no items", where=where.line(value_node)
                )
            if key == "config":
                _validate(
                    value_node,
                    {"type": "object", "additionalProperties": False, "properties": _SETTINGS},
                    "",
                    where,
                )
        return
    for key_node, _ in root.value:
        if key_node.value == "config":
            raise ManifestError(
                "a `config` block is read only in the List form: add `kind: List` (and `items: []`), or put "
                "its keys at the top level",
                where=where.line(key_node),
            )
    _validate(root, {"type": "object", "additionalProperties": False, "properties": _SETTINGS}, "", where)


@dataclass(frozen=True)
class DriverDecl:
    """One `drivers:` entry: a driver's name, its workloads ((kind, namespace, name)), its settings."""

    name: str
    workloads: tuple[tuple[str, str, str], ...] = ()
    allow_no_nodes: bool = False


def drivers_of(config: Mapping[str, Any]) -> tuple[DriverDecl, ...]:
    """The `drivers:` of a validated repository config."""
    out = []
    for entry in config.get("drivers") or []:
        workloads = tuple(
            (str(w["kind"]), str(w.get("namespace") or "default"), str(w["name"]))
            for w in entry.get("workloads") or []
        )
        out.append(DriverDecl(str(entry["name"]), workloads, entry.get("allowNoNodes") is True))
    return tuple(out)


def allowing_no_nodes(drivers: tuple[DriverDecl, ...]) -> list[str]:
    """The drivers whose main DaemonSet may run on no node (`allowNoNodes: true`)."""
    return [driver.name for driver in drivers if driver.allow_no_nodes]


def declared_workloads(drivers: tuple[DriverDecl, ...]) -> dict[tuple[str, str, str], str]:
    """(kind, namespace, name) of every declared driver workload, to its driver's name."""
    return {workload: driver.name for driver in drivers for workload in driver.workloads}


if __name__ == "__main__":  # pragma: no cover - prints the published schema
    print(schema_text(), end="")
