"""Leader election with coordination.k8s.io Leases against the simulated cluster over HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import wait_for

from reconciler.cluster.client import ClusterClient, ResourceInfo
from reconciler.cluster.lease import LeaseLock, LeaseRecord
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.loop.config.targets import Target
from reconciler.model.readers import parse_time
from reconciler.sim.server import SimCluster

NAMESPACE = "dra-gitops"


class Clock:
    """A monotonic clock the test moves by hand, so expiry is decided without sleeping."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def client(sim_cluster: SimCluster) -> Iterator[ClusterClient]:
    with ClusterClient.for_url(sim_cluster.url, retries=0, timeout=5) as cluster_client:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        cluster_client.create(cluster_client.resource_for("v1", "Namespace"), namespace)
        yield cluster_client


def lock(
    client: ClusterClient, identity: str, clock: Clock | None = None, name: str = "dra-gitops-prod"
) -> LeaseLock:
    return LeaseLock(client, NAMESPACE, name, identity, clock=clock or Clock())


def lease_spec(client: ClusterClient, name: str = "dra-gitops-prod") -> dict[str, Any]:
    lease = client.get(client.resource_for("coordination.k8s.io/v1", "Lease"), NAMESPACE, name)
    assert lease is not None
    return dict(lease["spec"])


def test_two_identities_contend_and_only_one_holds(client: ClusterClient) -> None:
    a, b = lock(client, "replica-a"), lock(client, "replica-b")
    assert a.try_acquire_or_renew() is True
    assert b.try_acquire_or_renew() is False
    assert (a.held, b.held, b.observed_holder) == (True, False, "replica-a")
    spec = lease_spec(client)
    assert spec["holderIdentity"] == "replica-a"
    assert spec["leaseDurationSeconds"] == 15 and spec["leaseTransitions"] == 0
    acquired = spec["acquireTime"]
    renewed = parse_time(spec["renewTime"])
    assert renewed is not None and renewed.tzinfo is not None and spec["renewTime"].endswith("Z")
    assert len(spec["renewTime"].split(".")[1]) == len("123456Z")  # MicroTime: microseconds

    assert a.try_acquire_or_renew() is True  # a renewal keeps acquireTime and the transition count
    spec = lease_spec(client)
    assert (spec["holderIdentity"], spec["acquireTime"], spec["leaseTransitions"]) == (
        "replica-a",
        acquired,
        0,
    )
    assert b.try_acquire_or_renew() is False


def test_an_expired_lease_is_taken_over(client: ClusterClient) -> None:
    clock_a, clock_b = Clock(), Clock()
    a, b = lock(client, "replica-a", clock_a), lock(client, "replica-b", clock_b)
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock_b.advance(14.9)  # B has seen the record unchanged for less than leaseDurationSeconds
    assert not b.try_acquire_or_renew()
    clock_b.advance(0.2)
    assert b.try_acquire_or_renew()
    assert b.held
    spec = lease_spec(client)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-b", 1)
    # A learns it lost the lease on its next round, before its own renew deadline would tell it.
    assert a.held
    assert not a.try_acquire_or_renew()
    assert not a.held


def test_a_renewing_holder_keeps_the_lease(client: ClusterClient) -> None:
    clock_a, clock_b = Clock(), Clock()
    a, b = lock(client, "replica-a", clock_a), lock(client, "replica-b", clock_b)
    assert a.try_acquire_or_renew()
    for _ in range(5):
        clock_a.advance(2)
        clock_b.advance(10)
        assert a.try_acquire_or_renew()
        # Every renewal changes the record, so B's expiry clock restarts each time it looks.
        assert not b.try_acquire_or_renew()
    assert lease_spec(client)["holderIdentity"] == "replica-a"


def test_the_holder_stops_believing_after_the_renew_deadline(client: ClusterClient) -> None:
    clock = Clock()
    a = lock(client, "replica-a", clock)
    assert a.try_acquire_or_renew()
    clock.advance(9.9)
    assert a.held
    clock.advance(0.2)
    assert not a.held  # 10 s renew deadline < 15 s lease duration: no one else can hold it yet


