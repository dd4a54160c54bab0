"""Live cluster state for `check --cluster`: what the policy input's `cluster` block and `capacity` need.

Reads only (get/list and discovery), so the read-only `dra-reader` role in deploy/ is enough.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.objects import deprecated_versions, require_dra
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
    )
