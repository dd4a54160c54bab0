"""Build the policy input document (docs/policy-input.md): the only thing Rego rules read.

Python resolves the resource.k8s.io version zoo once here (each object's `_dra` block and the indexes), so
the rules stay short and identical for every API version.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import ManifestError
from reconciler.model import dra
from reconciler.model.generators import generated_template
from reconciler.model.objects import Manifest, ObjRef, api_version_only
from reconciler.model.plan import Plan
from reconciler.model.served import DEFAULT_RELEASE, parse_release, release_doc
from reconciler.model.stages import stage_of


@dataclass(frozen=True)
class Revision:
    sha: str | None = None
    parent: str | None = None
    message: str | None = None
    author: str | None = None
    signed: bool = False


@dataclass
class ClusterFacts:
    """What a live cluster adds to the input (filled by the cluster edge; pure data here)."""

    version: str
    served: dict[str, list[str]]  # group -> its served versions, preferred first ("" is the core group)
    deprecated: dict[str, list[str]] = field(default_factory=dict)
    objects: list[Manifest] = field(default_factory=list)
    # group -> kind -> the versions whose resource list has the kind (discovery, preferred first)
    kinds: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    unavailable: list[str] = field(default_factory=list)  # group versions discovery could not read
    # (group, kind) -> whether discovery lists the kind as namespaced
    namespaced: dict[tuple[str, str], bool] = field(default_factory=dict)
    # the ConfigMaps and Secrets the live driver workloads read, their content as a digest only
    # (`dra.content_digest_only`): never in the input, only in the base of a check without a revision
    configs: list[Manifest] = field(default_factory=list)


def object_doc(manifest: Manifest, stage: int | None = None, judged: bool = True) -> dict[str, Any]:
    """The manifest as written plus its `_dra` block."""
    ref = manifest.ref
    info = dra.describe(manifest.body, ref.namespace).to_json()
    info.update(
        {
            "ref": str(ref),
            "group": ref.group,
            "version": api_version_only(manifest.api_version),
            "kind": ref.kind,
            "namespace": ref.namespace,
            "name": ref.name,
            "path": manifest.path,
            "line": manifest.line,
            **({"rendered_by": manifest.rendered_by} if manifest.rendered_by else {}),
            "stage": stage_of(manifest) if stage is None else stage,
        }
    )
    rollout = _rollout(manifest, judged)
    if rollout is not None:
        info["rollout"] = rollout
    return {**manifest.body, "_dra": info}


def _rollout(manifest: Manifest, judged: bool) -> dict[str, Any] | None:
    """`_dra.rollout` of a main driver DaemonSet. An unreadable annotation of the revision judged is an error
    at its file:line; one of the base or of a live object is not this change's mistake (it has none then)."""
    try:
        spec = dra.rollout_of(manifest.body, manifest.where)
    except ManifestError:
        if not judged:
            return None
        raise
    return spec.to_json() if spec is not None else None


def _with_driver_config(
    manifests: Sequence[Manifest], docs: dict[ObjRef, dict[str, Any]], shared: set[int] | None = None
) -> dict[ObjRef, set[tuple[str, str, str]]]:
    """Set `_dra.driver_config` on the driver workloads' docs: the content of the ConfigMaps and Secrets
    their pods read, found among `manifests`. A doc in `shared` (also the head's) is copied before it is
    changed. Returns what each driver workload reads: (kind, namespace, name)."""
    contents = {
        (m.kind, m.ref.namespace, m.ref.name): dra.config_content_digest(m.body)
        for m in manifests
        if m.kind in dra.CONFIG_KINDS and m.ref.group == ""
    }
    reads: dict[ObjRef, set[tuple[str, str, str]]] = {}
    for manifest in manifests:
        doc = docs.get(manifest.ref)
        if doc is None or doc["_dra"]["role"] not in ("driver", "driver-canary"):
            continue
        namespace = manifest.ref.namespace
        digest = dra.driver_config_digest(manifest.body, namespace, contents)
        reads[manifest.ref] = {(k, namespace, n) for k, n in dra.mounted_config(manifest.body)}
        if doc["_dra"].get("driver_config") == digest:
            continue
        if shared is not None and id(doc) in shared:
            doc = docs[manifest.ref] = {**doc, "_dra": dict(doc["_dra"])}
        doc["_dra"]["driver_config"] = digest
    return reads


