"""Sharding the targets' Leases over the live replicas, so each holds about ceil(targets / replicas).

Replicas announce themselves the way kube-apiserver's identity Leases do: each keeps a heartbeat Lease
`dra-gitops-replica.<identity>` (labelled `dra-gitops.io/replica`) in the controller's namespace, renewed
with its targets' Leases. A replica is live while its heartbeat is held and has changed within its
duration on *our* clock (the same expiry rule as any Lease, so clock skew cannot hide a live replica).

From the live set every replica computes its fair share, ceil(targets / live replicas), and holds no more:
it keeps what it holds up to the share and gives up the surplus it prefers least (never a target in the
middle of a pass: the manager asks first); it takes free or expired Leases only while under its share, the
ones it prefers most first. Preference is rendezvous hashing (highest random weight) of the target's name
with the replica's identity, so two replicas under their share rarely reach for the same free Lease, and a
joining or leaving replica moves only about its share. A Lease that stays free for a whole lease duration
is taken by anyone (a target no replica counts in its share, e.g. while their configurations differ).

The election itself stays client-go's (reconciler/cluster/lease.py): sharding only decides which Leases a
replica contends for, so two replicas never both hold a target whatever their views of the live set.
"""

from __future__ import annotations

import hashlib
import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from reconciler.cluster.client import Conflict, NotFound
from reconciler.cluster.lease import LEASE_API_VERSION, LeaseLock, LeaseRecord
from reconciler.errors import DraGitopsError

log = logging.getLogger(__name__)

REPLICA_LABEL = "dra-gitops.io/replica"
HEARTBEAT_PREFIX = "dra-gitops-replica."  # a dot: no target's Lease (dra-gitops-<DNS label>) has one
_PLAIN = re.compile(r"^[a-z0-9]([-a-z0-9]{0,198}[a-z0-9])?$")


def heartbeat_name(identity: str) -> str:
    """The heartbeat Lease's name: the identity itself when it is a valid name part, else a slug of it
    plus a hash (pod names are; `host_1a2b` is not)."""
    if _PLAIN.match(identity):
        return HEARTBEAT_PREFIX + identity
    slug = re.sub(r"[^a-z0-9-]+", "-", identity.lower()).strip("-")[:60] or "replica"
    return f"{HEARTBEAT_PREFIX}{slug}-{hashlib.sha256(identity.encode()).hexdigest()[:10]}"


def fair_share(targets: int, replicas: int) -> int:
    return math.ceil(targets / max(1, replicas))


def preference(identity: str, target: str) -> int:
    """The rendezvous weight of `target` for `identity`: the same on every replica, uniform over pairs."""
    digest = hashlib.sha256(f"{target}\0{identity}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def by_preference(identity: str, targets: Iterable[str]) -> list[str]:
    """`targets`, the ones `identity` prefers most first (ties, unlikely, by name)."""
    return sorted(targets, key=lambda target: (-preference(identity, target), target))


class Membership:
    """This replica's heartbeat Lease, and the live replicas as their heartbeats show them."""

    def __init__(
        self, heartbeat: LeaseLock, duration: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.heartbeat = heartbeat
        self.identity = heartbeat.identity
        self.duration = duration
        self._clock = clock
        # Per heartbeat Lease of another replica: its record, when we first saw that record, its
        # resourceVersion (the precondition of deleting it).
        self._seen: dict[str, tuple[LeaseRecord, float, str]] = {}
        self._live: frozenset[str] = frozenset({self.identity})

    def observe(self, heartbeats: Iterable[Mapping[str, Any]], listed_at: float) -> None:
        """Take note of every other replica's heartbeat (the Leases a LIST that answered at `listed_at`
        found with the label)."""
        others: dict[str, tuple[LeaseRecord, str]] = {}
        for lease in heartbeats:
            meta = lease.get("metadata") or {}
            name = str(meta.get("name") or "")
            if name != self.heartbeat.name:
                others[name] = (LeaseRecord.of(lease), str(meta.get("resourceVersion") or ""))
        for name, (record, version) in others.items():
            seen = self._seen.get(name)
            if seen is None or seen[0] != record:
                self._seen[name] = (record, listed_at, version)
        for name in set(self._seen) - set(others):  # deleted
            del self._seen[name]
        live = {self.identity}
        now = self._clock()
        live.update(record.holder for record, at, _ in self._seen.values() if self._alive(record, at, now))
        if live != self._live:
            log.info("%s: live replicas %s", self.identity, ", ".join(sorted(live)))
        self._live = frozenset(live)

    @staticmethod
    def _alive(record: LeaseRecord, seen_at: float, now: float) -> bool:
        return bool(record.holder) and now < seen_at + record.duration_seconds

    def live(self) -> frozenset[str]:
        """The live replicas as of the last round, this one always among them."""
        return self._live

    def next_expiry(self) -> float | None:
        """When (our clock) the next live replica's heartbeat expires unless renewed."""
        expiries = [at + record.duration_seconds for record, at, _ in self._seen.values() if record.holder]
        now = self._clock()
        upcoming = [moment for moment in expiries if moment > now]
        return min(upcoming) if upcoming else None

    def remove_departed(self) -> None:
        """Delete the heartbeats of replicas that stopped (released) or died (unrenewed for two lease
        durations), each only as we read it (a precondition on its resourceVersion)."""
        now = self._clock()
        for name, (record, at, version) in list(self._seen.items()):
            if record.holder and now < at + 2 * record.duration_seconds:
                continue
            where = f"Lease/{self.heartbeat.namespace}/{name}"
            try:
                resource = self.heartbeat.client.resource_for(LEASE_API_VERSION, "Lease")
                self.heartbeat.client.request(
                    "DELETE",
                    resource.path(self.heartbeat.namespace, name),
                    body={"preconditions": {"resourceVersion": version}},
                    where=where,
                )
            except (Conflict, NotFound):
                pass  # renewed since (a slow replica, not a dead one) or removed by another replica
            except DraGitopsError as exc:
                log.warning("%s: cannot remove a departed replica's heartbeat: %s", where, exc.detail)
                continue
            else:
                log.info(
                    "%s: removed the heartbeat of departed replica %s", where, record.holder or "(stopped)"
                )
            del self._seen[name]
