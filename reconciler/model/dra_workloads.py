"""Pod-side DRA accessors: the PodSpec of every pod-carrying kind, its claims, and driver workloads.

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.objects import api_group
from reconciler.model.readers import (
    api_version_of,
    as_dict,
    as_dicts,
    as_str,
    dig,
    kind_of,
)

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

# --- pod side ----------------------------------------------------------------------------------------


def pod_spec_of(body: dict[str, Any]) -> dict[str, Any] | None:
    """The PodSpec of a Pod, PodTemplate or workload controller; None for other kinds or a missing spec."""
    kind = kind_of(body)
    path = POD_TEMPLATE_KINDS.get(kind)
    if path is None:
        return None
    api_version = api_version_of(body)
    if api_version and api_group(api_version) not in _POD_KIND_GROUPS[kind]:
        return None
    spec = dig(body, *path)
    return spec if isinstance(spec, dict) else None


# Kubernetes' own API groups hold pod templates only in apps, batch and the core ReplicationController
# (`x-k8s.io` is not one of them: JobSet, LeaderWorkerSet and Kueue live there and embed pod templates).
_TEMPLATE_GROUPS = frozenset({"apps", "batch", "extensions"})
_NO_TEMPLATE_GROUPS = frozenset({"policy", "autoscaling"})
_SEARCH_DEPTH = 12


def _may_embed_pod_specs(body: dict[str, Any]) -> bool:
    group = api_group(api_version_of(body) or "")
    if group == "":
        return kind_of(body) == "ReplicationController"
    if group in _TEMPLATE_GROUPS:
        return True
    return not (group.endswith(".k8s.io") or group in _NO_TEMPLATE_GROUPS)


def uninspected_pod_specs(body: dict[str, Any]) -> list[str]:
    """Where an object whose PodSpec `pod_spec_of` does not read still embeds pod specs (an MPIJob's
    `spec.mpiReplicaSpecs.*.template.spec`, any custom resource's, a ReplicationController's).

    Dotted paths of each mapping with a `containers` list, outside metadata and status; [] for an inspected
    kind and for objects with none. The policies see none of those pods: their claims go unchecked.
    """
    if not _may_embed_pod_specs(body) or pod_spec_of(body) is not None:
        return []
    found: list[str] = []

    def search(node: Any, path: str, depth: int) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list) and path:
                found.append(path)
                return
            items: list[tuple[str, Any]] = [(f"{path}.{k}" if path else str(k), v) for k, v in node.items()]
        elif isinstance(node, list):
            items = [(f"{path}[{i}]", v) for i, v in enumerate(node)]
        else:
            return
        if depth < _SEARCH_DEPTH:
            for child_path, child in items:
                if child_path not in ("metadata", "status"):
                    search(child, child_path, depth + 1)

    search(body, "", 0)
    return found


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
    for entry in as_dicts(as_dict(pod_spec).get("resourceClaims")):
        name = as_str(entry.get("name"))
        if name is None:
            continue
        source = as_dict(entry.get("source"))
        claim = as_str(entry.get("resourceClaimName")) or as_str(source.get("resourceClaimName"))
        template = as_str(entry.get("resourceClaimTemplateName")) or as_str(
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
    spec = as_dict(pod_spec)
    out: list[ContainerClaimRef] = []
    for field in ("initContainers", "containers"):
        for container in as_dicts(spec.get(field)):
            cname = as_str(container.get("name")) or ""
            for ref in as_dicts(dig(container, "resources", "claims")):
                name = as_str(ref.get("name"))
                if name is not None:
                    out.append(ContainerClaimRef(cname, name, as_str(ref.get("request"))))
    return out


# --- extended resources backed by DRA (1.34+, DRAExtendedResource) ---------------------------------------

EXTENDED_ALIAS_PREFIX = "deviceclass.resource.kubernetes.io/"


def extended_resources(pod_spec: dict[str, Any] | None) -> list[str]:
    """Extended resources the pod's containers request (requests or limits) that DRA may back: the
    implicit `deviceclass.resource.kubernetes.io/<class>` and any domain-qualified name outside
    `kubernetes.io` (a DeviceClass's `extendedResourceName`, e.g. `nvidia.com/gpu`), sorted."""
    spec = as_dict(pod_spec)
    found: set[str] = set()
    for container in as_dicts(spec.get("containers")) + as_dicts(spec.get("initContainers")):
        resources = as_dict(container.get("resources"))
        for field_name in ("requests", "limits"):
            for name in as_dict(resources.get(field_name)):
                name = str(name)
                domain = name.split("/", 1)[0] if "/" in name else ""
                if name.startswith(EXTENDED_ALIAS_PREFIX) or (
                    domain and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")
                ):
                    found.add(name)
    return sorted(found)