def _config_readers(
    ref: ObjRef,
    reads: dict[ObjRef, set[tuple[str, str, str]]],
    head_docs: dict[ObjRef, dict[str, Any]],
    base_docs: dict[ObjRef, dict[str, Any]],
) -> list[dict[str, Any]]:
    """The main driver workloads (head docs) that read the ConfigMap or Secret `ref` and whose config
    content changes with it: a driver change to roll out through a canary."""
    if ref.kind not in dra.CONFIG_KINDS or ref.group != "":
        return []
    out = []
    for workload, names in reads.items():
        if (ref.kind, ref.namespace, ref.name) not in names:
            continue
        new, old = head_docs[workload], base_docs.get(workload)
        if new["_dra"]["role"] != "driver" or old is None:
            continue
        if old["_dra"].get("driver_config") != new["_dra"].get("driver_config"):
            out.append(new)
    return out


def build_index(docs: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Lookup tables over object docs (see docs/policy-input.md, Index)."""
    classes: dict[str, str] = {}
    class_stages: dict[str, int] = {}
    templates: dict[str, str] = {}
    claims: dict[str, str] = {}
    namespaces: dict[str, Any] = {}
    drivers: dict[str, dict[str, Any]] = {}
    canaries: dict[str, list[str]] = {}
    crds: dict[str, dict[str, dict[str, Any]]] = {}
    extended: dict[str, str] = {}  # extendedResourceName -> the DeviceClass that backs it

    def driver_entry(name: str) -> dict[str, Any]:
        return drivers.setdefault(
            name, {"workloads": [], "canaries": [], "classes": [], "slices": 0, "devices": 0}
        )

    for doc in docs:
        info = doc["_dra"]
        role = info["role"]
        key = f"{info['namespace']}/{info['name']}"
        generated = generated_template(info["group"], info["kind"], doc)
        if generated is not None:
            # Created at run time by the object's controller: provided, as far as the pods are concerned.
            templates.setdefault(f"{info['namespace']}/{generated[0]}", info["ref"])
        if info["kind"] == "CustomResourceDefinition" and info["group"] == "apiextensions.k8s.io":
            defined = crd_kind(doc)
            if defined is not None:
                group, kind, versions = defined
                crds.setdefault(group, {})[kind] = {"ref": info["ref"], "versions": versions}
        if role == "device-class":
            classes[info["name"]] = info["ref"]
            spec = doc.get("spec")
            name = spec.get("extendedResourceName") if isinstance(spec, dict) else None
            if isinstance(name, str) and name:
                extended[name] = info["name"]
            class_stages[info["name"]] = max(info["stage"], class_stages.get(info["name"], info["stage"]))
            if info["driver"]:
                driver_entry(info["driver"])["classes"].append(info["name"])
        elif role == "claim-template":
            templates[key] = info["ref"]
        elif role == "claim":
            claims[key] = info["ref"]
        elif role == "namespace":
            labels = (doc.get("metadata") or {}).get("labels") or {}
            namespaces[info["name"]] = {"ref": info["ref"], "labels": labels}
        elif role in ("driver", "driver-canary"):
            if info["driver"]:
                entry = driver_entry(info["driver"])
                entry["canaries" if role == "driver-canary" else "workloads"].append(info["ref"])
            if role == "driver-canary" and info["canary_for"]:
                main_ref = f"{doc.get('kind')}/{info['namespace']}/{info['canary_for']}"
                canaries.setdefault(main_ref, []).append(info["ref"])
        elif role == "slice":
            driver = dra.slice_driver(doc)
            if driver:
                entry = driver_entry(driver)
                entry["slices"] += 1
                entry["devices"] += len(dra.slice_devices(doc))
    return {
        "device_classes": classes,
        "device_class_stages": class_stages,
        "claim_templates": templates,
        "claims": claims,
        "namespaces": namespaces,
        "drivers": drivers,
        "canaries": canaries,
        "crds": crds,
        "extended_resources": extended,
    }


def crd_kind(doc: dict[str, Any]) -> tuple[str, str, list[str]] | None:
    """(group, kind, served versions) a CustomResourceDefinition defines; None when it names no kind."""
    spec = doc.get("spec")
    if not isinstance(spec, dict):
        return None
    names = spec.get("names")
    group, kind = spec.get("group"), names.get("kind") if isinstance(names, dict) else None
    if not isinstance(group, str) or not isinstance(kind, str) or not group or not kind:
        return None
    versions = [
        str(v["name"])
        for v in spec.get("versions") or []
        if isinstance(v, dict) and v.get("name") and v.get("served") is True
    ]
    return group, kind, versions


def _unlisted_owner(doc: dict[str, Any], owner: dict[str, Any], deleted: set[str]) -> str | None:
    """The deleted object behind an owner the cluster facts do not list: the owner itself, or for a
    Deployment's ReplicaSet (`<deployment>-<pod-template-hash>`) the Deployment."""
    namespace = doc["_dra"]["namespace"]
    kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
    direct = f"{kind}/{namespace}/{name}"
    if direct in deleted:
        return direct
    template_hash = ((doc.get("metadata") or {}).get("labels") or {}).get("pod-template-hash")
    if kind == "ReplicaSet" and template_hash and name.endswith(f"-{template_hash}"):
        deployment = f"Deployment/{namespace}/{name[: -len(template_hash) - 1]}"
        if deployment in deleted:
            return deployment
    return None


def _mark_removed_with_owner(live: list[dict[str, Any]], deleted: set[str]) -> None:
    """Set `_dra.removed_with` on each live object that an object this change deletes owns, through any
    chain of owner references (a Deployment's ReplicaSet's pods, a Job's pods, a pod's generated claims):
    the garbage collector removes it with its owner, so it is no user to keep a class or template for."""
    if not deleted:
        return
    by_uid = {str(uid): doc for doc in live if (uid := (doc.get("metadata") or {}).get("uid"))}

    def owner_deleted(doc: dict[str, Any], seen: set[int]) -> str | None:
        if doc["_dra"]["ref"] in deleted:
            return str(doc["_dra"]["ref"])
        if id(doc) in seen:  # an owner loop (never made by Kubernetes): stop
            return None
        seen.add(id(doc))
        for owner in (doc.get("metadata") or {}).get("ownerReferences") or []:
            if not isinstance(owner, dict):
                continue
            parent = by_uid.get(str(owner.get("uid")))
            found = (
                owner_deleted(parent, seen) if parent is not None else _unlisted_owner(doc, owner, deleted)
            )
            if found is not None:
                return found
        return None

    for doc in live:
        if doc["_dra"]["ref"] in deleted:
            continue
        found = owner_deleted(doc, set())
        if found is not None:
            doc["_dra"]["removed_with"] = found


def build_input(
    *,
    head: Sequence[Manifest],
    base: Sequence[Manifest],
    plan: Plan,
    revision: Revision = Revision(),
    base_sha: str | None = None,
    has_base: bool = False,
    cluster: ClusterFacts | None = None,
    capacity: dict[str, Any] | None = None,
    class_changes: list[dict[str, Any]] | None = None,
    params: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The whole input document for one check."""
    head_docs = {manifest.ref: object_doc(manifest) for manifest in head}
    # A base object parsed from the same file as the head's is the same Manifest: its doc is made once.
    same = {id(manifest): head_docs[manifest.ref] for manifest in head}
    base_docs = {
        manifest.ref: same.get(id(manifest)) or object_doc(manifest, judged=False) for manifest in base
    }
    head_configs = _with_driver_config(head, head_docs)
    _with_driver_config(base, base_docs, shared=set(map(id, head_docs.values())))
    changes = [
        {
            "op": change.op,
            "ref": str(change.ref),
            "stage": change.stage,
            "old": base_docs.get(change.ref) if change.old is not None else None,
            "new": head_docs.get(change.ref) if change.new is not None else None,
            "driver_change": change.driver_change,
            "driver_workloads": _config_readers(change.ref, head_configs, head_docs, base_docs),
        }
        for change in plan.changes
    ]
    params = dict(params or {})
    cluster_doc = None
    release_block = None
    if cluster is not None:
        live = [object_doc(manifest, judged=False) for manifest in cluster.objects]
        _mark_removed_with_owner(live, {str(c.ref) for c in plan.changes if c.op == "delete"})
        cluster_doc = {
            "version": cluster.version,
            "served": cluster.served,
            "deprecated": cluster.deprecated,
            "kinds": cluster.kinds,
            "unavailable": cluster.unavailable,
            "objects": live,
            "index": build_index(live),
        }
    else:
        # Offline the rules judge API versions against a release's table (params.kubernetes_version).
        release = parse_release(params.get("kubernetes_version", DEFAULT_RELEASE))
        release_block = release_doc(((m.ref.group, m.ref.kind) for m in head), release)
    return {
        "revision": {
            "sha": revision.sha,
            "parent": revision.parent,
            "message": revision.message,
            "author": revision.author,
            "signed": revision.signed,
        },
        "base": {"sha": base_sha} if has_base else None,
        "objects": list(head_docs.values()),
        "base_objects": list(base_docs.values()),
        "changes": changes,
        "cluster": cluster_doc,
        "index": build_index(head_docs.values()),
        "base_index": build_index(base_docs.values()),
        "release": release_block,
        "capacity": capacity,
        "class_changes": class_changes or [],
        "params": params,
    }
