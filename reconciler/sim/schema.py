"""What the simulated server knows about the shape of objects.

* List semantics (``list_kind``) shared by strategic merge patch and server-side apply: associative lists
  merge item by item on their keys, set lists merge as sets, every other list is atomic.
* Field schemas for the kinds whose unknown fields must be rejected or pruned (the resource.k8s.io kinds,
  ValidatingAdmissionPolicy and its binding, object metadata); kinds without a schema accept any field.
"""

from __future__ import annotations

from typing import Any

# field name -> key fields of an associative list (wherever the field appears)
LIST_KEYS: dict[str, tuple[str, ...]] = {
    "containers": ("name",),
    "initContainers": ("name",),
    "ephemeralContainers": ("name",),
    "volumes": ("name",),
    "env": ("name",),
    "volumeMounts": ("mountPath",),
    "volumeDevices": ("devicePath",),
    "resourceClaims": ("name",),
    "claims": ("name",),
    "imagePullSecrets": ("name",),
    "conditions": ("type",),
    "ownerReferences": ("uid",),
    "resourceClaimStatuses": ("name",),
    "hostAliases": ("ip",),
    "topologySpreadConstraints": ("topologyKey", "whenUnsatisfiable"),
    "taints": ("key", "effect"),
}
SET_LISTS = frozenset({"finalizers"})
# maps whose content is one opaque value (RawExtension): owned and replaced as a whole
ATOMIC_MAPS = frozenset({"parameters"})


def list_kind(parent: tuple[str, ...], name: str) -> tuple[str, tuple[str, ...]]:
    """("map", keys) | ("set", ()) | ("atomic", ()) for the list field ``name`` under path ``parent``."""
    if name in SET_LISTS:
        return ("set", ())
    if name == "ports":
        # container ports are keyed by port and protocol, service ports by port and protocol too
        in_container = len(parent) >= 2 and parent[-1].startswith("k:") and "ontainers" in parent[-2]
        return ("map", ("containerPort", "protocol") if in_container else ("port", "protocol"))
    if name == "taints" and parent and parent[-1].startswith("k:"):
        return ("atomic", ())  # device taints inside a ResourceSlice
    keys = LIST_KEYS.get(name)
    if keys:
        return ("map", keys)
    return ("atomic", ())


# ---------------------------------------------------------------------- field schemas

ANY = "*"
Schema = Any  # ANY | dict[str, Schema] (struct; "*" key = map of that value) | list[Schema] (one item)

# What the server sets in metadata: part of the schema, never a field a manager owns
SERVER_META = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "managedFields",
        "selfLink",
    }
)
OBJECT_META: dict[str, Schema] = {
    k: ANY for k in ("generateName", "labels", "annotations", "finalizers", "ownerReferences", *SERVER_META)
}
_SELECTORS = [{"cel": {"expression": ANY}}]
_OPAQUE = {"driver": ANY, "parameters": ANY}
_EXACT = {
    "deviceClassName": ANY,
    "selectors": _SELECTORS,
    "allocationMode": ANY,
    "count": ANY,
    "adminAccess": ANY,
    "tolerations": ANY,
    "capacity": {"requests": ANY},
}
_SUB = dict(_EXACT, name=ANY)
_CLAIM_SPEC = {
    "devices": {
        "requests": [{"name": ANY, "exactly": _EXACT, "firstAvailable": [_SUB]}],
        "constraints": [{"requests": ANY, "matchAttribute": ANY, "distinctAttribute": ANY}],
        "config": [{"requests": ANY, "opaque": _OPAQUE}],
    }
}
_DEVICE = {
    k: ANY
    for k in (
        "name",
        "attributes",
        "capacity",
        "consumesCounters",
        "nodeName",
        "nodeSelector",
        "allNodes",
        "taints",
        "bindsToNode",
        "bindingConditions",
        "bindingFailureConditions",
        "allowMultipleAllocations",
    )
}


def _obj(spec: Schema, status: Schema = None) -> dict[str, Schema]:
    out: dict[str, Schema] = {"apiVersion": ANY, "kind": ANY, "metadata": OBJECT_META, "spec": spec}
    if status is not None:
        out["status"] = status
    return out


