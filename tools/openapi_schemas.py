"""Write reconciler/model/openapi_schemas.json.gz: the official schemas of the kinds we read, per release.

The source is the strict JSON schemas that kubernetes-validate ships per Kubernetes release (generated
from each release's OpenAPI spec; "strict" closes every object to unknown fields, as the API server's
strict field validation does). kubernetes-validate is 108 MB installed; the checker needs a small part of
it: the kinds below, the definitions they reach, without descriptions or merge hints. Definitions that are
the same in several releases are stored once.

python tools/openapi_schemas.py            # rewrite the data file
python tools/openapi_schemas.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import gzip
import hashlib
import json
import sys
from importlib import resources
from pathlib import Path
from typing import Any

TARGET = Path(__file__).resolve().parents[1] / "reconciler" / "model" / "openapi_schemas.json.gz"
FIRST_RELEASE = 25
LAST_RELEASE = 37

# The kinds dra-gitops reads, plans or stages (docs/policy-input.md), by group; every version of them.
KINDS: dict[str, frozenset[str]] = {
    "": frozenset(
        {"Namespace", "ServiceAccount", "ConfigMap", "Secret", "Service", "Pod", "PodTemplate", "LimitRange"}
        | {"ResourceQuota", "PersistentVolumeClaim"}
    ),
    "apps": frozenset({"Deployment", "StatefulSet", "DaemonSet", "ReplicaSet"}),
    "batch": frozenset({"Job", "CronJob"}),
    "resource.k8s.io": frozenset(
        {"DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule"}
        | {"ResourceClass", "ResourceClassParameters", "ResourceClaimParameters", "PodSchedulingContext"}
    ),
    "rbac.authorization.k8s.io": frozenset({"Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding"}),
    "scheduling.k8s.io": frozenset({"PriorityClass"}),
    "node.k8s.io": frozenset({"RuntimeClass"}),
    "apiextensions.k8s.io": frozenset({"CustomResourceDefinition"}),
    "policy": frozenset({"PodDisruptionBudget"}),
}

# What validation reads; everything else (descriptions, patch strategies, list types) is left out.
KEPT_KEYS = frozenset(
    {"type", "properties", "additionalProperties", "required", "items", "enum", "oneOf", "format", "$ref"}
    | {"x-kubernetes-preserve-unknown-fields", "x-kubernetes-int-or-string"}
)
REF_PREFIX = "#/$defs/"


def _compact(schema: Any) -> Any:
    if isinstance(schema, list):
        return [_compact(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in KEPT_KEYS:
            continue
        if key == "properties":
            out[key] = {name: _compact(sub) for name, sub in value.items()}
        elif key == "$ref":
            out[key] = str(value).removeprefix(REF_PREFIX)
        else:
            out[key] = _compact(value)
    return out


def _refs(schema: Any, found: set[str]) -> None:
    if isinstance(schema, list):
        for item in schema:
            _refs(item, found)
    elif isinstance(schema, dict):
        for key, value in schema.items():
            if key == "$ref" and isinstance(value, str):
                found.add(value)
            elif key == "properties":  # property names are not keywords (a CRD schema has a "$ref" property)
                for sub in value.values():
                    _refs(sub, found)
            else:
                _refs(value, found)


def _release(minor: int) -> tuple[dict[str, str], dict[str, Any]]:
    """(apiVersion/kind -> definition name, the definitions those reach) of one release."""
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v1.{minor}.0-local-strict"
    definitions = json.loads((root / "_definitions.json").read_text(encoding="utf-8"))["$defs"]
    roots: dict[str, str] = {}
    for name, schema in definitions.items():
        for gvk in schema.get("x-kubernetes-group-version-kind", []):
            group, version, kind = str(gvk["group"]), str(gvk["version"]), str(gvk["kind"])
            if kind in KINDS.get(group, ()):
                api_version = f"{group}/{version}" if group else version
                roots[f"{api_version}/{kind}"] = name
    reached: dict[str, Any] = {}
    pending = sorted(set(roots.values()))
    while pending:
        name = pending.pop()
        if name in reached:
            continue
        compact = _compact(definitions[name])
        reached[name] = compact
        found: set[str] = set()
        _refs(compact, found)
        pending.extend(sorted(found - reached.keys()))
    return roots, reached


def build() -> dict[str, Any]:
    from kubernetes_validate.version import __version__

    pool: list[Any] = []
    index: dict[str, int] = {}
    releases: dict[str, Any] = {}
    for minor in range(FIRST_RELEASE, LAST_RELEASE + 1):
        roots, reached = _release(minor)
        names: dict[str, int] = {}
        for name, schema in sorted(reached.items()):
            text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
            digest = hashlib.sha256(text.encode()).hexdigest()
            if digest not in index:
                index[digest] = len(pool)
                pool.append(schema)
            names[name] = index[digest]
        releases[str(minor)] = {"roots": dict(sorted(roots.items())), "definitions": names}
    return {"source": f"kubernetes-validate {__version__}", "pool": pool, "releases": releases}


def render(data: dict[str, Any]) -> bytes:
    text = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return gzip.compress(text, compresslevel=9, mtime=0)


def main() -> int:
    blob = render(build())
    if "--check" in sys.argv[1:]:
        if not TARGET.exists() or TARGET.read_bytes() != blob:
            print(f"{TARGET} is out of date: run python tools/openapi_schemas.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_bytes(blob)
    print(f"{TARGET.name}: {len(blob)} bytes", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
