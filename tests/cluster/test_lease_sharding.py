"""Sharding the targets' Leases over live replicas: real LeaseManagers (several identities) against the
simulated cluster over HTTP, each with its own client, as separate replicas would be."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

import pytest
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.lease import LeaseRecord
from reconciler.cluster.leasemanager import LeaseManager
from reconciler.cluster.leaseshard import (
    HEARTBEAT_PREFIX,
    REPLICA_LABEL,
    by_preference,
    fair_share,
    heartbeat_name,
    preference,
)
from reconciler.sim.server import SimCluster

NAMESPACE = "dra-gitops"
TARGETS = [f"target-{n:02d}" for n in range(20)]
LEASES = {name: (NAMESPACE, f"dra-gitops-{name}") for name in TARGETS}
# Short, but with room for a loaded 2-core machine: a round every 0.3 s, a Lease lasts 3 s unrenewed.
TIMINGS = {"duration": 3, "renew_deadline": 2.0, "retry_period": 0.3}


class Replicas:
    """LeaseManagers sharding one set of targets, each with its own client; stopped at the end."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.managers: dict[str, LeaseManager] = {}
        self.clients: list[ClusterClient] = []

    def start(
        self,
        identity: str,
        may_release: Callable[[str], bool] | None = None,
        leases: dict[str, tuple[str, str]] = LEASES,
        **extra: object,
    ) -> LeaseManager:
        client = ClusterClient.for_url(self.url, retries=0, timeout=5)
        self.clients.append(client)
        manager = LeaseManager(
            client,
            leases,
            identity=identity,
            replicas_namespace=NAMESPACE,
            may_release=may_release,
            **TIMINGS,  # type: ignore[arg-type]
            **extra,  # type: ignore[arg-type]
        )
        self.managers[identity] = manager
        manager.start()
        return manager

    def counts(self, *identities: str) -> list[int]:
        """Targets held by each named replica (all when none named), sorted; asserts no target is held twice."""
        names = identities or tuple(self.managers)
        held = {name: self.managers[name].held_targets() for name in names}
        for (a, mine), (b, theirs) in itertools.combinations(held.items(), 2):
            assert not (mine & theirs), f"{a} and {b} both hold {sorted(mine & theirs)}"
        return sorted(len(targets) for targets in held.values())

    def spread(self, *identities: str) -> list[int] | None:
        """The sorted counts once every target is held by one of the named replicas, else None."""
        names = identities or tuple(self.managers)
        counts = self.counts(*names)
        covered = set().union(*(self.managers[name].held_targets() for name in names))
        return counts if covered == set(TARGETS) else None

    def close(self) -> None:
        for manager in self.managers.values():
            manager.stop()
        for client in self.clients:
            client.close()


@pytest.fixture
def replicas(sim_cluster: SimCluster) -> Iterator[Replicas]:
    with ClusterClient.for_url(sim_cluster.url) as client:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
        client.create(client.resource_for("v1", "Namespace"), namespace)
    group = Replicas(sim_cluster.url)
    try:
        yield group
    finally:
        group.close()


def holders(url: str) -> dict[str, str]:
    """Lease name -> holder, as the cluster has them."""
    with ClusterClient.for_url(url) as client:
        leases = client.list(client.resource_for("coordination.k8s.io/v1", "Lease"), NAMESPACE)
    return {lease["metadata"]["name"]: LeaseRecord.of(lease).holder for lease in leases}


def settled(replicas: Replicas, expected: list[int], *identities: str, timeout: float = 60) -> None:
    wait_for(
        lambda: replicas.spread(*identities) == expected,
        timeout,
        f"the targets spread {expected} over {identities or 'every replica'}",
        0.05,
    )


def test_twenty_targets_over_three_replicas_spread_ceil_and_floor(
    sim_cluster: SimCluster, replicas: Replicas
) -> None:
    for identity in ("replica-a", "replica-b", "replica-c"):
        replicas.start(identity)
    settled(replicas, [6, 7, 7])
    # The cluster says the same: every target's Lease names the replica that believes it holds it.
    in_cluster = holders(sim_cluster.url)
    for identity, manager in replicas.managers.items():
        for target in manager.held_targets():
            assert in_cluster[f"dra-gitops-{target}"] == identity
        assert in_cluster[heartbeat_name(identity)] == identity  # each replica's heartbeat
        assert manager.share == 7
    with ClusterClient.for_url(sim_cluster.url) as client:
        resource = client.resource_for("coordination.k8s.io/v1", "Lease")
        labelled = client.list(resource, NAMESPACE, label_selector=REPLICA_LABEL)
    assert sorted(lease["metadata"]["name"] for lease in labelled) == sorted(
        heartbeat_name(identity) for identity in replicas.managers
    )


def test_a_dead_replicas_targets_are_taken_by_the_others_after_expiry(replicas: Replicas) -> None:
    for identity in ("replica-a", "replica-b", "replica-c"):
        replicas.start(identity)
    settled(replicas, [6, 7, 7])
    dead = replicas.managers["replica-c"]
    orphaned = dead.held_targets()
    dead.stop(release=False)  # as if killed: its heartbeat and Leases stay, naming it, unrenewed
    # Its Leases expire; the two left see its heartbeat expire too, their share rises to 10, and they
    # take its targets (never while it could still believe it holds them: counts() checks no overlap).
    settled(replicas, [10, 10], "replica-a", "replica-b")
    survivors = replicas.managers["replica-a"].held_targets() | replicas.managers["replica-b"].held_targets()
    assert orphaned <= survivors
    assert replicas.managers["replica-a"].membership is not None
    assert replicas.managers["replica-a"].membership.live() == {"replica-a", "replica-b"}
    # Its heartbeat is removed (two lease durations unrenewed), so dead replicas' heartbeats don't pile up.
    gone = heartbeat_name("replica-c")
    wait_for(lambda: gone not in holders(replicas.url), 30, "the dead replica's heartbeat removed")
    assert {heartbeat_name("replica-a"), heartbeat_name("replica-b")} <= set(holders(replicas.url))


