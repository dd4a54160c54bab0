"""SIGSTOP at every stage boundary of an apply: the paused leader's Lease runs out, a standby takes the target
over and finishes the pass, then the paused one is thawed (SIGCONT). It must not write again: each write of a
pass is fenced on the Lease (held with the renew deadline's margin on the monotonic clock), and the pass
stops before its next stage.

Which process wrote what is told by the sim's audit log: the paused replica talks to the API server as a
ServiceAccount of its own, the standby as the admin.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_support import (
    STAGES,
    Rig,
    StagePauser,
    lease_holder,
    live_markers,
    markers_of,
    rig_at,
    service_account_kubeconfig,
    tail,
)
from helpers import freeze_process, wait_for

from reconciler.sim.audit import AuditLog

POINTS = ("", "0 foundation", "1a drivers", *STAGES[1:4])
# The last stage's mark is written once the pass is done writing: nothing is left to fence after it.
assert POINTS == ("", "0 foundation", "1a drivers", "1 drivers", "2 classes", "3 claims")
PAUSED_USER = "system:serviceaccount:kube-system:replica-a"
WRITES = ("create", "update", "patch", "delete", "deletecollection")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.replace(" ", "-") or "marked")
def test_a_leader_paused_at_a_stage_boundary_writes_nothing_after_it_lost_its_lease(
    rig: Rig, point: str
) -> None:
    audit = AuditLog()
    rig.sim.api.audit = audit
    paused_config = service_account_kubeconfig(rig, "replica-a")
    first = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a", "--kubeconfig", str(paused_config))
    rig.settled(first)
    standby = rig.start("cache-b", "--identity", "replica-b")
    wait_for(
        lambda: "replica-a" in standby.log.read_text() or standby.get("/healthz") == 200, 60, "standby up"
    )

    pauser = StagePauser(rig, point, run.proc.pid)
    try:
        newer = rig.commit("b")
        assert pauser.fired.wait(90), f"never reached {point!r}: {pauser.seen}\n{tail(run)}"
    finally:
        pauser.close()
    freeze_process(run.proc.pid)  # the signal is asynchronous: stopped for sure from here on
    # The standby takes the Lease once it runs out and finishes the interrupted apply.
    wait_for(lambda: lease_holder(rig) == "replica-b", 60, "the standby holds the Lease")
    rig.settled(newer)
    assert live_markers(rig.sim) == markers_of("b")

    seen = len(audit.events)
    logged = len(run.log.read_text())
    os.kill(run.proc.pid, signal.SIGCONT)
    wait_for(
        lambda: (
            "pass interrupted" in run.log.read_text()[logged:]
            or "pass failed" in run.log.read_text()[logged:]
        ),
        60,
        "the thawed pass stopped",
    )
    late = [
        (e.request.verb, e.request.path)
        for e in audit.events[seen:]
        if e.user == PAUSED_USER
        and e.request.verb in WRITES
        and e.request.resource != "leases"
        and not e.dry_run
    ]
    assert late == [], f"written after the Lease was lost: {late}\n{tail(run)}"
    assert lease_holder(rig) == "replica-b"
    assert live_markers(rig.sim) == markers_of("b")


@pytest.mark.parametrize("point", POINTS, ids=lambda p: p.replace(" ", "-") or "marked")
def test_a_leader_paused_in_a_rollback_writes_nothing_after_it_lost_its_lease(rig: Rig, point: str) -> None:
    audit = AuditLog()
    rig.sim.api.audit = audit
    paused_config = service_account_kubeconfig(rig, "replica-a")
    good = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a", "--kubeconfig", str(paused_config))
    rig.settled(good)
    standby = rig.start("cache-b", "--identity", "replica-b")
    wait_for(lambda: standby.get("/healthz") == 200, 60, "standby up")

    pauser = StagePauser(rig, point, run.proc.pid, "rollback")
    try:
        rig.commit("bad", trainers=4)  # 4 trainers, 3 free devices: verification fails, the rollback starts
        assert pauser.fired.wait(120), f"never reached rollback {point!r}: {pauser.seen}\n{tail(run)}"
    finally:
        pauser.close()
    freeze_process(run.proc.pid)
    wait_for(lambda: lease_holder(rig) == "replica-b", 60, "the standby holds the Lease")
    rig.settled(good)  # the standby finished the interrupted rollback
    wait_for(lambda: live_markers(rig.sim) == markers_of("a"), 60, "every stage back on the good revision")

    seen = len(audit.events)
    logged = len(run.log.read_text())
    os.kill(run.proc.pid, signal.SIGCONT)
    wait_for(
        lambda: any(s in run.log.read_text()[logged:] for s in ("pass interrupted", "pass failed")),
        60,
        "the thawed pass stopped",
    )
    late = [
        (e.request.verb, e.request.path)
        for e in audit.events[seen:]
        if e.user == PAUSED_USER
        and e.request.verb in WRITES
        and e.request.resource != "leases"
        and not e.dry_run
    ]
    assert late == [], f"written after the Lease was lost: {late}\n{tail(run)}"
    assert live_markers(rig.sim) == markers_of("a")
