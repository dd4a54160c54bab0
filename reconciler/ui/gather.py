"""The cluster edge of the dashboard: the targets' states (`loop/store/state.py`, what `status -o json` prints)
and the device data (the objects `inventory` reads, counted by the same code).

Read-only: GET and LIST of ConfigMaps in the state namespaces, Nodes, driver workloads and pods,
DeviceClasses, ResourceSlices, ResourceClaims and DeviceTaintRules, all within the `dra-reader` role.
Secrets are never read.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from reconciler.cluster.applyset import applyset_id
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.drivers import list_driver_pods, list_driver_workloads
from reconciler.cluster.inventory import build_inventory
from reconciler.cluster.objects import require_dra
from reconciler.errors import DraGitopsError
from reconciler.loop.store.operations import cluster_targets
from reconciler.loop.store.state import StateStore
from reconciler.model.dra import DRA_GROUP
from reconciler.ui.devices import (
    DeviceCell,
    PendingClaim,
    build_device_cells,
    link_holders,
    pending_claims,
    totals_by_driver,
)
from reconciler.ui.places import Place, home_place
from reconciler.ui.reports import GitReports
from reconciler.ui.targets import TargetView


@dataclass
class DeviceData:
    cells: list[DeviceCell]
    warnings: list[str]
    clusters: list[tuple[str, str]] = field(default_factory=list)  # (key, label) of every cluster
    cluster: str = ""  # the key of the cluster this map is of
    error: str = ""  # why that cluster could not be read
    pending: list[PendingClaim] = field(default_factory=list)  # claims waiting for a device
    live: dict[str, str] = field(default_factory=dict)  # target -> its live (last good) commit


class ClusterData:
    """What the pages show, read when a page is asked for (nothing is held between requests but the
    Git caches of `GitReports`)."""

    def __init__(
        self,
        client: ClusterClient,
        *,
        targets: Sequence[tuple[str, str]] | None = None,
        state_namespace: str = "dra-gitops",
        git: GitReports | None = None,
        places: Sequence[Place] = (),
        place_of: dict[str, Place] | None = None,
    ) -> None:
        """`places`: every cluster the pages read, the controller's first (default: `client`'s alone);
        `place_of`: the cluster of each target that is not in the first."""
        self.client = client
        self.wanted = list(targets) if targets is not None else None
        self.state_namespace = state_namespace
        self.git = git
        self.places = list(places) or [home_place(client, "this cluster")]
        self.place_of = place_of or {}

    def _place(self, name: str) -> Place:
        return self.place_of.get(name) or self.places[0]

    def _names(self) -> list[tuple[str, str]]:
        if self.wanted is not None:
            return self.wanted
        return [(name, self.state_namespace) for name in cluster_targets(self.client, self.state_namespace)]

    def _view(self, name: str, namespace: str, commits: bool, extra: Sequence[str] = ()) -> TargetView:
        place = self._place(name)
        cluster = (place.label, place.key) if place.own else ("", "")
        try:
            state = place.read(lambda client: StateStore(client, name, namespace).load())
        except DraGitopsError as exc:
            why = f"its cluster ({place.where}) cannot be read: {exc}" if place.own else str(exc)
            return TargetView(name, namespace, {}, error=why, cluster=cluster)
        status = state.to_json()
        view = TargetView(name, namespace, status, cluster=cluster)
        if commits and self.git is not None:
            shas = [status.get("lastGood"), (status.get("lastAttempted") or {}).get("sha")]
            shas += [(status.get("inProgress") or {}).get("sha"), *extra]
            shas += [r.get("sha") for r in status.get("history") or []]
            # What promotion names: the eligible commit, the one awaiting approval, the last verified.
            shas += [
                (status.get("promotion") or {}).get("eligible"),
                (status.get("approval") or {}).get("sha"),
            ]
            shas += [v.get("sha") for v in (status.get("verified") or [])[:1]]
            view.commits = self.git.commits(name, [s for s in shas if s])
        return view

    def targets(self) -> list[TargetView]:
        return [self._view(name, namespace, commits=True) for name, namespace in self._names()]

    def target(self, name: str, shas: Sequence[str] = ()) -> TargetView | None:
        """One target; `shas`: commits the page names besides those of the state (a commit's own page)."""
        for known, namespace in self._names():
            if known == name:
                return self._view(known, namespace, commits=True, extra=shas)
        return None

    def version(self) -> str:
        """A fingerprint of every target's state (resourceVersions): it changes when anything is recorded."""
        parts = []
        for name, namespace in self._names():
            try:
                live = self._place(name).read(partial(_state_configmap, namespace=namespace, name=name))
            except DraGitopsError:  # its cluster is down: the others still tell their changes
                # (not the reason: it counts down, and the page would reload at every poll)
                parts.append(f"{namespace}/{name}!unreadable")
                continue
            parts.append(f"{namespace}/{name}={((live or {}).get('metadata') or {}).get('resourceVersion')}")
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]

    def devices(self, cluster: str = "") -> DeviceData | None:
        """Every device of a cluster (by key; "" the first) and its holder; the inventory's warnings, and
        one more if the totals ever differed from the inventory's (they are counted from the same reading
        of the same objects). None: no such cluster."""
        place = next((p for p in self.places if p.key == cluster), None) if cluster else self.places[0]
        if place is None:
            return None
        clusters = [(p.key, p.label) for p in self.places]
        set_ids = {applyset_id(name, namespace): name for name, namespace in self._names()}
        try:
            data = place.read(partial(_device_data, set_ids=set_ids))
        except DraGitopsError as exc:
            return DeviceData([], [], clusters, place.key, error=f"{place.label} cannot be read: {exc}")
        data.clusters, data.cluster = clusters, place.key
        data.live = self._live({d.target for d in data.cells if d.target} | {p.target for p in data.pending})
        return data

    def _live(self, names: set[str]) -> dict[str, str]:
        """The last good commit of each named target (its state ConfigMap's `lastGood`)."""
        out = {}
        for name, namespace in self._names():
            if name not in names:
                continue
            try:
                live = self._place(name).read(partial(_state_configmap, namespace=namespace, name=name))
            except DraGitopsError:
                continue
            sha = str(((live or {}).get("data") or {}).get("lastGood") or "")
            if sha:
                out[name] = sha
        return out


