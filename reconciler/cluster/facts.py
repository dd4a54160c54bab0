"""Live cluster state for `check --cluster`: what the policy input's `cluster` block and `capacity` need.

Reads only (get/list and discovery), so the read-only `dra-reader` role in deploy/ is enough, but for the
ConfigMaps and Secrets the driver workloads read (got one by name each, kept as a digest).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from reconciler.cluster.client import ClusterClient, Forbidden
from reconciler.cluster.objects import deprecated_versions, require_dra
from reconciler.model import dra
from reconciler.model.dra import DRA_GROUP
from reconciler.model.generators import TEMPLATE_GENERATORS
from reconciler.model.objects import Manifest
from reconciler.model.scope import live_ref
from reconciler.policy.inputdoc import ClusterFacts

# (group, kind) of everything the rules and the capacity simulation look at, in the order they are read.
LIVE_KINDS: tuple[tuple[str, str], ...] = (
    ("", "Namespace"),
    ("", "Node"),
    ("", "Pod"),
    ("apps", "DaemonSet"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    (DRA_GROUP, "DeviceClass"),
    (DRA_GROUP, "ResourceClass"),
    (DRA_GROUP, "ResourceClaimTemplate"),
    (DRA_GROUP, "ResourceClaim"),
    (DRA_GROUP, "ResourceSlice"),
    (DRA_GROUP, "DeviceTaintRule"),
    ("scheduling.k8s.io", "PriorityClass"),  # the capacity prediction's pod order
)


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    """Drop managedFields: large, never read by a rule."""
    meta = body.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        body = {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return body


def collect_facts(client: ClusterClient, progress: Callable[[str], None] | None = None) -> ClusterFacts:
    """Server version, the versions of every group and the kinds each serves (the resource list of every
    group version, as `kubectl api-resources` reads them), and the live objects of `LIVE_KINDS`."""
    version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    require_dra(served, version)
    groups = {name: list(info.versions) for name, info in client.groups().items()}
    served_kinds = client.served_kinds()
    objects: list[Manifest] = []
    # Objects whose controllers create claim templates at run time count as providing them (none when the
    # cluster does not serve their kind).
    generators = tuple((g.group, g.kind) for g in TEMPLATE_GENERATORS)
    for group, kind in LIVE_KINDS + generators:
        for item in client.list_kind(group, kind):
            body = _strip(item)
            objects.append(Manifest(body=body, ref=live_ref(body), path="", line=0))
    configs = driver_configs(client, objects, progress)
    if progress:
        progress(f"cluster {version}: {len(objects)} live objects, {DRA_GROUP} {', '.join(served)}")
    if progress and served_kinds.unavailable:
        unread = ", ".join(served_kinds.unavailable)
        progress(f"discovery could not read {unread}: their kinds are not judged")
    return ClusterFacts(
        version=version,
        served=groups,
        deprecated={DRA_GROUP: sorted(deprecated_versions(served, version))},
        objects=objects,
        kinds=served_kinds.kinds,
        unavailable=served_kinds.unavailable,
        namespaced=served_kinds.namespaced,
        configs=configs,
    )


def driver_configs(
    client: ClusterClient, objects: Sequence[Manifest], progress: Callable[[str], None] | None = None
) -> list[Manifest]:
    """The ConfigMaps and Secrets the live driver workloads read (volumes, projected, env, envFrom), each
    got by name, and only those: kept as their content's digest (no value is kept, logged or shown), so a
    config-only driver change can be judged against the cluster. One the credentials may not read is
    left out, saying so (its change is then judged as new content)."""
    with dra.driver_hints(dra.hints_of(objects)):
        wanted = sorted(
            {
                (kind, m.ref.namespace, name)
                for m in objects
                if m.kind in dra.DRIVER_WORKLOAD_KINDS and dra.is_driver_workload(m.body)
                for kind, name in dra.mounted_config(m.body)
            }
        )
    out: list[Manifest] = []
    forbidden: list[str] = []
    for kind, namespace, name in wanted:
        resource = client.find_kind("", kind)
        if resource is None:
            continue
        try:
            body = client.get(resource, namespace, name)
        except Forbidden:
            forbidden.append(f"{kind}/{namespace}/{name}")
            continue
        if body is not None:
            reduced = dra.content_digest_only(body)
            out.append(Manifest(body=reduced, ref=live_ref(reduced), path="", line=0))
    if progress and forbidden:
        progress(
            f"cannot read {', '.join(forbidden)} (forbidden): a change of what driver workloads read there "
            "is judged as new content"
        )
    return out
