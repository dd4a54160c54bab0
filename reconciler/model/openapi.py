"""Offline validation of objects against the official schemas of their API version, as the API server would.

The schemas are Kubernetes' own (`tools/openapi_schemas.py` takes them from kubernetes-validate, strict:
every object closed to unknown fields, as kube-apiserver's strict field validation and `kubectl apply`
are). A violation is reported with its field path, the way the API server words it, so a mistake such as
a v1 request with `deviceClassName` outside `exactly:` is caught by `check` before any dry-run.

Objects of a CustomResourceDefinition in the same desired state are checked against that CRD's
`openAPIV3Schema` for their version; kinds with no schema at all are left to the server.
"""

from __future__ import annotations

import gzip
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import Any

DATA_FILE = "openapi_schemas.json.gz"
MAX_VIOLATIONS = 20  # per object: past that the report says how many more


@dataclass(frozen=True)
class Violation:
    """One field the API server would reject."""

    field: str  # the field path, `spec.devices.requests[0].deviceClassName`
    message: str  # as the API server says it: `unknown field`, `Required value`, …

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


@dataclass(frozen=True)
class Schemas:
    """The schemas of one Kubernetes release, by `apiVersion/kind`."""

    release: int  # the minor version of 1.x
    roots: dict[str, str]
    definitions: dict[str, Any]
    # Per schema node (by id: the definitions live as long as this): what a quick check needs to know.
    quick: dict[int, tuple[frozenset[type], bool]] = field(default_factory=dict, compare=False, repr=False)

    def validate(self, body: dict[str, Any]) -> list[Violation] | None:
        """The body's violations; None when this release has no schema for its apiVersion and kind."""
        root = self.roots.get(f"{body.get('apiVersion')}/{body.get('kind')}")
        if root is None:
            return None
        walker = _Walker(self.definitions, quick=self.quick)
        walker.check({"$ref": root}, body, "")
        return walker.violations


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    blob = (resources.files("reconciler.model") / DATA_FILE).read_bytes()
    data: dict[str, Any] = json.loads(gzip.decompress(blob))
    return data


def releases() -> list[int]:
    """The Kubernetes minor versions whose schemas are bundled, oldest first."""
    return sorted(int(minor) for minor in _data()["releases"])


@lru_cache(maxsize=16)
def schemas_for(minor: int | None) -> Schemas:
    """The schemas of Kubernetes 1.`minor` (None: the newest bundled); outside the bundled range, the nearest."""
    known = releases()
    chosen = known[-1] if minor is None else min(max(minor, known[0]), known[-1])
    data = _data()
    release = data["releases"][str(chosen)]
    pool = data["pool"]
    definitions = {name: pool[index] for name, index in release["definitions"].items()}
    return Schemas(chosen, dict(release["roots"]), definitions)


def minor_of(version: str | None) -> int | None:
    """The minor of "1.36", "v1.36.2" or "v1.33.1-gke.100"; None when there is none."""
    match = re.match(r"v?1\.(\d+)", (version or "").strip())
    return int(match.group(1)) if match else None


