"""Staging, then production: production takes only what staging verified, through its gates (approval,
soak), on two simulated clusters following one Git repository. Real Git, real passes, real HTTP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import free_port
from helpers import GitRemote, wait_for
from pass_support import edit
from promotion_support import Stage, production_source, two_stages

from reconciler.cluster.client import ClusterClient
from reconciler.errors import UserError
from reconciler.loop.config.gates import Gates
from reconciler.loop.passes.handoff import Ask, hand_to_controller
from reconciler.loop.promotion.approval import approve
from reconciler.loop.promotion.upstream import ref_reader, state_reader
from reconciler.loop.store.operations import TargetRef
from reconciler.loop.store.records import Approval, PromotionView, SourceHealth
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.loop.store.statusview import render_status

PRODUCTION = TargetRef("production")


@pytest.fixture
def manual(remote: GitRemote, tmp_path: Path) -> Iterator[tuple[Stage, Stage]]:
    yield from two_stages(remote, tmp_path / "cache", Gates(), Gates(upstream="staging", approval="manual"))


def deployment(stage: Stage, name: str = "trainer") -> object:
    return stage.client.get(stage.client.resource_for("apps/v1", "Deployment"), "ml-team", name)


def test_production_takes_what_staging_verified_once_approved_and_never_what_failed_there(
    manual: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = manual
    good = remote.commit_and_push("example")
    # Staging has verified nothing yet: production has nothing to take, and writes nothing of it.
    first = production.reconciler.reconcile()
    assert first.outcome == "unchanged" and production.state().last_good is None
    assert staging.reconciler.reconcile().outcome == "applied"

    waiting = production.reconciler.reconcile()
    assert (waiting.outcome, waiting.sha) == ("awaiting-approval", good)
    state = production.state()
    assert state.approval is not None and state.approval.sha == good and state.approval.approved_by is None
    assert state.promotion is not None and state.promotion.eligible == good
    assert [(r.operation, r.outcome, r.sha) for r in state.history] == [
        ("promote", "awaiting-approval", good)
    ]
    assert deployment(production) is None  # nothing applied while it waits
    text = render_status("production", state, 5)
    assert f"awaiting:    approval of {good}" in text and "promotes from: staging" in text
    # Waiting again records nothing more.
    assert production.reconciler.reconcile().outcome == "awaiting-approval"
    assert len(production.state().history) == 1

    with pytest.raises(UserError, match="not a commit sha"):
        approve(production.client, PRODUCTION, "main", "alice")
    with pytest.raises(UserError, match=f"not eligible: {good[:12]} awaits approval"):
        approve(production.client, PRODUCTION, "0123456789abcdef", "alice")
    with pytest.raises(UserError, match="unknown target 'nowhere'"):
        approve(production.client, TargetRef("nowhere"), good, "alice")
    with pytest.raises(UserError, match="does not promote from an upstream"):
        approve(staging.client, TargetRef("staging"), good, "alice")

    given = approve(production.client, PRODUCTION, good[:10], "alice")
    assert (given.sha, given.approved_by) == (good, "alice")
    with pytest.raises(UserError, match="approved already, by alice"):
        approve(production.client, PRODUCTION, good, "bob")
    applied = production.reconciler.reconcile()
    assert (applied.outcome, applied.sha) == ("applied", good), applied.message
    state = production.state()
    assert state.last_good == good and state.approval is None
    record = state.history[0]
    assert (record.operation, record.outcome) == ("apply", "applied")
    assert record.approval is not None and record.approval["by"] == "alice"
    assert [(r.operation, r.requested_by) for r in state.history[1:3]] == [
        ("approve", "alice"),
        ("promote", None),
    ]
    assert deployment(production) is not None

    # A commit that fails in staging is rolled back there and never reaches production.
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    bad = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")
    assert staging.reconciler.reconcile().outcome == "rolled-back"
    after = production.reconciler.reconcile()
    assert (after.outcome, after.sha) == ("unchanged", good)
    state = production.state()
    assert state.last_good == good and state.approval is None
    assert bad not in {r.sha for r in state.history}
    with pytest.raises(UserError, match="no commit awaits approval"):
        approve(production.client, PRODUCTION, bad, "alice")


def test_a_later_verified_commit_supersedes_the_one_awaiting_approval(
    manual: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = manual
    remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert production.reconciler.reconcile().outcome == "awaiting-approval"

    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=20"]),
    )
    earlier = remote.commit_and_push("trainer: 20 epochs")
    assert staging.reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=30"]),
    )
    later = remote.commit_and_push("trainer: 30 epochs")
    assert staging.reconciler.reconcile().outcome == "applied"

    waiting = production.reconciler.reconcile()
    assert (waiting.outcome, waiting.sha) == ("awaiting-approval", later)
    state = production.state()
    assert state.approval is not None and state.approval.sha == later
    assert state.history[0].message is not None and "supersedes" in state.history[0].message
    with pytest.raises(UserError, match=f"{earlier[:12]} is not eligible: {later[:12]} awaits approval"):
        approve(production.client, PRODUCTION, earlier, "alice")
    approve(production.client, PRODUCTION, later, "alice")
    assert production.reconciler.reconcile().outcome == "applied"
    assert production.state().last_good == later


@pytest.fixture
def soaking(remote: GitRemote, tmp_path: Path) -> Iterator[tuple[Stage, Stage]]:
    yield from two_stages(remote, tmp_path / "cache", Gates(), Gates(upstream="staging", soak=2.0))


def test_production_waits_out_the_soak(soaking: tuple[Stage, Stage], remote: GitRemote) -> None:
    staging, production = soaking
    good = remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    verified_at = staging.state().verified[0].at
    result = production.reconciler.reconcile()
    if result.outcome == "soaking":  # on a slow machine the soak may be over by now
        state = production.state()
        assert state.last_good is None and state.promotion is not None
        assert state.promotion.waiting == "soak" and state.promotion.soak_until is not None
        assert state.promotion.soak_until > verified_at
        assert production.reconciler.wake_after is not None and production.reconciler.wake_after <= 2.0
        result = wait_for(
            lambda: (r := production.reconciler.reconcile()).outcome == "applied" and r,
            60,
            "the soak to end",
            interval=0.5,
        )
    assert (result.outcome, result.sha) == ("applied", good)


@pytest.fixture
def automatic(remote: GitRemote, tmp_path: Path) -> Iterator[tuple[Stage, Stage]]:
    yield from two_stages(remote, tmp_path / "cache", Gates(), Gates(upstream="staging"))


def test_a_commit_rolled_back_in_staging_by_a_person_never_reaches_production(
    automatic: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = automatic
    first = remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=20"]),
    )
    second = remote.commit_and_push("trainer: 20 epochs")
    assert staging.reconciler.reconcile().outcome == "applied"
    # Bob rolls staging back to the first commit before production looked: the second is withdrawn.
    ask = Ask("rollback", first, False, "bob", "staging", "dra-gitops", "dra-gitops-staging")
    hand_to_controller(staging.client, ask, 0, lambda _: None)
    assert staging.reconciler.reconcile().outcome == "rolled-back"
    verified = staging.state().verified
    assert [(v.sha, v.withdrawn) for v in verified] == [
        (first, None),
        (second, f"rolled back to {first[:12]} by bob"),
    ]
    result = production.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("applied", first), result.message
    assert production.reconciler.reconcile().outcome == "unchanged"
    assert second not in {r.sha for r in production.state().history}


REF = "refs/dra-gitops/staging/verified"


@pytest.fixture
def by_ref(remote: GitRemote, tmp_path: Path) -> Iterator[tuple[Stage, Stage]]:
    for staging, production in two_stages(
        remote, tmp_path / "cache", Gates(publish_verified=True), Gates(upstream_ref=REF, soak=2.0)
    ):
        production.reconciler.upstream = ref_reader(production_source(production), REF)
        yield staging, production


def test_a_published_ref_soaks_from_when_production_first_saw_it(
    by_ref: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = by_ref
    good = remote.commit_and_push("example")
    assert production.reconciler.reconcile().outcome == "unchanged"  # nothing published yet
    assert staging.reconciler.reconcile().outcome == "applied"
    assert staging.state().history[0].published == {"ref": REF, "sha": good}
    # The ref says no time: the soak starts now, when production first sees the commit.
    result = production.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("soaking", good)
    view = production.state().promotion
    assert view is not None and view.first_seen is not None and good in view.first_seen
    assert view.soak_until is not None and view.soak_until >= view.first_seen[good]
    with pytest.raises(UserError, match=f"{good[:12]} is not eligible: soaking upstream until "):
        approve(production.client, PRODUCTION, good, "alice")
    result = wait_for(
        lambda: (r := production.reconciler.reconcile()).outcome == "applied" and r,
        60,
        "the soak to end",
        interval=0.5,
    )
    assert (result.outcome, result.sha) == ("applied", good)


def test_an_approval_given_while_a_pass_runs_is_kept_by_its_write(client: ClusterClient) -> None:
    sha = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"
    store = StateStore(client, "production")
    store.save(
        TargetState(
            promotion=PromotionView(upstream="staging", eligible=sha, waiting="approval"),
            approval=Approval(sha=sha, since="2026-01-01T00:00:00Z"),
        )
    )
    during = store.load()  # what a pass read before the person approved
    approve(client, PRODUCTION, sha, "alice")
    during.source = SourceHealth(last_fetch="2026-01-01T00:00:01Z")
    store.save_during_pass(during)
    after = store.load()
    assert after.approval is not None and after.approval.approved_by == "alice"
    assert after.source is not None and after.source.last_fetch == "2026-01-01T00:00:01Z"
    assert [(r.operation, r.requested_by) for r in after.history] == [("approve", "alice")]


def test_a_commit_withdrawn_upstream_no_longer_awaits_approval(
    manual: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = manual
    first = remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert production.reconciler.reconcile().outcome == "awaiting-approval"
    approve(production.client, PRODUCTION, first, "alice")
    assert production.reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=20"]),
    )
    second = remote.commit_and_push("trainer: 20 epochs")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert f"verified:      {second} since " in render_status("staging", staging.state(), 1)
    assert production.reconciler.reconcile().outcome == "awaiting-approval"

    ask = Ask("rollback", first, False, "bob", "staging", "dra-gitops", "dra-gitops-staging")
    hand_to_controller(staging.client, ask, 0, lambda _: None)
    assert staging.reconciler.reconcile().outcome == "rolled-back"
    assert f"verified:      {first} since " in render_status("staging", staging.state(), 1)
    assert production.reconciler.reconcile().outcome == "unchanged"
    state = production.state()
    assert state.approval is None and state.last_good == first
    with pytest.raises(UserError, match="no commit awaits approval"):
        approve(production.client, PRODUCTION, second, "alice")


def test_an_unreachable_upstream_cluster_keeps_production_on_its_last_good_commit(
    automatic: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = automatic
    good = remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert production.reconciler.reconcile().outcome == "applied"
    # Staging's cluster cannot be reached (nothing listens there): production says so and stays.
    with ClusterClient.for_url(f"http://127.0.0.1:{free_port()}", timeout=2.0, retries=0) as gone:
        production.reconciler.upstream = state_reader(gone, "staging", "dra-gitops")
        result = production.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("unchanged", good)
    assert result.message.startswith("cannot read the upstream staging: ")
    view = production.state().promotion
    assert view is not None and view.error == result.message
    assert "upstream:    cannot read the upstream staging" in render_status(
        "production", production.state(), 1
    )


def test_a_person_rolls_production_back_and_it_stays_until_staging_verifies_a_newer_commit(
    automatic: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = automatic
    first = remote.commit_and_push("example")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert production.reconciler.reconcile().outcome == "applied"

    def epochs(n: int) -> None:
        edit(
            remote,
            "40-workloads/trainer.yaml",
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=[f"--epochs={n}"]),
        )

    epochs(20)
    second = remote.commit_and_push("trainer: 20 epochs")
    assert staging.reconciler.reconcile().outcome == "applied"
    assert production.reconciler.reconcile().sha == second
    epochs(30)
    third = remote.commit_and_push("trainer: 30 epochs")  # the branch's head while production rolls back

    ask = Ask("rollback", first, False, "carol", "production", "dra-gitops", "dra-gitops-production")
    hand_to_controller(production.client, ask, 0, lambda _: None)
    assert production.reconciler.reconcile().outcome == "rolled-back"
    state = production.state()
    assert state.last_good == first and state.hold is None
    # Staging still has the second commit as its last good: production does not take it again.
    stayed = production.reconciler.reconcile()
    assert (stayed.outcome, stayed.sha) == ("unchanged", first)
    view = production.state().promotion
    assert view is not None and view.not_eligible == [
        {"sha": second, "why": f"rolled back here: rolled back to {first[:12]} by carol"}
    ]
    # A newer commit verified in staging goes on as usual.
    assert staging.reconciler.reconcile().sha == third
    moved = production.reconciler.reconcile()
    assert (moved.outcome, moved.sha) == ("applied", third), moved.message