SCHEMAS: dict[tuple[str, str], dict[str, Schema]] = {
    ("resource.k8s.io", "deviceclasses"): _obj(
        {"selectors": _SELECTORS, "config": [{"opaque": _OPAQUE}], "extendedResourceName": ANY}
    ),
    ("resource.k8s.io", "resourceclaims"): _obj(
        _CLAIM_SPEC, {"allocation": ANY, "reservedFor": ANY, "devices": ANY}
    ),
    ("resource.k8s.io", "resourceclaimtemplates"): _obj({"metadata": ANY, "spec": _CLAIM_SPEC}),
    ("resource.k8s.io", "resourceslices"): _obj(
        {
            "driver": ANY,
            "pool": {"name": ANY, "generation": ANY, "resourceSliceCount": ANY},
            "nodeName": ANY,
            "nodeSelector": ANY,
            "allNodes": ANY,
            "perDeviceNodeSelection": ANY,
            "devices": [_DEVICE],
            "sharedCounters": ANY,
            "nodeAllocatableResourceMappings": ANY,
        }
    ),
    ("resource.k8s.io", "devicetaintrules"): _obj(
        {
            "deviceSelector": {
                "driver": ANY,
                "pool": ANY,
                "device": ANY,
                "deviceClassName": ANY,
                "selectors": ANY,
            },
            "taint": {"key": ANY, "value": ANY, "effect": ANY, "timeAdded": ANY},
        },
        {"conditions": ANY},
    ),
}
_RULE = {k: ANY for k in ("apiGroups", "apiVersions", "operations", "resources", "resourceNames", "scope")}
_MATCH = {
    "namespaceSelector": ANY,
    "objectSelector": ANY,
    "resourceRules": [_RULE],
    "excludeResourceRules": [_RULE],
    "matchPolicy": ANY,
}
_NAMED_EXPRESSION = {"name": ANY, "expression": ANY}
SCHEMAS[("admissionregistration.k8s.io", "validatingadmissionpolicies")] = _obj(
    {
        "paramKind": {"apiVersion": ANY, "kind": ANY},
        "matchConstraints": _MATCH,
        "validations": [{"expression": ANY, "message": ANY, "reason": ANY, "messageExpression": ANY}],
        "failurePolicy": ANY,
        "auditAnnotations": [{"key": ANY, "valueExpression": ANY}],
        "matchConditions": [_NAMED_EXPRESSION],
        "variables": [_NAMED_EXPRESSION],
    },
    {"observedGeneration": ANY, "typeChecking": ANY, "conditions": ANY},
)
SCHEMAS[("admissionregistration.k8s.io", "validatingadmissionpolicybindings")] = _obj(
    {
        "policyName": ANY,
        "paramRef": {"name": ANY, "namespace": ANY, "selector": ANY, "parameterNotFoundAction": ANY},
        "matchResources": _MATCH,
        "validationActions": ANY,
    }
)


def schema_for(group: str, plural: str) -> dict[str, Schema]:
    return SCHEMAS.get((group, plural), {})


def unknown_fields(obj: Any, schema: Schema, path: str = "", *, prune: bool = False) -> list[str]:
    """Paths (``spec.devices.foo``, ``spec.requests[0].x``) of fields the schema does not declare.

    With ``prune`` they are also removed from ``obj``, as a real server drops unknown fields.
    """
    found: list[str] = []
    if schema == ANY or not schema:
        return found
    if isinstance(schema, list):
        if isinstance(obj, list):
            for i, item in enumerate(obj):
                found.extend(unknown_fields(item, schema[0], f"{path}[{i}]", prune=prune))
        return found
    if not isinstance(obj, dict):
        return found
    mapped = schema.get("*")
    for key in list(obj):
        sub = mapped if mapped is not None else schema.get(key)
        child = f"{path}.{key}" if path else key
        if sub is None:
            found.append(child)
            if prune:
                del obj[key]
            continue
        found.extend(unknown_fields(obj[key], sub, child, prune=prune))
    return found
