"""Whether a kind is namespaced: from the cluster's discovery, the built-in table, or a CustomResourceDefinition.

A reference carries a namespace only for a namespaced kind, so the same object gets the same reference from
a manifest and from the cluster (ApplySet prune compares them). The sources, first that knows:

* the cluster's discovery when one is given (`namespaced` of each resource): what the server does;
* the built-in kinds (`scope_table.py`, generated from the Kubernetes client's paths; any version of the
  kind when the one written is not in it: a resource keeps its scope in every version);
* the CustomResourceDefinitions of the desired state (`spec.scope`).

A kind none of them knows is taken as namespaced (the API server's answer decides in the end) and said
once per kind, so an object is never put in `default` silently. Pure: discovery comes in as data.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from reconciler.model.objects import Manifest, ObjRef, api_group, builtin_namespaced

GroupKind = tuple[str, str]
CRD_GROUP = "apiextensions.k8s.io"


@dataclass(frozen=True)
class Scopes:
    """What is known of kinds besides the built-in table: the cluster's discovery and the desired CRDs."""

    discovered: Mapping[GroupKind, bool] = field(default_factory=dict)
    defined: Mapping[GroupKind, bool] = field(default_factory=dict)

    def namespaced(self, api_version: str, kind: str) -> bool | None:
        """True or False when a source knows the kind, None when none does."""
        group = api_group(api_version)
        found = self.discovered.get((group, kind))
        if found is None:
            found = builtin_namespaced(api_version, kind)
        if found is None:
            found = self.defined.get((group, kind))
        return found

    def with_crds(self, manifests: Iterable[Manifest]) -> Scopes:
        defined = {
            **self.defined,
            **crd_scopes(m.body for m in manifests if m.kind == "CustomResourceDefinition"),
        }
        return replace(self, defined=defined)


BUILTIN = Scopes()


def crd_scopes(crds: Iterable[dict[str, Any]]) -> dict[GroupKind, bool]:
    """(group, kind) -> namespaced of the CustomResourceDefinitions given (`spec.scope`; v1 requires it,
    v1beta1 defaulted it to Namespaced)."""
    found: dict[GroupKind, bool] = {}
    for crd in crds:
        if api_group(str(crd.get("apiVersion", ""))) != CRD_GROUP:
            continue
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, kind = spec.get("group"), names.get("kind") if isinstance(names, dict) else None
        if isinstance(group, str) and isinstance(kind, str):
            found[(group, kind)] = spec.get("scope", "Namespaced") != "Cluster"
    return found


def scoped_ref(body: dict[str, Any], scopes: Scopes = BUILTIN, default_namespace: str = "default") -> ObjRef:
    """The reference of a manifest: a namespace only for a namespaced kind (an unknown kind counts as one),
    `default_namespace` when the manifest gives none."""
    kind = str(body["kind"])
    api_version = str(body["apiVersion"])
    meta = body.get("metadata") or {}
    namespaced = scopes.namespaced(api_version, kind)
    namespace = str(meta.get("namespace") or default_namespace) if namespaced is not False else ""
    return ObjRef(api_group(api_version), kind, namespace, str(meta["name"]))


def live_ref(body: dict[str, Any]) -> ObjRef:
    """The reference of an object the API server returned: its namespace as the server stored it (none for a
    cluster-scoped kind, always one for a namespaced kind), whatever the tables say."""
    meta = body.get("metadata") or {}
    return ObjRef(
        api_group(str(body["apiVersion"])),
        str(body["kind"]),
        str(meta.get("namespace") or ""),
        str(meta["name"]),
    )


@dataclass(frozen=True)
class Rescoped:
    manifests: list[Manifest]
    changed: bool  # some reference changed (objects may now be duplicates)
    unknown: list[GroupKind]  # kinds no source knows, in the order first met


def rescope(manifests: Iterable[Manifest], scopes: Scopes) -> Rescoped:
    """The manifests with references as `scopes` (with the CRDs among the manifests) place them.

    An object of a cluster-scoped kind that rendering gave a namespace (Helm's release namespace, kustomize's
    `namespace:`, both of which take an unknown kind as namespaced) loses it, as the API server drops it."""
    manifests = list(manifests)
    scopes = scopes.with_crds(manifests)
    out: list[Manifest] = []
    unknown: dict[GroupKind, None] = {}
    changed = False
    known: dict[tuple[str, str], bool | None] = {}  # (apiVersion, kind): 10,000 objects have few kinds
    for m in manifests:
        key = (m.body["apiVersion"], m.ref.kind)
        namespaced = known[key] if key in known else known.setdefault(key, scopes.namespaced(*key))
        if namespaced is None:
            unknown.setdefault((m.ref.group, m.kind))
            out.append(m)
            continue
        if namespaced or not m.ref.namespace:
            out.append(m)
            continue
        changed = True
        body = m.body
        if m.rendered_by and (body.get("metadata") or {}).get("namespace"):
            body = {**body, "metadata": {k: v for k, v in body["metadata"].items() if k != "namespace"}}
        out.append(replace(m, body=body, ref=replace(m.ref, namespace="")))
    return Rescoped(out, changed, list(unknown))


def unknown_scope_notice(unknown: Iterable[GroupKind], cluster: bool = False) -> str:
    """One line naming the kinds whose scope no source knows (empty when there are none)."""
    kinds = [f"{kind}.{group}" if group else kind for group, kind in unknown]
    if not kinds:
        return ""
    asked = "the cluster does not serve it" if cluster else "no cluster to ask"
    return (
        f"scope unknown for {', '.join(kinds)}: no CustomResourceDefinition in the desired state and "
        f"{asked}; taken as namespaced (objects without a namespace are shown in `default`)"
    )