def test_release_hands_over_at_once(client: ClusterClient) -> None:
    a, b = lock(client, "replica-a"), lock(client, "replica-b")
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    assert a.release() is True
    assert not a.held
    spec = lease_spec(client)
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1)
    assert b.try_acquire_or_renew()  # no waiting: a released lease is free
    assert lease_spec(client)["leaseTransitions"] == 1
    assert a.release() is False  # nothing to release
    assert b.release() is True


class RacingLock(LeaseLock):
    """A lock whose rival completes a whole round between this lock's read and its write."""

    def __init__(self, *args: Any, rival: LeaseLock, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rival: LeaseLock | None = rival

    def _read(self, resource: ResourceInfo) -> dict[str, Any] | None:
        lease = super()._read(resource)
        if self.rival is not None:
            assert self.rival.try_acquire_or_renew()
            self.rival = None
        return lease


def test_a_race_to_create_loses_cleanly(client: ClusterClient) -> None:
    winner = lock(client, "replica-a")
    loser = RacingLock(client, NAMESPACE, "dra-gitops-prod", "replica-b", rival=winner)
    assert loser.try_acquire_or_renew() is False  # its create came second: AlreadyExists
    assert not loser.held and winner.held
    assert lease_spec(client)["holderIdentity"] == "replica-a"


def test_a_race_to_take_over_loses_on_the_resource_version(client: ClusterClient) -> None:
    first = lock(client, "replica-x")
    assert first.try_acquire_or_renew() and first.release()
    winner = lock(client, "replica-a")
    loser = RacingLock(client, NAMESPACE, "dra-gitops-prod", "replica-b", rival=winner)
    assert loser.try_acquire_or_renew() is False  # it read the released lease; the winner wrote first
    assert not loser.held and winner.held
    spec = lease_spec(client)
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("replica-a", 1)


def test_many_replicas_racing_for_a_free_lease_elect_one(client: ClusterClient) -> None:
    locks = [lock(client, f"replica-{n}") for n in range(6)]
    start = threading.Barrier(len(locks))
    results: dict[str, bool] = {}

    def contend(candidate: LeaseLock) -> None:
        start.wait()
        results[candidate.identity] = candidate.try_acquire_or_renew()

    threads = [threading.Thread(target=contend, args=(candidate,)) for candidate in locks]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    winners = [identity for identity, won in results.items() if won]
    assert len(winners) == 1
    assert lease_spec(client)["holderIdentity"] == winners[0]


def test_an_unreachable_api_server_is_not_held(sim_cluster: SimCluster, client: ClusterClient) -> None:
    a = lock(client, "replica-a")
    sim_cluster.fail_next(1, status=500, match="leases")
    assert a.try_acquire_or_renew() is False
    assert a.try_acquire_or_renew() is True


def test_lease_timings_are_checked(client: ClusterClient) -> None:
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseLock(client, NAMESPACE, "x", "a", duration=10, renew_deadline=10)
    with pytest.raises(ValueError, match="renew deadline"):
        LeaseLock(client, NAMESPACE, "x", "a", renew_deadline=2, retry_period=2)
    with pytest.raises(ValueError, match="whole seconds"):
        LeaseLock(client, NAMESPACE, "x", "a", duration=15.5)


def test_lease_record_round_trips() -> None:
    record = LeaseRecord("a", 15, "2025-01-01T00:00:00.000000Z", "2025-01-01T00:00:01.000000Z", 3)
    assert LeaseRecord.of({"spec": record.spec()}) == record


# ---- the manager ------------------------------------------------------------------------------------------

FAST = {"duration": 2, "renew_deadline": 1.0, "retry_period": 0.1}
TARGETS = [Target(name=name, repo="/srv/fleet.git") for name in ("alpha", "beta", "gamma")]
# What the controller hands its Lease manager: target -> (state namespace, Lease name).
LEASES = {t.name: (t.state_namespace, t.lease_name) for t in TARGETS}


class Events:
    def __init__(self) -> None:
        self.acquired: list[str] = []
        self.lost: list[str] = []


def manager(client: ClusterClient, identity: str, events: Events) -> LeaseManager:
    return LeaseManager(
        client,
        LEASES,
        identity=identity,
        on_acquired=events.acquired.append,
        on_lost=events.lost.append,
        **FAST,
    )


def test_replicas_share_targets_and_a_clean_stop_hands_them_over(client: ClusterClient) -> None:
    events_a, events_b = Events(), Events()
    a, b = manager(client, "replica-a", events_a), manager(client, "replica-b", events_b)
    a.start()  # the first round runs before start() returns
    assert a.held_targets() == {"alpha", "beta", "gamma"}
    assert sorted(events_a.acquired) == ["alpha", "beta", "gamma"]
    b.start()
    try:
        assert b.held_targets() == set()
        assert lease_spec(client, "dra-gitops-beta")["holderIdentity"] == "replica-a"
        a.stop()  # releases: B takes over within its next rounds, without waiting for expiry
        assert not a.held("alpha")
        wait_for(lambda: b.held_targets() == {"alpha", "beta", "gamma"}, what="replica-b to take over")
        assert sorted(events_b.acquired) == ["alpha", "beta", "gamma"]
        assert not b.held("unknown-target")
    finally:
        a.stop()
        b.stop()
    assert b.held_targets() == set()
    assert lease_spec(client, "dra-gitops-alpha")["holderIdentity"] == ""


def test_a_dead_replicas_targets_move_after_the_lease_duration(client: ClusterClient) -> None:
    events_a, events_b = Events(), Events()
    a, b = manager(client, "replica-a", events_a), manager(client, "replica-b", events_b)
    a.start()
    b.start()
    try:
        a.stop(release=False)  # as if killed: the leases stay, naming replica-a

        def handed_over() -> bool:
            # Never both: A stops believing (renew deadline 1 s) before B may take over (duration 2 s).
            for target in ("alpha", "beta", "gamma"):
                assert not (a.held(target) and b.held(target)), target
            return b.held_targets() == {"alpha", "beta", "gamma"}

        wait_for(handed_over, timeout=15, interval=0.02, what="replica-b to take over expired leases")
        assert sorted(events_b.acquired) == ["alpha", "beta", "gamma"]
        assert lease_spec(client, "dra-gitops-gamma")["leaseTransitions"] == 1
    finally:
        b.stop()


def test_failing_renewals_lose_the_target_at_the_renew_deadline(
    sim_cluster: SimCluster, client: ClusterClient
) -> None:
    events = Events()
    only_alpha = LeaseManager(
        client,
        {"alpha": (NAMESPACE, "dra-gitops-alpha")},
        identity="replica-a",
        on_acquired=events.acquired.append,
        on_lost=events.lost.append,
        **FAST,
    )
    only_alpha.start()
    try:
        assert only_alpha.held("alpha")
        sim_cluster.fail_next(100_000, status=500, match="leases")
        wait_for(lambda: events.lost == ["alpha"], what="the lease to be lost")
        assert not only_alpha.held("alpha")
        sim_cluster.clear_faults()
        # Still named holder in the Lease, it renews as soon as the API server answers again.
        wait_for(lambda: events.acquired == ["alpha", "alpha"], what="the lease to be renewed")
        assert only_alpha.held("alpha")
    finally:
        sim_cluster.clear_faults()
        only_alpha.stop()


# ---- a pass asked of the holder -------------------------------------------------------------------------


def test_a_replica_without_the_lease_asks_the_holder_for_a_pass(client: ClusterClient) -> None:
    events_a, events_b = Events(), Events()
    requested: list[str] = []
    a = LeaseManager(
        client,
        LEASES,
        identity="replica-a",
        on_acquired=events_a.acquired.append,
        on_lost=events_a.lost.append,
        on_requested=requested.append,
        **FAST,
    )
    b = manager(client, "replica-b", events_b)
    a.start()
    b.start()
    try:
        assert b.held_targets() == set()
        assert b.request("beta", "github webhook") is True
        wait_for(lambda: requested == ["beta"], what="the holder to see the request")
        stamp = client.get(
            client.resource_for("coordination.k8s.io/v1", "Lease"), NAMESPACE, "dra-gitops-beta"
        )
        assert stamp is not None
        assert stamp["metadata"]["annotations"]["dra-gitops.io/reconcile-requested"].endswith(
            " github webhook"
        )
        # Asked once, answered once; the stamp does not cost the holder its Lease.
        wait_for(lambda: a.locks["beta"].requested is not None and len(requested) == 1, what="steady")
        assert b.request("beta", "again") is True
        wait_for(lambda: requested == ["beta", "beta"], what="the second request")
        assert events_a.lost == [] and a.held_targets() == {"alpha", "beta", "gamma"}
        assert b.request("unknown", "nothing") is False
    finally:
        a.stop()
        b.stop()


def test_a_request_with_no_lease_yet_is_not_written(client: ClusterClient) -> None:
    assert lock(client, "replica-b", name="dra-gitops-nobody").request("webhook") is False


class RacedLock(LeaseLock):
    """A holder whose renewal is overtaken by another replica's request, between its read and its write."""

    def __init__(self, *args: Any, rival: LeaseLock, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.rival = rival
        self.races = 0

    def _read(self, resource: ResourceInfo) -> dict[str, Any] | None:
        lease = super()._read(resource)
        if lease is not None and self.races == 0 and LeaseRecord.of(lease).holder == self.identity:
            self.races += 1
            assert self.rival.request("raced") is True
        return lease


def test_a_renewal_overtaken_by_a_request_still_renews(client: ClusterClient) -> None:
    clock = Clock()
    holder = RacedLock(
        client, NAMESPACE, "dra-gitops-prod", "replica-a", clock=clock, rival=lock(client, "replica-b")
    )
    holder.races = 1  # not while creating it
    assert holder.try_acquire_or_renew() is True
    holder.races = 0
    clock.advance(1)
    assert holder.try_acquire_or_renew() is True  # conflict on the stamp, read again, renewed
    assert holder.races == 1 and holder.held
    assert holder.requested is not None and holder.requested.endswith(" raced")
    assert lease_spec(client)["holderIdentity"] == "replica-a"


# ---- when the next round runs, and `run --once` --------------------------------------------------------


def test_a_standby_wakes_at_the_expiry_it_measures_from_first_seeing_the_renewal(
    client: ClusterClient,
) -> None:
    clock = Clock()
    holder = lock(client, "replica-a", Clock(), name="dra-gitops-alpha")
    assert holder.try_acquire_or_renew()
    standby = LeaseManager(
        client, {"alpha": (NAMESPACE, "dra-gitops-alpha")}, identity="replica-b", clock=clock
    )
    standby.run_round()  # first sees replica-a's renewal at t=1000: free from t=1015 unless renewed
    assert standby.locks["alpha"].expires_at == 1015.0
    # Rounds follow each other a retry period (2 s ±10%) after the previous one *started*.
    assert 1.8 <= standby.next_delay(started=clock.now) <= 2.2
    clock.advance(0.5)  # a slow round: half a second of it is already spent
    assert 1.3 <= standby.next_delay(started=1000.0) <= 1.7
    clock.advance(13.5)  # t=1014: the expiry comes before the next retry period would
    assert standby.next_delay(started=clock.now) == pytest.approx(1.01)
    clock.advance(1.01)
    standby.run_round()
    assert standby.held("alpha")
    assert standby.locks["alpha"].expires_at is None  # ours now: no foreign expiry to wait for
    standby.stop()


def test_contend_takes_over_a_lease_its_holder_stopped_renewing(client: ClusterClient) -> None:
    dead = LeaseManager(client, {"alpha": (NAMESPACE, "dra-gitops-alpha")}, identity="killed", **FAST)
    dead.run_round()
    dead.stop(release=False)  # as a killed `run --once` leaves it
    once = LeaseManager(client, {"alpha": (NAMESPACE, "dra-gitops-alpha")}, identity="next-once", **FAST)
    once.contend()
    assert once.held("alpha")
    spec = lease_spec(client, "dra-gitops-alpha")
    assert (spec["holderIdentity"], spec["leaseTransitions"]) == ("next-once", 1)
    once.stop()


def test_contend_leaves_a_renewed_lease_to_its_live_holder(client: ClusterClient) -> None:
    live = LeaseManager(client, {"alpha": (NAMESPACE, "dra-gitops-alpha")}, identity="live", **FAST)
    live.start()
    try:
        once = LeaseManager(client, {"alpha": (NAMESPACE, "dra-gitops-alpha")}, identity="once", **FAST)
        once.contend()  # returns after seeing one of live's renewals
        assert not once.held("alpha")
        assert live.held("alpha")
        assert lease_spec(client, "dra-gitops-alpha")["holderIdentity"] == "live"
        once.stop()
    finally:
        live.stop()
