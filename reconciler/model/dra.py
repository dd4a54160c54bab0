"""Version-normalised accessors for Dynamic Resource Allocation manifests.

Every function takes a manifest as a plain dict (exactly as loaded from YAML) and copes with every
resource.k8s.io version from v1alpha1 to v1. Manifests come from users, so nothing here trusts a field's
type: a string where a list belongs reads as an empty list, never as an exception. The shape of a field
is detected from the data rather than from the apiVersion where both agree, so that a manifest using the
wrong shape for its version is still understood (reporting the mismatch is a policy's job).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.objects import api_group, api_version_only

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2", "v1")
CLASSIC_VERSIONS = frozenset({"v1alpha1", "v1alpha2"})

DRIVER_ANNOTATION = "dra-gitops.io/driver"
CANARY_ANNOTATION = "dra-gitops.io/canary-for"
COMPONENT_LABEL = "app.kubernetes.io/component"
DRIVER_COMPONENTS = frozenset({"kubelet-plugin", "kubeletplugin"})
DRIVER_WORKLOAD_KINDS = frozenset({"DaemonSet", "Deployment", "StatefulSet"})

# Where each pod-carrying kind keeps its PodSpec, and which API groups own that kind (so a CRD that
# happens to be called "Deployment" is not mistaken for one).
POD_TEMPLATE_KINDS: Mapping[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
}
_POD_KIND_GROUPS: Mapping[str, frozenset[str]] = {
    "Deployment": frozenset({"apps", "extensions"}),
    "StatefulSet": frozenset({"apps"}),
    "DaemonSet": frozenset({"apps", "extensions"}),
    "ReplicaSet": frozenset({"apps", "extensions"}),
    "Job": frozenset({"batch"}),
    "CronJob": frozenset({"batch"}),
    "Pod": frozenset({""}),
    "PodTemplate": frozenset({""}),
}

_ATTRIBUTE_TYPES = ("int", "bool", "string", "version")
# `device.driver == "x"` in either operand order, single or double quotes.
_DRIVER_CEL = re.compile(
    r"""device\.driver\s*==\s*(?P<q1>["'])(?P<a>[^"']+)(?P=q1)"""
    r"""|(?P<q2>["'])(?P<b>[^"']+)(?P=q2)\s*==\s*device\.driver\b"""
)
_DRIVER_FLAGS = ("--driver-name", "--driver")
_DRIVER_ENV = ("DRIVER_NAME", "DRA_DRIVER_NAME")
# Pod-template fields that define what a driver pod runs; placement (nodeSelector, affinity,
# tolerations), names and labels are deliberately absent so a canary can differ only there.
_DIGEST_CONTAINER_FIELDS = (
    "name",
    "image",
    "command",
    "args",
    "env",
    "envFrom",
    "volumeMounts",
    "securityContext",
    "resources",
)


# --- defensive readers -------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in _list(value) if isinstance(item, dict)]


def _get(body: Any, *path: str) -> Any:
    cur = body
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _uniq(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _kind(body: Any) -> str:
    return str(_dict(body).get("kind") or "")


def _api_version(body: Any) -> str:
    value = _dict(body).get("apiVersion")
    return value if isinstance(value, str) else ""


def _labels(meta: Any) -> dict[str, Any]:
    return _dict(_dict(meta).get("labels"))


def _annotations(body: Any) -> dict[str, Any]:
    return _dict(_get(body, "metadata", "annotations"))


def is_dra_group(api_version: str) -> bool:
    """True for resource.k8s.io/<any version>; a bare "v1" or another group is not DRA."""
    return isinstance(api_version, str) and "/" in api_version and api_group(api_version) == DRA_GROUP


def _dra_kind(body: Any) -> str | None:
    """The kind of a resource.k8s.io object, None for anything else."""
    return _kind(body) if is_dra_group(_api_version(body)) else None


def _is_classic(body: Any) -> bool:
    return api_version_only(_api_version(body)) in CLASSIC_VERSIONS


# --- pod side ----------------------------------------------------------------------------------------


def pod_spec_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The PodSpec of a Pod, PodTemplate or workload controller; None for other kinds or a missing spec."""
    kind = _kind(body)
    path = POD_TEMPLATE_KINDS.get(kind)
    if path is None:
        return None
    api_version = _api_version(body)
    if api_version and api_group(api_version) not in _POD_KIND_GROUPS[kind]:
        return None
    spec = _get(body, *path)
    return spec if isinstance(spec, dict) else None


@dataclass(frozen=True)
class PodClaim:
    """A pod-level `resourceClaims[]` entry: exactly one of claim/template is set in a valid manifest."""

    name: str
    claim: str | None
    template: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"name": self.name, "claim": self.claim, "template": self.template}


def pod_claims(pod_spec: dict[str, Any] | None) -> list[PodClaim]:
    """Pod-level claims, from either the flattened (1.31+) or the `source:` (<=1.30) form."""
    out: list[PodClaim] = []
    for entry in _dicts(_dict(pod_spec).get("resourceClaims")):
        name = _str(entry.get("name"))
        if name is None:
            continue
        source = _dict(entry.get("source"))
        claim = _str(entry.get("resourceClaimName")) or _str(source.get("resourceClaimName"))
        template = _str(entry.get("resourceClaimTemplateName")) or _str(
            source.get("resourceClaimTemplateName")
        )
        out.append(PodClaim(name, claim, template))
    return out


@dataclass(frozen=True)
class ContainerClaimRef:
    """A container's `resources.claims[]` entry (request is 1.31+ only)."""

    container: str
    name: str
    request: str | None

    def to_json(self) -> dict[str, str | None]:
        return {"container": self.container, "name": self.name, "request": self.request}


def container_claim_refs(pod_spec: dict[str, Any] | None) -> list[ContainerClaimRef]:
    """Claim references of every init container and container, in manifest order."""
    spec = _dict(pod_spec)
    out: list[ContainerClaimRef] = []
    for field in ("initContainers", "containers"):
        for container in _dicts(spec.get(field)):
            cname = _str(container.get("name")) or ""
            for ref in _dicts(_get(container, "resources", "claims")):
                name = _str(ref.get("name"))
                if name is not None:
                    out.append(ContainerClaimRef(cname, name, _str(ref.get("request"))))
    return out


# --- claims and templates ----------------------------------------------------------------------------


def claim_spec_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The ResourceClaimSpec of a ResourceClaim (spec) or ResourceClaimTemplate (spec.spec)."""
    kind = _dra_kind(body)
    if kind == "ResourceClaim":
        spec = _get(body, "spec")
    elif kind == "ResourceClaimTemplate":
        spec = _get(body, "spec", "spec")
    else:
        return None
    return spec if isinstance(spec, dict) else None


@dataclass(frozen=True)
class RequestAlternative:
    """One way to satisfy a request: the request itself, or one `firstAvailable` subrequest.

    count is 0 for allocation mode All, where the number of devices is whatever matches.
    """

    name: str
    device_class: str
    selectors: tuple[str, ...]
    allocation_mode: str
    count: int
    admin_access: bool


@dataclass(frozen=True)
class DeviceRequest:
    """A request of a claim; more than one alternative only for a prioritized list (firstAvailable)."""

    name: str
    alternatives: tuple[RequestAlternative, ...]


def _cel_expressions(selectors: Any) -> tuple[str, ...]:
    exprs = (_str(_get(sel, "cel", "expression")) for sel in _dicts(selectors))
    return tuple(e for e in exprs if e is not None)


def _count(value: Any) -> int:
    # bool is an int subclass; `count: true` is a typo, not 1.
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().isdigit():
        return int(value)
    return 1


def _alternative(name: str, fields: dict[str, Any]) -> RequestAlternative:
    mode = _str(fields.get("allocationMode")) or "ExactCount"
    count = 0 if mode == "All" else _count(fields.get("count", 1))
    return RequestAlternative(
        name=name,
        device_class=_str(fields.get("deviceClassName")) or "",
        selectors=_cel_expressions(fields.get("selectors")),
        allocation_mode=mode,
        count=count,
        admin_access=fields.get("adminAccess") is True,
    )


def _request_alternatives(request: dict[str, Any]) -> tuple[RequestAlternative, ...]:
    name = _str(request.get("name")) or ""
    if "firstAvailable" in request:
        return tuple(
            _alternative(_str(sub.get("name")) or "", sub) for sub in _dicts(request.get("firstAvailable"))
        )
    if "exactly" in request:
        return (_alternative(name, _dict(request.get("exactly"))),)
    # v1alpha3/v1beta1: the request fields sit on the request itself.
    return (_alternative(name, request),)


def device_requests(body: dict[str, Any]) -> list[DeviceRequest]:
    """Requests of a claim/template normalised across versions.

    Classic (v1alpha1/v1alpha2) claims have no structured requests; they are read as one request named
    after the class, for one device, so callers can treat every version alike.
    """
    spec = claim_spec_of(body)
    if spec is None:
        return []
    classic_class = _str(spec.get("resourceClassName"))
    if classic_class is not None:
        alt = RequestAlternative(classic_class, classic_class, (), "ExactCount", 1, False)
        return [DeviceRequest(classic_class, (alt,))]
    return [
        DeviceRequest(_str(req.get("name")) or "", _request_alternatives(req))
        for req in _dicts(_get(spec, "devices", "requests"))
    ]


def requested_classes(body: dict[str, Any]) -> list[str]:
    """Every class a claim/template may use (all alternatives), in order, without duplicates."""
    classes = [alt.device_class for req in device_requests(body) for alt in req.alternatives]
    return _uniq([c for c in classes if c])


def requests_admin_access(body: dict[str, Any]) -> bool:
    return any(alt.admin_access for req in device_requests(body) for alt in req.alternatives)


def _node_from_selector(selector: Any) -> str | None:
    """The node a NodeSelector pins to, when it is the one-node form allocation writes; else None."""
    nodes: list[str] = []
    for term in _dicts(_dict(selector).get("nodeSelectorTerms")):
        for field, key in (("matchFields", "metadata.name"), ("matchExpressions", "kubernetes.io/hostname")):
            for req in _dicts(term.get(field)):
                values = _list(req.get("values"))
                if req.get("key") == key and req.get("operator") == "In" and len(values) == 1:
                    nodes.extend(v for v in values if isinstance(v, str))
    unique = _uniq(nodes)
    return unique[0] if len(unique) == 1 else None


def claim_allocation(body: dict[str, Any]) -> dict[str, Any]:
    """Allocation summary of a claim's status: allocated, devices, reserved_for (pod names), node."""
    status = _dict(_get(body, "status"))
    allocation = _dict(status.get("allocation"))
    devices = [
        {
            "request": _str(r.get("request")),
            "driver": _str(r.get("driver")),
            "pool": _str(r.get("pool")),
            "device": _str(r.get("device")),
        }
        for r in _dicts(_get(allocation, "devices", "results"))
    ]
    if _is_classic(body):
        # Classic allocations carry opaque resourceHandle(s), no device list; presence is the signal.
        allocated = bool(allocation)
        node = _node_from_selector(allocation.get("availableOnNodes"))
    else:
        allocated = bool(devices) or bool(_list(_get(allocation, "devices", "config")))
        node = _node_from_selector(allocation.get("nodeSelector"))
    reserved = [n for n in (_str(r.get("name")) for r in _dicts(status.get("reservedFor"))) if n]
    return {"allocated": allocated, "devices": devices, "reserved_for": reserved, "node": node}


# --- classes -----------------------------------------------------------------------------------------


def class_selectors(body: dict[str, Any]) -> list[str]:
    """CEL expressions of a DeviceClass (classic ResourceClasses have none)."""
    return list(_cel_expressions(_get(body, "spec", "selectors")))


def class_driver(body: dict[str, Any]) -> str | None:
    """The driver a DeviceClass (or classic ResourceClass) selects; None when it cannot be told.

    Structured classes name the driver only inside CEL, so `device.driver == "x"` is looked for; when
    the selectors name several drivers (an `||`) the answer is ambiguous and None. Class-level opaque
    config is the fallback because it is addressed to one driver.
    """
    if _kind(body) == "ResourceClass" or (_is_classic(body) and "driverName" in _dict(body)):
        return _str(_dict(body).get("driverName"))
    found: list[str] = []
    for expr in class_selectors(body):
        for m in _DRIVER_CEL.finditer(expr):
            found.append(m.group("a") or m.group("b"))
    drivers = _uniq(found)
    if len(drivers) == 1:
        return drivers[0]
    if drivers:
        return None
    config_drivers = _uniq(
        [d for d in (_str(_get(c, "opaque", "driver")) for c in _dicts(_get(body, "spec", "config"))) if d]
    )
    return config_drivers[0] if len(config_drivers) == 1 else None


# --- driver workloads --------------------------------------------------------------------------------


def _is_driver_label(key: Any, value: Any) -> bool:
    # NVIDIA's chart labels with "<release>-component: kubelet-plugin" instead of the recommended key.
    if not isinstance(key, str) or value not in DRIVER_COMPONENTS:
        return False
    return key == COMPONENT_LABEL or key.endswith("-component")


def is_driver_workload(body: dict[str, Any]) -> bool:
    """A DaemonSet/Deployment/StatefulSet running a DRA kubelet plugin (by label or annotation)."""
    if _kind(body) not in DRIVER_WORKLOAD_KINDS or pod_spec_of(body) is None:
        return False
    if _str(_annotations(body).get(DRIVER_ANNOTATION)):
        return True
    for meta in (_get(body, "metadata"), _get(body, "spec", "template", "metadata")):
        if any(_is_driver_label(k, v) for k, v in _labels(meta).items()):
            return True
    return False


def _driver_from_args(args: list[Any]) -> str | None:
    words = [a for a in args if isinstance(a, str)]
    for i, word in enumerate(words):
        for flag in _DRIVER_FLAGS:
            if word.startswith(flag + "="):
                value = word[len(flag) + 1 :].strip("'\"")
                if value:
                    return value
            elif word == flag and i + 1 < len(words) and not words[i + 1].startswith("-"):
                return words[i + 1]
    return None


def workload_driver(body: dict[str, Any]) -> str | None:
    """The driver name of a driver workload: annotation, else container flags, else env; else None."""
    if not is_driver_workload(body):
        return None
    annotated = _str(_annotations(body).get(DRIVER_ANNOTATION))
    if annotated:
        return annotated.strip()
    spec = _dict(pod_spec_of(body))
    containers = _dicts(spec.get("containers")) + _dicts(spec.get("initContainers"))
    for container in containers:
        found = _driver_from_args(_list(container.get("command")) + _list(container.get("args")))
        if found:
            return found
    for container in containers:
        for env in _dicts(container.get("env")):
            value = _str(env.get("value"))
            if env.get("name") in _DRIVER_ENV and value:
                return value
    return None


def canary_for(body: dict[str, Any]) -> str | None:
    """The main workload a driver canary stands in for; None on anything that is not a driver workload."""
    if not is_driver_workload(body):
        return None
    value = _str(_annotations(body).get(CANARY_ANNOTATION))
    return value.strip() if value and value.strip() else None


def driver_template_digest(body: dict[str, Any]) -> str | None:
    """sha256 of what a driver pod runs (containers and volumes), so canary and main can be compared."""
    if not is_driver_workload(body):
        return None
    spec = _dict(pod_spec_of(body))

    def containers(field: str) -> list[dict[str, Any]]:
        return [{k: c[k] for k in _DIGEST_CONTAINER_FIELDS if k in c} for c in _dicts(spec.get(field))]

    material = {
        "containers": containers("containers"),
        "initContainers": containers("initContainers"),
        "volumes": _list(spec.get("volumes")),
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


# --- slices ------------------------------------------------------------------------------------------


def slice_driver(body: dict[str, Any]) -> str | None:
    """spec.driver (1.31+) or the top-level driverName of a 1.30 v1alpha2 slice."""
    return _str(_get(body, "spec", "driver")) or _str(_dict(body).get("driverName"))


def slice_node(body: dict[str, Any]) -> str | None:
    """The node of a node-local slice; None for nodeSelector/allNodes slices."""
    return _str(_get(body, "spec", "nodeName")) or _str(_dict(body).get("nodeName"))


def slice_pool(body: dict[str, Any]) -> str | None:
    """spec.pool.name; 1.30 slices had no pools."""
    return _str(_get(body, "spec", "pool", "name"))


def _qualify(name: str, driver: str | None) -> str:
    # Names without a domain belong to the driver (the CEL view is device.attributes['<driver>'].name).
    return name if "/" in name or not driver else f"{driver}/{name}"


def _quantity(value: Any) -> str | None:
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, str | int | float):
        return str(value)
    return None


def _typed_attribute(value: Any) -> dict[str, Any] | None:
    typed = {k: value[k] for k in _ATTRIBUTE_TYPES if k in _dict(value)}
    return typed or None


def slice_devices(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Devices of a ResourceSlice in the flat v1 shape.

    Result: [{"name", "attributes": {qualified: {int|bool|string|version: v}}, "capacity": {qualified:
    {"value": str}}}]. v1alpha3/v1beta1 nest under `basic`; v1alpha3 capacity is a plain quantity;
    1.30 v1alpha2 `namedResources` lists attributes, where quantity-typed ones are read as capacity.
    Capacity names are qualified like attribute names (the CEL view is device.capacity['<domain>']).
    """
    driver = slice_driver(body)
    out: list[dict[str, Any]] = []
    if _get(body, "spec", "devices") is None and isinstance(_get(body, "namedResources"), dict):
        for inst in _dicts(_get(body, "namedResources", "instances")):
            name = _str(inst.get("name"))
            if name is None:
                continue
            attrs: dict[str, Any] = {}
            caps: dict[str, Any] = {}
            for attr in _dicts(inst.get("attributes")):
                aname = _str(attr.get("name"))
                if aname is None:
                    continue
                typed = _typed_attribute(attr)
                if typed:
                    attrs[_qualify(aname, driver)] = typed
                elif (q := _quantity(attr.get("quantity"))) is not None:
                    caps[_qualify(aname, driver)] = {"value": q}
            out.append({"name": name, "attributes": attrs, "capacity": caps})
        return out
    for dev in _dicts(_get(body, "spec", "devices")):
        name = _str(dev.get("name"))
        if name is None:
            continue
        fields = _dict(dev.get("basic")) if "basic" in dev else dev
        attrs = {}
        for aname, value in _dict(fields.get("attributes")).items():
            typed = _typed_attribute(value)
            if isinstance(aname, str) and typed:
                attrs[_qualify(aname, driver)] = typed
        caps = {}
        for cname, value in _dict(fields.get("capacity")).items():
            q = _quantity(value.get("value")) if isinstance(value, dict) else _quantity(value)
            if isinstance(cname, str) and q is not None:
                caps[_qualify(cname, driver)] = {"value": q}
        out.append({"name": name, "attributes": attrs, "capacity": caps})
    return out


# --- roles and the policy-input summary --------------------------------------------------------------

_DRA_ROLES: Mapping[str, str] = {
    "DeviceClass": "device-class",
    "ResourceClass": "device-class",
    "ResourceClaimTemplate": "claim-template",
    "ResourceClaim": "claim",
    "ResourceSlice": "slice",
    "DeviceTaintRule": "taint-rule",
}


def role_of(body: dict[str, Any]) -> str:
    """The object's part in the DRA chain (see docs/policy-input.md)."""
    dra_kind = _dra_kind(body)
    if dra_kind is not None:
        return _DRA_ROLES.get(dra_kind, "other")
    if _kind(body) == "Namespace" and api_group(_api_version(body) or "v1") == "":
        return "namespace"
    if is_driver_workload(body):
        return "driver-canary" if canary_for(body) else "driver"
    if pod_spec_of(body) is not None:
        return "workload"
    return "other"


@dataclass(frozen=True)
class DraInfo:
    """The `_dra` facts of one object, apart from ref/location/stage which the caller adds."""

    role: str
    device_classes: tuple[str, ...]
    claim_templates: tuple[str, ...]
    claims: tuple[str, ...]
    pod_claims: tuple[PodClaim, ...]
    container_claims: tuple[ContainerClaimRef, ...]
    driver: str | None
    canary_for: str | None
    driver_template: str | None
    admin_access: bool

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "device_classes": list(self.device_classes),
            "claim_templates": list(self.claim_templates),
            "claims": list(self.claims),
            "pod_claims": [p.to_json() for p in self.pod_claims],
            "container_claims": [c.to_json() for c in self.container_claims],
            "driver": self.driver,
            "canary_for": self.canary_for,
            "driver_template": self.driver_template,
            "admin_access": self.admin_access,
        }


def describe(body: dict[str, Any], namespace: str) -> DraInfo:
    """DRA facts of an object; namespace is the object's own (templates/claims resolve there)."""
    role = role_of(body)
    spec = pod_spec_of(body)
    pclaims = tuple(pod_claims(spec))
    driver: str | None = None
    if role == "device-class":
        driver = class_driver(body)
    elif role in ("driver", "driver-canary"):
        driver = workload_driver(body)
    is_claim = role in ("claim", "claim-template")
    return DraInfo(
        role=role,
        device_classes=tuple(requested_classes(body)) if is_claim else (),
        claim_templates=tuple(_uniq([f"{namespace}/{p.template}" for p in pclaims if p.template])),
        claims=tuple(_uniq([f"{namespace}/{p.claim}" for p in pclaims if p.claim])),
        pod_claims=pclaims,
        container_claims=tuple(container_claim_refs(spec)),
        driver=driver,
        canary_for=canary_for(body),
        driver_template=driver_template_digest(body),
        admin_access=requests_admin_access(body) if is_claim else False,
    )