def _state_configmap(client: ClusterClient, namespace: str, name: str) -> dict[str, Any] | None:
    live: dict[str, Any] | None = client.get(
        client.resource_for("v1", "ConfigMap"), namespace, f"dra-gitops-{name}"
    )
    return live


def _device_data(client: ClusterClient, set_ids: dict[str, str] | None = None) -> DeviceData:
    """A cluster's devices as the inventory reads them (see `ClusterData.devices`), who holds each (the
    claim's pods, their workloads, the target) and the claims that wait."""
    objects = _read_dra_objects(client)
    inventory = build_inventory(**objects)
    cells = build_device_cells(
        objects["slices"], objects["claims"], objects["nodes"], objects["taint_rules"], set_ids
    )
    pods = client.list_kind("", "Pod")
    link_holders(cells, pods, set_ids)
    pending = pending_claims(objects["claims"], pods, set_ids)
    warnings = list(inventory.warnings)
    ours = {d: (t.devices, t.allocated) for d, t in totals_by_driver(cells).items()}
    theirs = {d: (s.devices, s.allocated) for d, s in inventory.drivers.items() if s.devices or s.allocated}
    if ours != theirs:
        warnings.append(f"the device map counts {ours} but the inventory counts {theirs}")
    return DeviceData(cells, warnings, pending=pending)


def _read_dra_objects(client: ClusterClient) -> dict[str, Any]:
    """What `collect_inventory` reads, as `build_inventory`'s arguments."""
    server_version = client.server_version()
    served = client.served_versions(DRA_GROUP)
    require_dra(served, server_version)
    workloads = list_driver_workloads(client)
    return {
        "server_version": server_version,
        "served": served,
        "preferred": client.groups()[DRA_GROUP].preferred,
        "nodes": client.list_kind("", "Node"),
        "workloads": workloads,
        "pods": list_driver_pods(client, workloads),
        "classes": client.list_kind(DRA_GROUP, "DeviceClass") + client.list_kind(DRA_GROUP, "ResourceClass"),
        "slices": client.list_kind(DRA_GROUP, "ResourceSlice"),
        "claims": client.list_kind(DRA_GROUP, "ResourceClaim"),
        "taint_rules": client.list_kind(DRA_GROUP, "DeviceTaintRule"),
    }
