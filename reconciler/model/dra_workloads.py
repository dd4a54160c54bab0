"""Pod-side DRA accessors: the PodSpec of every pod-carrying kind, its claims, and driver workloads.

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reconciler.model.objects import api_group
from reconciler.model.readers import (
    annotations_of,
    api_version_of,
    as_dict,
    as_dicts,
    as_list,
    as_str,
    dig,
    kind_of,
    labels_of,
)
from reconciler.model.server_defaults import without_container_defaults, without_volume_defaults

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


# --- driver workloads --------------------------------------------------------------------------------


def _is_driver_label(key: Any, value: Any) -> bool:
    # NVIDIA's chart labels with "<release>-component: kubelet-plugin" instead of the recommended key.
    if not isinstance(key, str) or value not in DRIVER_COMPONENTS:
        return False
    return key == COMPONENT_LABEL or key.endswith("-component")


def is_driver_workload(body: dict[str, Any]) -> bool:
    """A DaemonSet/Deployment/StatefulSet running a DRA kubelet plugin (by label or annotation)."""
    if kind_of(body) not in DRIVER_WORKLOAD_KINDS or pod_spec_of(body) is None:
        return False
    if as_str(annotations_of(body).get(DRIVER_ANNOTATION)):
        return True
    for meta in (dig(body, "metadata"), dig(body, "spec", "template", "metadata")):
        if any(_is_driver_label(k, v) for k, v in labels_of(meta).items()):
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
    annotated = as_str(annotations_of(body).get(DRIVER_ANNOTATION))
    if annotated:
        return annotated.strip()
    spec = as_dict(pod_spec_of(body))
    containers = as_dicts(spec.get("containers")) + as_dicts(spec.get("initContainers"))
    for container in containers:
        found = _driver_from_args(as_list(container.get("command")) + as_list(container.get("args")))
        if found:
            return found
    for container in containers:
        for env in as_dicts(container.get("env")):
            value = as_str(env.get("value"))
            if env.get("name") in _DRIVER_ENV and value:
                return value
    return None


def canary_for(body: dict[str, Any]) -> str | None:
    """The main workload a driver canary stands in for; None on anything that is not a driver workload."""
    if not is_driver_workload(body):
        return None
    value = as_str(annotations_of(body).get(CANARY_ANNOTATION))
    return value.strip() if value and value.strip() else None


def driver_template_digest(body: dict[str, Any]) -> str | None:
    """sha256 of what a driver pod runs (containers and volumes), so canary and main can be compared.

    Server defaults are left out, so a live workload digests like its manifest.
    """
    if not is_driver_workload(body):
        return None
    spec = as_dict(pod_spec_of(body))

    def containers(field: str) -> list[dict[str, Any]]:
        return [
            without_container_defaults({k: c[k] for k in _DIGEST_CONTAINER_FIELDS if k in c})
            for c in as_dicts(spec.get(field))
        ]

    material = {
        "containers": containers("containers"),
        "initContainers": containers("initContainers"),
        "volumes": [without_volume_defaults(v) for v in as_list(spec.get("volumes"))],
    }
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
