"""Server defaults taken out of pod template parts, so a live object compares with its manifest (pure).

kube-apiserver writes defaults into every PodSpec it stores: `fieldRef.apiVersion: v1` in env, `type: ""`
on hostPath volumes, `defaultMode: 420` on configMap/secret/projected/downwardAPI volumes, an empty
`resources`, and (with ProcMountType) `procMount: Default`. A digest of what a driver pod runs must not
change when those appear, or a live canary would never match the manifest of its main workload.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

__all__ = ["DEFAULT_MODE", "ref_sources", "without_container_defaults", "without_volume_defaults"]

DEFAULT_MODE = 420  # 0644, the defaultMode of configMap, secret, projected and downwardAPI volumes
_MODE_VOLUMES = ("configMap", "secret", "projected", "downwardAPI")


def ref_sources(items: Any) -> Iterator[dict[str, Any]]:
    """The mappings holding fieldRef/resourceFieldRef: env items' valueFrom, downwardAPI items."""
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            value_from = item.get("valueFrom")
            yield value_from if isinstance(value_from, dict) else item


def _field_refs(items: Any) -> None:
    for source in ref_sources(items):
        field_ref = source.get("fieldRef")
        if isinstance(field_ref, dict) and field_ref.get("apiVersion") == "v1":
            del field_ref["apiVersion"]
        resource_ref = source.get("resourceFieldRef")
        if isinstance(resource_ref, dict) and str(resource_ref.get("divisor")) == "0":
            del resource_ref["divisor"]


def without_container_defaults(container: dict[str, Any]) -> dict[str, Any]:
    """A copy of a container (or of some of its fields) without the defaults the server adds."""
    out = copy.deepcopy(container)
    if out.get("resources") == {}:
        del out["resources"]
    _field_refs(out.get("env"))
    security = out.get("securityContext")
    if isinstance(security, dict):
        if security.get("procMount") == "Default":
            del security["procMount"]
        if not security:
            del out["securityContext"]
    return out


def without_volume_defaults(volume: Any) -> Any:
    """A copy of a volume without the defaults the server adds."""
    if not isinstance(volume, dict):
        return volume
    out = copy.deepcopy(volume)
    host_path = out.get("hostPath")
    if isinstance(host_path, dict) and host_path.get("type") == "":
        del host_path["type"]
    for kind in _MODE_VOLUMES:
        source = out.get(kind)
        if isinstance(source, dict) and source.get("defaultMode") == DEFAULT_MODE:
            del source["defaultMode"]
    downward = out.get("downwardAPI")
    if isinstance(downward, dict):
        _field_refs(downward.get("items"))
    projected = out.get("projected")
    sources = (projected.get("sources") or []) if isinstance(projected, dict) else []
    for source in sources:
        if isinstance(source, dict) and isinstance(source.get("downwardAPI"), dict):
            _field_refs(source["downwardAPI"].get("items"))
    return out
