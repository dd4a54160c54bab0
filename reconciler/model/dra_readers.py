"""Defensive readers shared by the DRA accessors (:mod:`reconciler.model.dra`), and the DRA group.

Manifests come from users, so nothing here trusts a field's type: a string where a list belongs reads as an
empty list, never as an exception.
"""

from __future__ import annotations

from typing import Any

from reconciler.model.objects import api_group, api_version_only

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2", "v1")
CLASSIC_VERSIONS = frozenset({"v1alpha1", "v1alpha2"})


# --- defensive readers -------------------------------------------------------------------------------


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in _list(value) if isinstance(item, dict)]


def _get(body: Any, *path: str) -> Any:
    cur = body
    for key in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(key)
    return cur


def _uniq(items: list[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _kind(body: Any) -> str:
    return str(_dict(body).get("kind") or "")


def _api_version(body: Any) -> str:
    value = _dict(body).get("apiVersion")
    return value if isinstance(value, str) else ""


def _labels(meta: Any) -> dict[str, Any]:
    return _dict(_dict(meta).get("labels"))


def _annotations(body: Any) -> dict[str, Any]:
    return _dict(_get(body, "metadata", "annotations"))


def is_dra_group(api_version: str) -> bool:
    """True for resource.k8s.io/<any version>; a bare "v1" or another group is not DRA."""
    return isinstance(api_version, str) and "/" in api_version and api_group(api_version) == DRA_GROUP


def _dra_kind(body: Any) -> str | None:
    """The kind of a resource.k8s.io object, None for anything else."""
    return _kind(body) if is_dra_group(_api_version(body)) else None


def _is_classic(body: Any) -> bool:
    return api_version_only(_api_version(body)) in CLASSIC_VERSIONS


def _cel_expressions(selectors: Any) -> tuple[str, ...]:
    exprs = (_str(_get(sel, "cel", "expression")) for sel in _dicts(selectors))
    return tuple(e for e in exprs if e is not None)
