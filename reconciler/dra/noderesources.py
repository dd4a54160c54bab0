"""Extended resources (``example.com/gpu: 1``) against node allocatable, as NodeResourcesFit does (pure).

A pod's request of a resource is the larger of the sum over its containers and the largest init
container (a request defaults to its limit, and extended resources are never overcommitted). A node
fits when its ``status.allocatable`` minus what the pods bound to it request covers the pod's request;
otherwise the scheduler says ``Insufficient <name>``. Only extended resources are judged (a name with a
domain outside ``kubernetes.io``): cpu and memory are not modelled. A name a DeviceClass maps
(``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/<class>`` of a class
that exists) is DRA's when the node does not advertise it, and is left to the caller; the implicit name
of a class that does not exist is a resource no node has (``Insufficient ...``), as the scheduler says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction
from typing import Any

from reconciler.dra.quantity import format_quantity, quantity_or_none
from reconciler.model.readers import as_dict, as_list

__all__ = [
    "DRA_ALIAS_PREFIX",
    "extended_requests",
    "insufficient",
    "is_extended",
    "node_allocatable",
]

DRA_ALIAS_PREFIX = "deviceclass.resource.kubernetes.io/"


def is_extended(name: str) -> bool:
    """Kubernetes' IsDRAExtendedResourceName, less the quota prefix: a domain that is not kubernetes.io,
    or the implicit name of a DeviceClass (``deviceclass.resource.kubernetes.io/<class>``)."""
    if name.startswith(DRA_ALIAS_PREFIX):
        return True
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _container_requests(container: Mapping[str, Any], wanted: Callable[[str], bool]) -> dict[str, Fraction]:
    resources = as_dict(container.get("resources"))
    merged = {**as_dict(resources.get("limits")), **as_dict(resources.get("requests"))}
    out: dict[str, Fraction] = {}
    for name, raw in merged.items():
        q = quantity_or_none(raw)
        if wanted(str(name)) and q:
            out[str(name)] = q
    return out


def extended_requests(
    spec: Mapping[str, Any], wanted: Callable[[str], bool] = is_extended
) -> dict[str, Fraction]:
    """What a pod spec asks of each extended resource (of each resource `wanted` names)."""
    total: dict[str, Fraction] = {}
    for c in as_list(spec.get("containers")):
        for name, q in _container_requests(as_dict(c), wanted).items():
            total[name] = total.get(name, Fraction(0)) + q
    for c in as_list(spec.get("initContainers")):
        for name, q in _container_requests(as_dict(c), wanted).items():
            total[name] = max(total.get(name, Fraction(0)), q)
    return total


def node_allocatable(node: Mapping[str, Any]) -> dict[str, Fraction]:
    """The extended resources a Node advertises in ``status.allocatable``."""
    out = {}
    for name, raw in as_dict(as_dict(node.get("status")).get("allocatable")).items():
        q = quantity_or_none(raw)
        if is_extended(str(name)) and q is not None:
            out[str(name)] = q
    return out


def insufficient(
    wanted: Mapping[str, Fraction],
    allocatable: Mapping[str, Fraction],
    used: Mapping[str, Fraction],
    dra_names: Iterable[str] = (),
) -> tuple[str, str] | None:
    """(resource, detail) of the first extended resource the node cannot give, or None."""
    mapped = set(dra_names)
    for name in sorted(wanted):
        have = allocatable.get(name)
        if have is None and name in mapped:
            continue  # DRA's extended-resource mapping, not a device plugin's resource
        free = (have or Fraction(0)) - used.get(name, Fraction(0))
        if wanted[name] > free:
            return name, (
                f"asks {format_quantity(wanted[name])} {name}, the node has "
                f"{format_quantity(max(free, Fraction(0)))} free of {format_quantity(have or Fraction(0))}"
            )
    return None
