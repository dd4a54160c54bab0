"""The device map's data (pure): every published device with its state and holder, from the objects the
inventory reads (ResourceSlices, ResourceClaims, Nodes, DeviceTaintRules).

Devices are those `dra.devices.read_slices` finds and "allocated" is what `dra.devices.allocated_devices`
says, the same reading `inventory` counts with (`dra.simulate`), so the totals here add up to its totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.dra.devices import read_slices
from reconciler.model.readers import as_dict, as_list

FREE, ALLOCATED, TAINTED, NODE_NOT_READY = "free", "allocated", "tainted", "node-not-ready"
# What a claim's annotation may show at most (a long value is cut, and said to be).
ANNOTATION_CHARS = 200
# Annotations never shown: a whole object's copy (kubectl's) is no note for a person.
HIDDEN_ANNOTATIONS = frozenset({"kubectl.kubernetes.io/last-applied-configuration"})


@dataclass
class DeviceCell:
    driver: str
    pool: str
    name: str
    node: str  # "" for a device not local to one node
    state: str  # free | allocated | tainted | node-not-ready
    claim: str = ""  # namespace/name of the claim holding it
    namespace: str = ""
    pods: list[str] = field(default_factory=list)  # pods the claim is reserved for
    taints: list[str] = field(default_factory=list)  # key=value:effect
    notes: dict[str, str] = field(default_factory=dict)  # the claim's labels and annotations
    workloads: list[str] = field(
        default_factory=list
    )  # Kind/name owning each pod (a Deployment for a ReplicaSet's)
    target: str = ""  # the dra-gitops target whose ApplySet holds the claim (or its pod)

    @property
    def allocated(self) -> bool:
        return bool(self.claim)


@dataclass
class DeviceFilter:
    driver: str = ""
    node: str = ""
    namespace: str = ""

    def keeps(self, cell: DeviceCell) -> bool:
        return (
            (not self.driver or cell.driver == self.driver)
            and (not self.node or cell.node == self.node)
            and (not self.namespace or cell.namespace == self.namespace)
        )

    @property
    def active(self) -> bool:
        return bool(self.driver or self.node or self.namespace)


@dataclass
class Totals:
    devices: int = 0
    allocated: int = 0

    @property
    def free(self) -> int:
        return self.devices - self.allocated


def _holders(claims: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], Mapping[str, Any]]:
    """Device key -> the claim whose allocation holds it (admin-access results hold none, as in
    `allocated_devices`)."""
    held: dict[tuple[str, str, str], Mapping[str, Any]] = {}
    for claim in claims:
        allocation = as_dict(as_dict(claim.get("status")).get("allocation"))
        for result in as_list(as_dict(allocation.get("devices")).get("results")):
            if isinstance(result, Mapping) and not result.get("adminAccess"):
                key = (
                    str(result.get("driver", "")),
                    str(result.get("pool", "")),
                    str(result.get("device", "")),
                )
                held.setdefault(key, claim)
    return held


def _notes(claim: Mapping[str, Any]) -> dict[str, str]:
    meta = as_dict(claim.get("metadata"))
    notes = {f"label {k}": str(v) for k, v in as_dict(meta.get("labels")).items()}
    for key, value in as_dict(meta.get("annotations")).items():
        if key in HIDDEN_ANNOTATIONS:
            continue
        text = str(value)
        notes[f"annotation {key}"] = text if len(text) <= ANNOTATION_CHARS else text[:ANNOTATION_CHARS] + "…"
    return notes


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def build_device_cells(
    slices: Iterable[Mapping[str, Any]],
    claims: Iterable[Mapping[str, Any]],
    nodes: Iterable[Mapping[str, Any]],
    taint_rules: Iterable[Mapping[str, Any]] = (),
    set_ids: Mapping[str, str] | None = None,
) -> list[DeviceCell]:
    """Every device, ordered by driver, node, pool and name, with its state and holder."""
    claims = list(claims)
    held = _holders(claims)
    ready = {str(as_dict(n.get("metadata")).get("name")): _node_ready(n) for n in nodes}
    cells = []
    for device in read_slices(slices, taint_rules).devices:
        claim = held.get(device.key)
        node = device.node_name or ""
        taints = [_taint_text(t) for t in device.taints]
        if claim is not None:
            state = ALLOCATED
        elif node and not ready.get(node, False):
            state = NODE_NOT_READY
        elif any(str(t.get("effect")) in ("NoSchedule", "NoExecute") for t in device.taints):
            state = TAINTED
        else:
            state = FREE
        cell = DeviceCell(device.driver, device.pool, device.name, node, state, taints=taints)
        if claim is not None:
            meta = as_dict(claim.get("metadata"))
            cell.namespace = str(meta.get("namespace") or "")
            cell.claim = f"{cell.namespace}/{meta.get('name')}"
            cell.pods = [
                str(r.get("name"))
                for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
                if isinstance(r, Mapping) and r.get("name")
            ]
            cell.notes = _notes(claim)
            cell.target = _target_of(claim, set_ids or {})
        cells.append(cell)
    cells.sort(key=lambda c: (c.driver, c.node, c.pool, c.name))
    return cells


@dataclass
class PendingClaim:
    """A claim without an allocation, and the pods that wait for it with the scheduler's word on why."""

    claim: str  # namespace/name
    namespace: str
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (pod, why)
    target: str = ""


