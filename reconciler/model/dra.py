"""Version-normalised accessors for Dynamic Resource Allocation manifests.

Every function takes a manifest as a plain dict (exactly as loaded from YAML) and copes with every
resource.k8s.io version from v1alpha1 to v1. Manifests come from users, so nothing here trusts a field's
type: a string where a list belongs reads as an empty list, never as an exception. The shape of a field
is detected from the data rather than from the apiVersion where both agree, so that a manifest using the
wrong shape for its version is still understood (reporting the mismatch is a policy's job).

The accessors live in sibling modules by what they read; this module re-exports every one of them and adds
the object's role in the DRA chain and the `_dra` summary of the policy input:

* :mod:`reconciler.model.dra_readers`   defensive readers, the DRA group and versions
* :mod:`reconciler.model.dra_workloads` PodSpecs, pod and container claims, extended resources
* :mod:`reconciler.model.dra_drivers`   driver workloads: recognition, driver, role, canary, digests
* :mod:`reconciler.model.dra_claims`    claims and templates: requests, classes, allocation status
* :mod:`reconciler.model.dra_devices`   DeviceClasses and ResourceSlices
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.dra_claims import (
    DeviceRequest,
    RequestAlternative,
    claim_allocation,
    claim_spec_of,
    device_requests,
    requested_classes,
    requests_admin_access,
)
from reconciler.model.dra_devices import (
    class_driver,
    class_selectors,
    slice_devices,
    slice_driver,
    slice_node,
    slice_pool,
)
from reconciler.model.dra_drivers import (
    CANARY_ANNOTATION,
    COMPONENT_LABEL,
    CONFIG_KINDS,
    DRIVER_ANNOTATION,
    DRIVER_COMPONENTS,
    DRIVER_WORKLOAD_KINDS,
    DriverHints,
    allows_no_nodes,
    canary_for,
    config_content_digest,
    content_digest_only,
    driver_config_digest,
    driver_hints,
    driver_role,
    driver_template_digest,
    is_driver_workload,
    mounted_config,
    recognized_by,
    rollout_of,
    workload_driver,
)
from reconciler.model.dra_readers import CLASSIC_VERSIONS, DRA_GROUP, DRA_VERSIONS, dra_kind, is_dra_group
from reconciler.model.dra_workloads import (
    EXTENDED_ALIAS_PREFIX,
    POD_TEMPLATE_KINDS,
    ContainerClaimRef,
    PodClaim,
    container_claim_refs,
    extended_resources,
    pod_claims,
    pod_spec_of,
)
from reconciler.model.driver_rollout import RolloutSpec
from reconciler.model.objects import Manifest, api_group
from reconciler.model.readers import api_version_of, kind_of, unique

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
    kind = dra_kind(body)
    if kind is not None:
        return _DRA_ROLES.get(kind, "other")
    if kind_of(body) == "Namespace" and api_group(api_version_of(body) or "v1") == "":
        return "namespace"
    if is_driver_workload(body):
        return "driver-canary" if canary_for(body) else "driver"
    if pod_spec_of(body) is not None:
        return "workload"
    return "other"


def hints_of(
    manifests: Iterable[Manifest],
    declared: Mapping[tuple[str, str, str], str] | None = None,
    allow_no_nodes: Iterable[str] = (),
    rollouts: Mapping[str, RolloutSpec] | None = None,
) -> DriverHints:
    """What recognizes driver workloads among `manifests` (desired, base and live objects): the drivers
    their DeviceClasses and ResourceSlices use, and the workloads `drivers:` declares."""
    known: set[str] = set((declared or {}).values())
    for manifest in manifests:
        kind = dra_kind(manifest.body)
        if kind == "DeviceClass":
            known.add(class_driver(manifest.body) or "")
        elif kind == "ResourceSlice":
            known.add(slice_driver(manifest.body) or "")
    known.discard("")
    return DriverHints(
        frozenset(known), dict(declared or {}), frozenset(allow_no_nodes), dict(rollouts or {})
    )


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
    driver_role: str | None = None  # kubelet-plugin or controller, for driver workloads
    driver_config: str | None = None  # the content its pods read (set by the input builder)
    extended_resources: tuple[str, ...] = ()  # extended resources DRA may back (pods and workloads)
    recognized_by: str | None = None  # how a driver workload was recognized

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
            "driver_role": self.driver_role,
            "driver_config": self.driver_config,
            "extended_resources": list(self.extended_resources),
            "recognized_by": self.recognized_by,
        }


def describe(body: dict[str, Any], namespace: str) -> DraInfo:
    """DRA facts of an object; namespace is the object's own (templates/claims resolve there)."""
    role = role_of(body)
    # Only workloads have a pod spec and only driver workloads the driver facts: each reader runs once,
    # for the objects it can say something about (a 10,000-object check builds this for every object).
    is_driver = role in ("driver", "driver-canary")
    spec = pod_spec_of(body) if is_driver or role == "workload" else None
    pclaims = tuple(pod_claims(spec)) if spec is not None else ()
    driver: str | None = None
    if role == "device-class":
        driver = class_driver(body)
    elif is_driver:
        driver = workload_driver(body)
    alternatives = (
        [alt for req in device_requests(body) for alt in req.alternatives]
        if role in ("claim", "claim-template")
        else []
    )
    return DraInfo(
        role=role,
        device_classes=tuple(unique([alt.device_class for alt in alternatives if alt.device_class])),
        claim_templates=tuple(unique([f"{namespace}/{p.template}" for p in pclaims if p.template])),
        claims=tuple(unique([f"{namespace}/{p.claim}" for p in pclaims if p.claim])),
        pod_claims=pclaims,
        container_claims=tuple(container_claim_refs(spec)) if spec is not None else (),
        driver=driver,
        canary_for=canary_for(body) if is_driver else None,
        driver_template=driver_template_digest(body) if is_driver else None,
        admin_access=any(alt.admin_access for alt in alternatives),
        driver_role=driver_role(body) if is_driver else None,
        extended_resources=tuple(extended_resources(spec)) if spec is not None else (),
        recognized_by=recognized_by(body) if is_driver else None,
    )


__all__ = [
    "CANARY_ANNOTATION",
    "CLASSIC_VERSIONS",
    "COMPONENT_LABEL",
    "CONFIG_KINDS",
    "DriverHints",
    "EXTENDED_ALIAS_PREFIX",
    "allows_no_nodes",
    "extended_resources",
    "config_content_digest",
    "content_digest_only",
    "driver_config_digest",
    "driver_hints",
    "driver_role",
    "hints_of",
    "mounted_config",
    "recognized_by",
    "DRA_GROUP",
    "DRA_VERSIONS",
    "DRIVER_ANNOTATION",
    "DRIVER_COMPONENTS",
    "DRIVER_WORKLOAD_KINDS",
    "POD_TEMPLATE_KINDS",
    "ContainerClaimRef",
    "DeviceRequest",
    "DraInfo",
    "PodClaim",
    "RequestAlternative",
    "canary_for",
    "claim_allocation",
    "claim_spec_of",
    "class_driver",
    "class_selectors",
    "container_claim_refs",
    "describe",
    "device_requests",
    "driver_template_digest",
    "is_dra_group",
    "is_driver_workload",
    "pod_claims",
    "pod_spec_of",
    "requested_classes",
    "requests_admin_access",
    "role_of",
    "rollout_of",
    "slice_devices",
    "slice_driver",
    "slice_node",
    "slice_pool",
    "workload_driver",
]
