"""A manifest plus its reference and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Kinds that live outside any namespace. Anything else is namespaced; an object of a namespaced kind
# without metadata.namespace is placed in "default" the way kubectl does.
CLUSTER_SCOPED_KINDS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "CustomResourceDefinition",
        "ClusterRole",
        "ClusterRoleBinding",
        "PriorityClass",
        "RuntimeClass",
        "StorageClass",
        "CSIDriver",
        "IngressClass",
        "APIService",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "DeviceClass",
        "ResourceClass",
        "ResourceSlice",
        "DeviceTaintRule",
    }
)


def api_group(api_version: str) -> str:
    """The group of an apiVersion: "" for core "v1", "resource.k8s.io" for "resource.k8s.io/v1"."""
    return api_version.rsplit("/", 1)[0] if "/" in api_version else ""


def api_version_only(api_version: str) -> str:
    """The version part of an apiVersion: "v1beta1" for "resource.k8s.io/v1beta1"."""
    return api_version.rsplit("/", 1)[-1]


@dataclass(frozen=True, order=True)
class ObjRef:
    """Identity of an object independent of its API version: group, kind, namespace, name."""

    group: str
    kind: str
    namespace: str
    name: str

    def __str__(self) -> str:
        if self.namespace:
            return f"{self.kind}/{self.namespace}/{self.name}"
        return f"{self.kind}/{self.name}"


def located(path: str, line: int, via: str = "") -> str:
    """`path:line`, led by the kustomization or chart release that rendered the object (`via`), if any."""
    at = f"{path}:{line}"
    return f"{via} from {at}" if via and via != path else at


def ref_of(body: dict[str, Any], default_namespace: str = "default") -> ObjRef:
    """The reference of a manifest dict (which must have apiVersion, kind and metadata.name)."""
    kind = str(body["kind"])
    meta = body.get("metadata") or {}
    namespace = "" if kind in CLUSTER_SCOPED_KINDS else str(meta.get("namespace") or default_namespace)
    return ObjRef(api_group(str(body["apiVersion"])), kind, namespace, str(meta["name"]))


@dataclass(frozen=True)
class Manifest:
    """One object of the desired state with its source location (path relative to the load root)."""

    body: dict[str, Any] = field(compare=False, hash=False)
    ref: ObjRef
    path: str
    line: int
    # A rendered object: the kustomization (or chart release) that produced it; `path` is then the
    # repository file the object came from (a base's manifest, a chart template).
    rendered_by: str = field(default="", compare=False)

    @property
    def api_version(self) -> str:
        return str(self.body["apiVersion"])

    @property
    def kind(self) -> str:
        return self.ref.kind

    @property
    def where(self) -> str:
        return located(self.path, self.line, self.rendered_by)

    @property
    def annotations(self) -> dict[str, str]:
        return dict((self.body.get("metadata") or {}).get("annotations") or {})

    @property
    def labels(self) -> dict[str, str]:
        return dict((self.body.get("metadata") or {}).get("labels") or {})
