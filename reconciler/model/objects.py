"""A manifest plus its reference and where it came from."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from reconciler.model.scope_table import NAMESPACED


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


@cache
def _namespaced_by_kind() -> dict[tuple[str, str], bool]:
    return {(group, kind): namespaced for (group, _, kind), namespaced in NAMESPACED.items()}


def builtin_namespaced(api_version: str, kind: str) -> bool | None:
    """Whether a built-in kind is namespaced (scope_table.py; a version missing from it takes the kind's
    scope in the others: a resource keeps its scope in every version); None for any other kind."""
    group = api_group(api_version)
    found = NAMESPACED.get((group, api_version_only(api_version), kind))
    return _namespaced_by_kind().get((group, kind)) if found is None else found


def ref_of(body: dict[str, Any], default_namespace: str = "default") -> ObjRef:
    """The reference of a manifest dict (which must have apiVersion, kind and metadata.name).

    A built-in cluster-scoped kind has no namespace; any other kind is taken as namespaced, placed in
    `default_namespace` when it names none the way kubectl does. Custom kinds and the cluster's discovery
    are model/scope.py's: it corrects what this cannot know."""
    kind = str(body["kind"])
    api_version = str(body["apiVersion"])
    meta = body.get("metadata") or {}
    if builtin_namespaced(api_version, kind) is False:
        namespace = ""
    else:
        namespace = str(meta.get("namespace") or default_namespace)
    return ObjRef(api_group(api_version), kind, namespace, str(meta["name"]))


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