PART_OF_LABEL = "applyset.kubernetes.io/part-of"


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_dict(obj.get("metadata"))


def _workload(pod: Mapping[str, Any]) -> str:
    """`Kind/name` of what owns a pod (a Deployment for a ReplicaSet named `<deployment>-<hash>`)."""
    for owner in as_list(_meta(pod).get("ownerReferences")):
        if not isinstance(owner, Mapping):
            continue
        kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
        if kind == "ReplicaSet" and "-" in name:
            return f"Deployment/{name.rsplit('-', 1)[0]}"
        return f"{kind}/{name}"
    return ""


def _claims_of(pod: Mapping[str, Any]) -> list[str]:
    """The names of the claims a pod uses (its own, and those made for it from templates)."""
    names = [
        str(ref.get("resourceClaimName"))
        for ref in as_list(as_dict(pod.get("spec")).get("resourceClaims"))
        if isinstance(ref, Mapping) and ref.get("resourceClaimName")
    ]
    names += [
        str(st.get("resourceClaimName"))
        for st in as_list(as_dict(pod.get("status")).get("resourceClaimStatuses"))
        if isinstance(st, Mapping) and st.get("resourceClaimName")
    ]
    return names


def _why_waiting(pod: Mapping[str, Any]) -> str:
    for cond in as_list(as_dict(pod.get("status")).get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "PodScheduled" and cond.get("status") != "True":
            return str(cond.get("message") or cond.get("reason") or "not scheduled")
    return str(as_dict(pod.get("status")).get("phase") or "waiting")


def _target_of(obj: Mapping[str, Any], set_ids: Mapping[str, str]) -> str:
    return set_ids.get(str(as_dict(_meta(obj).get("labels")).get(PART_OF_LABEL) or ""), "")


def link_holders(
    cells: Iterable[DeviceCell], pods: Iterable[Mapping[str, Any]], set_ids: Mapping[str, str] | None = None
) -> None:
    """Each allocated cell's pods' workloads, and the target of its claim (or of a pod of it)."""
    ids = set_ids or {}
    by_name = {f"{_meta(p).get('namespace')}/{_meta(p).get('name')}": p for p in pods}
    for cell in cells:
        if not cell.claim:
            continue
        found = [by_name.get(f"{cell.namespace}/{pod}") for pod in cell.pods]
        cell.workloads = sorted({w for p in found if p is not None and (w := _workload(p))})
        if not cell.target:
            cell.target = next((t for p in found if p is not None and (t := _target_of(p, ids))), "")


def pending_claims(
    claims: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    set_ids: Mapping[str, str] | None = None,
) -> list[PendingClaim]:
    """Claims without an allocation, with each pod waiting for one and why (its PodScheduled message)."""
    ids = set_ids or {}
    users: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        namespace = str(_meta(pod).get("namespace") or "")
        for name in _claims_of(pod):
            users.setdefault(f"{namespace}/{name}", []).append(pod)
    out = []
    for claim in claims:
        if as_dict(as_dict(claim.get("status")).get("allocation")):
            continue
        namespace = str(_meta(claim).get("namespace") or "")
        key = f"{namespace}/{_meta(claim).get('name')}"
        waiting = [(str(_meta(p).get("name")), _why_waiting(p)) for p in users.get(key, [])]
        out.append(PendingClaim(key, namespace, waiting, _target_of(claim, ids)))
    return sorted(out, key=lambda p: p.claim)


def _node_ready(node: Mapping[str, Any]) -> bool:
    for cond in as_list(as_dict(node.get("status")).get("conditions")):
        if isinstance(cond, Mapping) and cond.get("type") == "Ready":
            return cond.get("status") == "True"
    return False


def totals_by_driver(cells: Iterable[DeviceCell]) -> dict[str, Totals]:
    out: dict[str, Totals] = {}
    for cell in cells:
        t = out.setdefault(cell.driver, Totals())
        t.devices += 1
        t.allocated += int(cell.allocated)
    return dict(sorted(out.items()))