def crd_schemas(crds: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """`apiVersion/kind` -> the `openAPIV3Schema` of each version of the CustomResourceDefinitions given."""
    found: dict[str, dict[str, Any]] = {}
    for crd in crds:
        spec = crd.get("spec") or {}
        group, kind = spec.get("group"), (spec.get("names") or {}).get("kind")
        if not isinstance(group, str) or not isinstance(kind, str):
            continue
        for version in spec.get("versions") or []:
            schema = ((version or {}).get("schema") or {}).get("openAPIV3Schema")
            if isinstance(version, dict) and isinstance(schema, dict):
                found[f"{group}/{version.get('name')}/{kind}"] = schema
    return found


def validate_custom(body: dict[str, Any], schema: dict[str, Any]) -> list[Violation]:
    """A custom object against its CRD's structural schema; `metadata` is the server's, never the CRD's."""
    walker = _Walker({}, structural=True)
    properties = {k: v for k, v in (schema.get("properties") or {}).items() if k not in _SERVER_FIELDS}
    trimmed = {k: v for k, v in body.items() if k not in _SERVER_FIELDS}
    walker.check({**schema, "type": "object", "properties": properties}, trimmed, "")
    return walker.violations


_SERVER_FIELDS = ("apiVersion", "kind", "metadata")


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object" if isinstance(value, dict) else type(value).__name__


def _has_type(value: Any, wanted: str) -> bool:
    if wanted == "null":
        return value is None
    if isinstance(value, bool):  # a bool is an int to Python, never to JSON
        return wanted == "boolean"
    if wanted == "number" and isinstance(value, float) and value.is_integer():
        return True
    return isinstance(value, _JSON_TYPES.get(wanted, ()))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


class _Walker:
    """One object's walk: the violations found, at most MAX_VIOLATIONS of them plus a count of the rest."""

    def __init__(
        self,
        definitions: dict[str, Any],
        structural: bool = False,
        quick: dict[int, tuple[frozenset[type], bool]] | None = None,
    ) -> None:
        self.definitions = definitions
        self.quick = {} if quick is None else quick
        # A CRD's structural schema prunes what it does not declare, so strict validation rejects it; the
        # built-in schemas say so themselves (`additionalProperties: false`).
        self.structural = structural
        self.violations: list[Violation] = []
        self.more = 0

    def report(self, path: str, message: str) -> None:
        if len(self.violations) < MAX_VIOLATIONS:
            self.violations.append(Violation(path, message))
            return
        self.more += 1
        tail = Violation("", f"and {self.more} more")
        if self.violations[-1].field == "" and self.violations[-1].message.startswith("and "):
            self.violations[-1] = tail
        else:
            self.violations.append(tail)

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            schema = self.definitions[schema["$ref"]]
        return schema

    def check(self, schema: dict[str, Any], value: Any, path: str) -> None:
        schema = self.resolve(schema)
        if value is None:  # JSON null is "unset" to the API server's decoder
            return
        if "oneOf" in schema or schema.get("x-kubernetes-int-or-string"):
            self._check_alternatives(schema, value, path)
            return
        quick = self.quick.get(id(schema))
        if quick is None:
            quick = self.quick[id(schema)] = _quick(schema)
        accepted, plain = quick
        if type(value) not in accepted and not self._check_type(schema, value, path):
            return
        if isinstance(value, dict):
            self._check_object(schema, value, path)
        elif isinstance(value, list):
            items = schema.get("items")
            if isinstance(items, dict):
                for index, item in enumerate(value):
                    self.check(items, item, f"{path}[{index}]")
            if not plain:
                self._check_bounds(schema, len(value), path, "minItems", "maxItems", "items")
        elif not plain:
            self._check_scalar(schema, value, path)

    def _check_alternatives(self, schema: dict[str, Any], value: Any, path: str) -> None:
        choices = [self.resolve(choice) for choice in schema.get("oneOf", [])]
        wanted = {t for choice in choices for t in _types(choice)} or {"string", "integer"}
        if not any(_has_type(value, t) for t in wanted):
            names = " or ".join(sorted(wanted - {"null"}))
            self.report(path, f'Invalid value: "{_type_name(value)}": must be {names}')

    def _check_type(self, schema: dict[str, Any], value: Any, path: str) -> bool:
        wanted = _types(schema)
        if wanted and not any(_has_type(value, t) for t in wanted):
            names = " or ".join(sorted(set(wanted) - {"null"}))
            self.report(path or "(object)", f'Invalid value: "{_type_name(value)}": must be {names}')
            return False
        return True

    def _check_object(self, schema: dict[str, Any], value: dict[str, Any], path: str) -> None:
        properties: dict[str, Any] = schema.get("properties") or {}
        for name in schema.get("required") or ():
            if value.get(name) is None:
                self.report(_join(path, name), "Required value")
        extra = schema.get("additionalProperties")
        open_object = schema.get("x-kubernetes-preserve-unknown-fields") is True
        for name, item in value.items():
            sub = properties.get(name)
            if sub is not None:
                self.check(sub, item, _join(path, str(name)))
            elif isinstance(extra, dict):
                self.check(extra, item, _join(path, str(name)))
            elif not open_object and extra is not True and (extra is False or properties or self.structural):
                self.report(_join(path, str(name)), "unknown field")

    def _check_scalar(self, schema: dict[str, Any], value: Any, path: str) -> None:
        enum = schema.get("enum")
        if enum is not None and value not in enum:
            supported = ", ".join(f'"{v}"' for v in enum)
            self.report(path, f'Unsupported value: "{value}": supported values: {supported}')
        if isinstance(value, str):
            self._check_bounds(schema, len(value), path, "minLength", "maxLength", "characters")
            pattern = schema.get("pattern")
            if isinstance(pattern, str) and re.search(pattern, value) is None:
                self.report(path, f'Invalid value: "{value}": must match "{pattern}"')
        elif isinstance(value, int | float) and not isinstance(value, bool):
            low, high = schema.get("minimum"), schema.get("maximum")
            if isinstance(low, int | float) and value < low:
                self.report(path, f"Invalid value: {value}: must be greater than or equal to {low}")
            if isinstance(high, int | float) and value > high:
                self.report(path, f"Invalid value: {value}: must be less than or equal to {high}")

    def _check_bounds(
        self, schema: dict[str, Any], size: int, path: str, low: str, high: str, unit: str
    ) -> None:
        least, most = schema.get(low), schema.get(high)
        if isinstance(least, int) and size < least:
            self.report(path, f"Invalid value: must have at least {least} {unit}")
        if isinstance(most, int) and size > most:
            self.report(path, f"Too long: may not have more than {most} {unit}")


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}
_VALUE_RULES = ("enum", "pattern", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems")


def _quick(schema: dict[str, Any]) -> tuple[frozenset[type], bool]:
    """(the Python types a value may have to pass the type check at once, whether the node has no value
    rules at all): the common case is decided with one set lookup."""
    declared = _types(schema)
    if not declared:
        accepted: frozenset[type] = frozenset({str, int, float, bool, dict, list})
    else:
        accepted = frozenset(t for name in declared for t in _PYTHON_TYPES.get(name, ()))
    return accepted, not any(rule in schema for rule in _VALUE_RULES)


def _types(schema: dict[str, Any]) -> list[str]:
    declared = schema.get("type")
    if declared is None:
        return []
    types = [declared] if isinstance(declared, str) else [str(t) for t in declared]
    if schema.get("nullable") is True:
        types.append("null")
    return types
