"""Leases of many targets kept by one background thread: `LeaseManager`, over the `LeaseLock` of each.

The election itself (one Lease, client-go's rules) is :mod:`reconciler.cluster.lease`; here is the loop
that runs a round over every target's Lease each retry period and tells the controller what changed.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import (
    DEFAULT_DURATION,
    DEFAULT_RENEW_DEADLINE,
    DEFAULT_RETRY_PERIOD,
    EXPIRY_MARGIN,
    LeaseLock,
    default_identity,
)

log = logging.getLogger(__name__)

LeaseCallback = Callable[[str], None]


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
    ) -> None:
        """`leases` maps each target name to the (namespace, name) of its Lease; `on_requested` is called
        on the holder when another replica asked for a pass of the target; `on_namespace_missing` with
        the namespaces found gone, and True when it recreated them (their Leases are tried again at once)."""
        self.identity = identity or default_identity()
        self.duration = duration
        self.retry_period = retry_period
        self._clock = clock
        self.locks = {
            target: LeaseLock(
                client,
                namespace,
                name,
                self.identity,
                duration=duration,
                renew_deadline=renew_deadline,
                retry_period=retry_period,
                clock=clock,
            )
            for target, (namespace, name) in leases.items()
        }
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
        for target, lock in self.locks.items():
            if self._stop.is_set():
                return
            lock.try_acquire_or_renew()
            if lock.namespace_missing and self._recreate_namespace(lock.namespace):
                lock.try_acquire_or_renew()
            self._notice(target)
        # A lease whose renewal is still failing is noticed here too, not only when its turn comes.
        for target in self.locks:
            self._notice(target)

    def _recreate_namespace(self, namespace: str) -> bool:
        return self.on_namespace_missing is not None and self.on_namespace_missing({namespace})

    def lease_errors(self) -> dict[str, str]:
        """Targets whose Lease the last round could not read or write, with why."""
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
        # ±10% around the retry period, so the replicas' rounds do not fall in step
        wake = started + self.retry_period * random.uniform(0.9, 1.1)
        now = self._clock()
        for lock in self.locks.values():
            expiry = lock.expires_at
            if expiry is not None and expiry > now:
                wake = min(wake, expiry + EXPIRY_MARGIN)
        return max(0.0, wake - now)

    def contend(self) -> None:
        """`run --once`: rounds until each Lease is held here or seen renewed by its holder, so a Lease a
        dead process left (a killed `run --once`) is taken over at its expiry, as `run` would, while a
        live holder (it renews every retry period) is left alone after one of its renewals."""
        self.run_round()
        waiting = {
            target: lock.observed
            for target, lock in self.locks.items()
            if not lock.held and lock.expires_at is not None
        }
        while waiting and not self._stop.is_set():
            started = self._clock()
            if self._stop.wait(self.next_delay(started)):
                return
            self.run_round()  # renews the Leases already held meanwhile
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
        if not now_held:
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
