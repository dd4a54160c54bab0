"""The DRA group and its versions, for the DRA accessors (:mod:`reconciler.model.dra`).

The field readers they share are :mod:`reconciler.model.readers`.
"""

from __future__ import annotations

from typing import Any

from reconciler.model.objects import api_group, api_version_only
from reconciler.model.readers import api_version_of, as_dicts, as_str, dig, kind_of

DRA_GROUP = "resource.k8s.io"
DRA_VERSIONS = ("v1alpha1", "v1alpha2", "v1alpha3", "v1beta1", "v1beta2", "v1")
CLASSIC_VERSIONS = frozenset({"v1alpha1", "v1alpha2"})
# The fields of a v1 request's `exactly` that v1beta1 requests carry flat
FLAT_REQUEST_FIELDS = (
    "deviceClassName",
    "selectors",
    "allocationMode",
    "count",
    "adminAccess",
    "tolerations",
    "capacity",
)


def is_dra_group(api_version: str) -> bool:
    """True for resource.k8s.io/<any version>; a bare "v1" or another group is not DRA."""
    return isinstance(api_version, str) and "/" in api_version and api_group(api_version) == DRA_GROUP


def dra_kind(body: Any) -> str | None:
    """The kind of a resource.k8s.io object, None for anything else."""
    return kind_of(body) if is_dra_group(api_version_of(body)) else None


def is_classic(body: Any) -> bool:
    return api_version_only(api_version_of(body)) in CLASSIC_VERSIONS


def cel_expressions(selectors: Any) -> tuple[str, ...]:
    exprs = (as_str(dig(sel, "cel", "expression")) for sel in as_dicts(selectors))
    return tuple(e for e in exprs if e is not None)
