"""Leases of many targets kept by one background thread: `LeaseManager`, over the `LeaseLock` of each.

The election itself (one Lease, client-go's rules) is :mod:`reconciler.cluster.lease`; here is the loop
that runs a round over every target's Lease each retry period and tells the controller what changed.
With `replicas_namespace` the targets are sharded over the live replicas (:mod:`.leaseshard`): a round is
then one LIST of the Leases, our heartbeat, and writes only to the Leases this replica holds or takes.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import (
    DEFAULT_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    EXPIRY_MARGIN,
    LEASE_API_VERSION,
    NOT_LISTED,
    LeaseLock,
    LeaseRecord,
    Listed,
    default_identity,
)
from reconciler.cluster.leaseshard import REPLICA_LABEL, Membership, by_preference, fair_share, heartbeat_name
from reconciler.errors import DraGitopsError

log = logging.getLogger(__name__)

LeaseCallback = Callable[[str], None]
_PARALLEL_WRITES = 8  # Lease writes a sharded round sends at once


class LeaseManager:
    """Keeps trying to hold one Lease per target in one background thread, every (jittered) retry period.

    `held(target)` is the authority a controller checks before each stage: it turns False the moment the
    renew deadline passes without a successful renewal, even while the thread is stuck in a slow request.
    `on_acquired`/`on_lost` are prompt notifications from the thread.
    """

    def __init__(
        self,
        client: ClusterClient,
        leases: Mapping[str, tuple[str, str]],
        identity: str | None = None,
        *,
        duration: float = DEFAULT_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        on_acquired: LeaseCallback | None = None,
        on_lost: LeaseCallback | None = None,
        on_requested: LeaseCallback | None = None,
        on_namespace_missing: Callable[[set[str]], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
        replicas_namespace: str | None = None,
        may_release: Callable[[str], bool] | None = None,
        guard: Callable[[], str | None] | None = None,
    ) -> None:
        """`leases` maps each target name to the (namespace, name) of its Lease; `on_requested` is called
        on the holder when another replica asked for a pass of the target; `on_namespace_missing` with
        the namespaces found gone, and True when it recreated them (their Leases are tried again at once).
        `replicas_namespace`: shard the targets over the live replicas, whose heartbeat Leases live there;
        `may_release(target)` says whether a surplus target may be given up now (not in a pass).
        `guard()`, asked before each round, names why nothing may be written now (another cluster answers
        at the address): that round writes no Lease, so the Leases held run out and every pass stops."""
        self.guard = guard
        self.guarded: str | None = None  # the guard's reason in the last round (readiness says it)
        self.identity = identity or default_identity()
        self.duration = duration
        self.retry_period = retry_period
        self._clock = clock
        self._client = client

        def lock(namespace: str, name: str, labels: Mapping[str, str] | None = None) -> LeaseLock:
            return LeaseLock(
                client,
                namespace,
                name,
                self.identity,
                duration=duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                clock=clock,
                labels=labels,
            )

        self.locks = {target: lock(namespace, name) for target, (namespace, name) in leases.items()}
        self.membership: Membership | None = None
        if replicas_namespace is not None:
            heartbeat = lock(replicas_namespace, heartbeat_name(self.identity), {REPLICA_LABEL: "heartbeat"})
            self.membership = Membership(heartbeat, duration, clock)
        self.may_release = may_release
        self.share: int | None = None  # the fair share of the last sharded round
        self._free_since: dict[str, float] = {}  # targets whose Lease nobody holds, since when (our clock)
        self._handed_over: set[str] = set()  # released as surplus: not "lost"
        # Taken because free for a whole duration: kept beyond the share (the replica that would take it
        # lacks it), until the live replicas change.
        self._orphans: set[str] = set()
        self._live_seen: frozenset[str] = frozenset()
        self._list_error: str | None = None
        self._writers: ThreadPoolExecutor | None = None  # a sharded round's concurrent Lease writes
        self.on_acquired = on_acquired
        self.on_lost = on_lost
        self.on_requested = on_requested
        self.on_namespace_missing = on_namespace_missing
        self._believed: dict[str, bool] = dict.fromkeys(self.locks, False)
        self._seen_request: dict[str, str | None] = dict.fromkeys(self.locks)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def held(self, target: str) -> bool:
        lock = self.locks.get(target)
        return lock is not None and lock.held

    def held_targets(self) -> set[str]:
        return {target for target, lock in self.locks.items() if lock.held}

    def start(self) -> None:
        """One round in the caller's thread (so `held` is meaningful at once), then the background loop."""
        self.run_round()
        self._thread = threading.Thread(target=self._loop, name="dra-gitops-leases", daemon=True)
        self._thread.start()

    def run_round(self) -> None:
        why = self.guard() if self.guard is not None else None
        if why:
            if why != self.guarded:
                log.error("no Lease written: %s", why)
            self.guarded = why
            for target in self.locks:
                self._notice(target)  # the Leases held run out on their own clock
            return
        self.guarded = None
        if self.membership is None or not self._sharded_round(self.membership):
            self._plain_round()

    def _plain_round(self) -> None:
        """Contend for every Lease (no sharding, or the Leases cannot be listed)."""
        for target, lock in self.locks.items():
            if self._stop.is_set():
                return
            self._try(lock)
            self._notice(target)
        # A lease whose renewal is still failing is noticed here too, not only when its turn comes.
        for target in self.locks:
            self._notice(target)

    def _try(self, lock: LeaseLock, listed: Listed = NOT_LISTED, listed_at: float | None = None) -> bool:
        if lock.try_acquire_or_renew(listed, listed_at):
            return True
        if lock.namespace_missing and self._recreate_namespace(lock.namespace):
            return lock.try_acquire_or_renew()
        return False

    # ---- sharding ---------------------------------------------------------------------------------------

    def _sharded_round(self, membership: Membership) -> bool:
        """Heartbeat, live replicas, fair share; renew up to the share, give up the surplus, take free
        Leases while under it. False when the Leases cannot be listed (the caller contends for all)."""
        listed = self._list_leases(membership.heartbeat.namespace)
        if listed is None:
            return False
        at = self._clock()  # when the LIST answered: what it shows was written before
        heartbeat = membership.heartbeat
        self._try(heartbeat, listed.get((heartbeat.namespace, heartbeat.name)), at)
        heartbeats = [
            lease
            for (namespace, _), lease in listed.items()
            if namespace == heartbeat.namespace
            and REPLICA_LABEL in ((lease.get("metadata") or {}).get("labels") or {})
        ]
        membership.observe(heartbeats, at)
        membership.remove_departed()
        if membership.live() != self._live_seen:
            self._live_seen = membership.live()
            self._orphans.clear()
        share = fair_share(len(self.locks), len(membership.live()))
        if share != self.share:
            log.info(
                "%s: fair share %d of %d targets over %d live replicas",
                self.identity,
                share,
                len(self.locks),
                len(membership.live()),
            )
        self.share = share
        order = by_preference(self.identity, self.locks)
        released = self._give_up_surplus(order, share)

        def named_holder(target: str) -> str:  # as the LIST found it
            lock = self.locks[target]
            return LeaseRecord.of(listed.get((lock.namespace, lock.name)) or {}).holder

        # Ours: held, or still naming us (a renewal that lapsed); not what we just released (the LIST,
        # from before the release, still names us there).
        ours = [
            target
            for target in order
            if target not in released and (self.locks[target].held or named_holder(target) == self.identity)
        ]
        others = [target for target in order if target not in ours and target not in released]
        for target in others:
            lock = self.locks[target]
            lock.look(listed.get((lock.namespace, lock.name)), at)
            self._track_free(target)
        free = [target for target in others if self._is_free(target)]
        room = max(0, share - len(ours))
        orphans = [target for target in free[room:] if self._free_for_long(target)]
        # Takeovers first, so a dead replica's targets are taken the moment they expire; then renewals
        # (a round is far shorter than the renew deadline).
        won = self._contend([*free[:room], *orphans], listed, at)
        for target in won.intersection(orphans):
            log.info("target %s taken by %s: free for a whole lease duration", target, self.identity)
            self._orphans.add(target)
        self._contend(ours, listed, at)
        for target in order:
            self._track_free(target)
            self._notice(target)
        return True

    def _contend(self, targets: list[str], listed: Mapping[tuple[str, str], Any], at: float) -> set[str]:
        """A round of each target's Lease, several at once (many writes still make a short round); the
        ones won."""

        def one(target: str) -> bool:
            lock = self.locks[target]
            return not self._stop.is_set() and lock.try_acquire_or_renew(
                listed.get((lock.namespace, lock.name)), at
            )

        if len(targets) > 1:
            if self._writers is None:
                self._writers = ThreadPoolExecutor(_PARALLEL_WRITES, thread_name_prefix="lease-writes")
            results = list(self._writers.map(one, targets))
        else:
            results = [one(target) for target in targets]
        won = {target for target, ok in zip(targets, results, strict=True) if ok}
        for target in set(targets) - won:  # a namespace found gone is created again from this thread only
            lock = self.locks[target]
            if (
                lock.namespace_missing
                and self._recreate_namespace(lock.namespace)
                and lock.try_acquire_or_renew()
            ):
                won.add(target)
        return won

    def _list_leases(self, heartbeats: str) -> dict[tuple[str, str], dict[str, Any]] | None:
        """Every Lease of the namespaces our Leases live in, by (namespace, name); None (said once while
        it lasts) when they cannot be listed."""
        namespaces = {lock.namespace for lock in self.locks.values()} | {heartbeats}
        found: dict[tuple[str, str], dict[str, Any]] = {}
        try:
            resource = self._client.resource_for(LEASE_API_VERSION, "Lease")
            for namespace in sorted(namespaces):
                for lease in self._client.list(resource, namespace):
                    found[(namespace, str(lease["metadata"]["name"]))] = lease
        except DraGitopsError as exc:
            error = f"cannot list the Leases, so every target is contended for (no sharding): {exc.detail}"
            log.log(logging.DEBUG if error == self._list_error else logging.WARNING, "%s", error)
            self._list_error = error
            return None
        self._list_error = None
        return found

    def _give_up_surplus(self, order: list[str], share: int) -> set[str]:
        """Release the held targets beyond the share, the least preferred first, none in a pass; the
        released ones."""
        # Orphans are kept beyond the share (see _orphans), so they do not count against it.
        held = [target for target in order if self.locks[target].held and target not in self._orphans]
        surplus = len(held) - share
        released: set[str] = set()
        for target in reversed(held):
            if surplus <= 0 or self._stop.is_set():
                break
            if self.may_release is not None and not self.may_release(target):
                continue  # in a pass: another one goes, or this one at a later round
            if self.locks[target].release():
                released.add(target)
                log.info(
                    "target %s handed over: %s holds more than its fair share (%d)",
                    target,
                    self.identity,
                    share,
                )
                self._handed_over.add(target)
                surplus -= 1
            self._notice(target)
        return released

    def _is_free(self, target: str) -> bool:
        """Nobody holds the target's Lease as we last saw it: absent, released, or expired on our clock."""
        lock = self.locks[target]
        record = lock.observed
        if lock.held or (record is not None and record.holder == self.identity):
            return False
        expiry = lock.expires_at
        return record is None or not record.holder or (expiry is not None and expiry <= self._clock())

    def _track_free(self, target: str) -> None:
        if self._is_free(target):
            self._free_since.setdefault(target, self._clock())
        else:
            self._free_since.pop(target, None)

    def _free_for_long(self, target: str) -> bool:
        """Free (released, expired or never created) for a whole lease duration: nobody counts it in their
        share, so anyone takes it."""
        since = self._free_since.get(target)
        return since is not None and self._clock() - since >= self.duration

    def _recreate_namespace(self, namespace: str) -> bool:
        return self.on_namespace_missing is not None and self.on_namespace_missing({namespace})

    def lease_errors(self) -> dict[str, str]:
        """Targets whose Lease the last round could not read or write, with why."""
        if self.guarded is not None:
            return dict.fromkeys(self.locks, self.guarded)
        return {target: lock.error for target, lock in self.locks.items() if lock.error is not None}

    def _loop(self) -> None:
        started = self._clock()
        while not self._stop.wait(self.next_delay(started)):
            started = self._clock()
            try:
                self.run_round()
            except Exception:  # noqa: BLE001 - a callback's bug must not end leader election
                log.exception("lease round failed")

    def next_delay(self, started: float) -> float:
        """Seconds until the next round of a round that began at `started`: a (jittered) retry period
        after its start, not after its end, and sooner when a Lease another replica holds expires first,
        so a dead holder's Lease is taken at its expiry rather than up to a retry period later."""
        # Up to 10% early, so the replicas' rounds do not fall in step, never late: a renewal is seen
        # within a retry period, and so a dead holder's Lease taken within its duration plus one.
        wake = started + self.retry_period * random.uniform(0.9, 1.0)
        now = self._clock()
        expiries = [lock.expires_at for lock in self.locks.values()]
        if self.membership is not None:
            expiries.append(self.membership.next_expiry())
        for expiry in expiries:
            if expiry is not None and expiry > now:
                wake = min(wake, expiry + EXPIRY_MARGIN)
        return max(0.0, wake - now)

    def contend(self) -> None:
        """`run --once`: rounds until each Lease is held here or seen renewed by its holder, so a Lease a
        dead process left (a killed `run --once`) is taken over at its expiry, as `run` would, while a
        live holder (it renews every retry period) is left alone after one of its renewals. No sharding:
        a one-shot run takes every Lease nobody renews."""
        self._plain_round()
        waiting = {
            target: lock.observed
            for target, lock in self.locks.items()
            if not lock.held and lock.expires_at is not None
        }
        while waiting and not self._stop.is_set():
            started = self._clock()
            if self._stop.wait(self.next_delay(started)):
                return
            self._plain_round()  # renews the Leases already held meanwhile
            for target, seen in list(waiting.items()):
                lock = self.locks[target]
                if lock.held or lock.observed != seen or lock.expires_at is None:
                    del waiting[target]  # taken, renewed by a live holder, or released

    def request(self, target: str, reason: str) -> bool:
        """Ask the replica holding `target`'s Lease for a pass (see the module docstring)."""
        lock = self.locks.get(target)
        return lock is not None and lock.request(reason)

    def _notice(self, target: str) -> None:
        lock = self.locks[target]
        now_held = lock.held
        if now_held and self._believed[target] and lock.requested != self._seen_request[target]:
            # Asked by another replica since our last round (a stamp seen on taking the Lease is not:
            # taking it starts a pass anyway).
            log.info("pass requested for target %s: %s", target, lock.requested)
            if self.on_requested is not None:
                self.on_requested(target)
        self._seen_request[target] = lock.requested
        if now_held == self._believed[target]:
            return
        self._believed[target] = now_held
        callback = self.on_acquired if now_held else self.on_lost
        if now_held:
            self._handed_over.discard(target)
        elif target not in self._handed_over:
            log.warning("lease for target %s lost by %s", target, self.identity)
        if callback is not None:
            callback(target)

    def stop(self, release: bool = True) -> None:
        """Stop the loop, then (by default) release every held Lease so other replicas take over at once."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if release:
            for lock in self.locks.values():
                lock.release()
            if self.membership is not None:  # gone from the live set at once: the others take our share
                self.membership.heartbeat.release()
        if self._writers is not None:
            self._writers.shutdown()
            self._writers = None
