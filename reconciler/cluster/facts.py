"""Live cluster state for `check --cluster`: what the policy input's `cluster` block and `capacity` need.

Reads only (get/list and discovery), so the read-only `dra-reader` role in deploy/ is enough.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.errors import EnvironmentProblem
from reconciler.model.dra import DRA_GROUP
from reconciler.model.objects import Manifest, ref_of
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
)

# Which served resource.k8s.io versions a cluster of a given minor release calls deprecated (DRA.md §1):
# once v1 is served, the alpha and beta versions are only for old manifests; v1beta2 is deprecated from 1.36.
_ALWAYS_DEPRECATED_WITH_V1 = ("v1alpha2", "v1alpha3", "v1beta1")


def _minor(version: str) -> int:
    try:
        return int(version.lstrip("v").split(".")[1].rstrip("+"))
    except (IndexError, ValueError):
        return 0


def deprecated_versions(server_version: str, served: list[str]) -> list[str]:
    if "v1" not in served:
        return []
    deprecated = [v for v in served if v in _ALWAYS_DEPRECATED_WITH_V1]
    if "v1beta2" in served and _minor(server_version) >= 36:
        deprecated.append("v1beta2")
    return deprecated


def _strip(body: dict[str, Any]) -> dict[str, Any]:
    """Drop managedFields: large, never read by a rule."""
    meta = body.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        body = {**body, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    return body


def collect_facts(client: ClusterClient, progress: Callable[[str], None] | None = None) -> ClusterFacts:
    """Server version, served DRA versions and the live objects of `LIVE_KINDS`."""
    version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    if not served:
        raise EnvironmentProblem(
            f"the cluster ({version}) does not serve {DRA_GROUP}: DRA is not enabled "
            "(v1 is served by default from Kubernetes 1.34; 1.32/1.33 need --runtime-config="
            "resource.k8s.io/v1beta1=true and the DynamicResourceAllocation feature gate)",
            where=client.host,
        )
    objects: list[Manifest] = []
    for group, kind in LIVE_KINDS:
        for item in client.list_kind(group, kind):
            body = _strip(item)
            objects.append(Manifest(body=body, ref=ref_of(body), path="", line=0))
    if progress:
        progress(f"cluster {version}: {len(objects)} live objects, {DRA_GROUP} {', '.join(served)}")
    return ClusterFacts(
        version=version,
        served={DRA_GROUP: served},
        deprecated={DRA_GROUP: deprecated_versions(version, served)},
        objects=objects,
    )