def test_a_joining_replica_gets_a_share_and_a_clean_stop_hands_it_back(
    sim_cluster: SimCluster, replicas: Replicas
) -> None:
    acquired: list[str] = []
    lost: list[str] = []
    a = replicas.start("replica-a", on_acquired=acquired.append, on_lost=lost.append)
    settled(replicas, [20])  # alone: every target
    replicas.start("replica-b")
    settled(replicas, [10, 10])
    # Handed over once, never taken back meanwhile (the churn of a replica retaking what it released).
    assert (len(acquired), len(lost)) == (20, 10)
    assert set(lost) == set(TARGETS) - a.held_targets()
    replicas.start("replica-c")
    settled(replicas, [6, 7, 7])
    replicas.managers["replica-b"].stop()  # releases its Leases and its heartbeat: no expiry to wait for
    # released, or already removed by a replica that saw it released
    assert holders(sim_cluster.url).get(heartbeat_name("replica-b"), "") == ""
    settled(replicas, [10, 10], "replica-a", "replica-c")


def test_a_target_in_a_pass_is_not_handed_over_until_it_ends(replicas: Replicas) -> None:
    busy = set(TARGETS)  # every target of replica-a in a pass

    a = replicas.start("replica-a", may_release=lambda target: target not in busy)
    settled(replicas, [20])
    b = replicas.start("replica-b")
    wait_for(lambda: a.share == 10 and b.share == 10, 30, "both to see two live replicas")
    # Two more rounds of replica-a (renewals replica-b sees) with the surplus all in passes: kept.
    for _ in range(2):
        seen = b.locks[TARGETS[0]].observed
        wait_for(lambda: b.locks[TARGETS[0]].observed != seen, 30, "a renewal by replica-a")  # noqa: B023
    assert a.held_targets() == set(TARGETS) and b.held_targets() == set()
    busy.clear()  # the passes end: the surplus goes at the next round, to the replica under its share
    settled(replicas, [10, 10])


def test_leases_nobody_counts_in_a_share_are_taken_after_a_lease_duration_and_kept(
    replicas: Replicas,
) -> None:
    """A live replica that lacks the targets (a configuration without them, as in a rolling update that
    adds them): the one that has them takes its share at once, the rest once free for a whole lease
    duration, and keeps them while the live replicas stay the same (no handing over to nobody)."""
    replicas.start("replica-without-targets", leases={})  # announces itself, contends for nothing
    lost: list[str] = []
    a = replicas.start("replica-a", on_lost=lost.append)
    wait_for(lambda: a.share == 10 and len(a.held_targets()) == 10, 30, "replica-a to take its share")
    settled(replicas, [0, 20], timeout=60)
    assert a.membership is not None and len(a.membership.live()) == 2
    for _ in range(3):  # rounds after taking them all: none given up
        renewed = a.locks[TARGETS[0]].observed
        wait_for(lambda: a.locks[TARGETS[0]].observed != renewed, 30, "a renewal")  # noqa: B023
    assert a.held_targets() == set(TARGETS) and lost == []


def test_lease_errors_clear_when_the_api_server_answers_again(
    sim_cluster: SimCluster, replicas: Replicas
) -> None:
    """While Lease requests fail, every target says why (readiness shows it); once they succeed again,
    the errors clear, also for the targets a replica only looks at (beyond its share)."""
    a, b = replicas.start("replica-a"), replicas.start("replica-b")
    settled(replicas, [10, 10])
    sim_cluster.fail_next(100_000, status=500, match="leases")
    try:
        wait_for(lambda: len(a.lease_errors()) == len(TARGETS), 30, "every target's Lease failing", 0.05)
    finally:
        sim_cluster.clear_faults()
    wait_for(lambda: a.lease_errors() == {} and b.lease_errors() == {}, 30, "the errors cleared", 0.05)
    settled(replicas, [10, 10])


# ---- the pure parts ------------------------------------------------------------------------------------


def test_fair_share_is_the_ceiling() -> None:
    assert [fair_share(20, r) for r in (1, 2, 3, 4, 0)] == [20, 10, 7, 5, 20]
    assert fair_share(200, 3) == 67


def test_heartbeat_names_never_clash_with_a_targets_lease() -> None:
    assert heartbeat_name("dra-gitops-7d9f-x2") == HEARTBEAT_PREFIX + "dra-gitops-7d9f-x2"  # a pod name
    odd = heartbeat_name("Host_1a2b")
    assert odd.startswith(HEARTBEAT_PREFIX + "host-1a2b-") and odd != heartbeat_name("host-1a2b")
    # A target's Lease is dra-gitops-<DNS label>: no dot, whatever the target is called.
    assert "." in heartbeat_name("replica")


def test_preference_is_a_stable_rendezvous_order() -> None:
    assert by_preference("replica-a", TARGETS) == by_preference("replica-a", list(reversed(TARGETS)))
    assert by_preference("replica-a", TARGETS) != by_preference("replica-b", TARGETS)
    # Each target is most wanted by one of three replicas; over many targets each gets about a third.
    many = [f"t{n}" for n in range(3000)]
    firsts = {identity: 0 for identity in ("a", "b", "c")}
    for target in many:
        firsts[max(firsts, key=lambda identity: preference(identity, target))] += 1
    assert all(800 < count < 1200 for count in firsts.values()), firsts
