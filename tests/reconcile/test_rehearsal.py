"""The rollback rehearsal in staging, and production taking only what staging rehearsed: push → staging
verified → rollback rehearsed (back to the previous commit, verified, re-applied, verified) → production
awaits approval → approved → production verified. Two simulated clusters, real Git, real passes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import GitRemote, wait_for
from pass_support import edit
from promotion_support import Stage, two_stages

from reconciler.checklist.common import CHECKED
from reconciler.checklist.gather import gather_facts
from reconciler.checklist.items import build_checklist
from reconciler.cluster.client import ClusterClient
from reconciler.loop.config.gates import Gates
from reconciler.loop.promotion.approval import approve
from reconciler.loop.store.operations import TargetRef
from reconciler.loop.store.statusview import render_status

REF = "refs/dra-gitops/staging/verified"


@pytest.fixture
def stages(remote: GitRemote, tmp_path: Path) -> Iterator[tuple[Stage, Stage]]:
    yield from two_stages(
        remote,
        tmp_path / "cache",
        Gates(rehearse_rollback=True, publish_verified=True),
        Gates(upstream="staging", approval="manual", require_rehearsal=True),
    )


def epochs(n: int) -> Any:
    return lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=[f"--epochs={n}"])


def trainer_args(stage: Stage) -> Any:
    live = stage.client.get(stage.client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    return live and live["spec"]["template"]["spec"]["containers"][0].get("args")


def test_staging_rehearses_the_rollback_and_production_takes_only_rehearsed_commits(
    stages: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = stages
    first = remote.commit_and_push("example")
    result = staging.reconciler.reconcile()
    assert result.outcome == "applied", result.message
    # The first commit's rollback is to nothing: rehearsed too (everything it created removed, then back).
    record = staging.state().history[0]
    assert record.rehearsal is not None and record.rehearsal["ok"] is True
    assert [s["step"] for s in record.rehearsal["steps"]] == ["rollback", "re-apply"]

    edit(remote, "40-workloads/trainer.yaml", epochs(20))
    second = remote.commit_and_push("trainer: 20 epochs")
    result = staging.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("applied", second), result.message
    state = staging.state()
    assert state.last_good == second and state.in_progress is None
    assert trainer_args(staging) == ["--epochs=20"]  # back on the commit after the rehearsal
    record = state.history[0]
    assert (record.operation, record.outcome, record.sha) == ("apply", "applied", second)
    rehearsal = record.rehearsal
    assert rehearsal is not None and rehearsal["ok"] is True
    steps = rehearsal["steps"]
    assert [(s["step"], s["sha"], s["outcome"]) for s in steps] == [
        ("rollback", first, "applied"),
        ("re-apply", second, "applied"),
    ]
    for step in steps:
        assert step["at"] and step["seconds"] > 0 and "claim(s) allocated" in step["verified"]
    assert [(v.sha, v.rehearsed) for v in state.verified] == [(second, True), (first, True)]
    assert record.published == {"ref": REF, "sha": second}
    assert (
        f"verified:      {second} since {state.verified[0].at} (rehearsed, published as {REF})"
        in render_status("staging", state, 1)
    )
    reasons = [e["reason"] for e in staging.client.list_kind("", "Event", "dra-gitops")]
    assert reasons.count("RollbackRehearsed") == 2

    waiting = production.reconciler.reconcile()
    assert (waiting.outcome, waiting.sha) == ("awaiting-approval", second)
    approve(production.client, TargetRef("production"), second, "alice")
    applied = production.reconciler.reconcile()
    assert (applied.outcome, applied.sha) == ("applied", second), applied.message
    assert trainer_args(production) == ["--epochs=20"]
    promoted = production.state().history[0].promoted
    assert promoted == {"from": "staging", "verifiedAt": staging.state().verified[0].at, "rehearsed": True}

    # The checklist's evidence that the rollback plan was tested in staging, on both sides.
    for stage, line in (
        (staging, f"rollback rehearsed at {steps[-1]['at']}: rollback to {first[:12]} applied in"),
        (production, "its rollback was rehearsed in staging before it was promoted here"),
    ):
        item = build_checklist(gather_facts(stage.client, stage.name, "dra-gitops")).item("rollback-target")
        assert item.status == CHECKED and any(line in e for e in item.evidence), item.evidence


def test_production_refuses_what_staging_did_not_rehearse(remote: GitRemote, tmp_path: Path) -> None:
    for staging, production in two_stages(
        remote, tmp_path / "cache", Gates(), Gates(upstream="staging", require_rehearsal=True)
    ):
        sha = remote.commit_and_push("example")
        assert staging.reconciler.reconcile().outcome == "applied"
        result = production.reconciler.reconcile()
        assert (result.outcome, production.state().last_good) == ("unchanged", None)
        view = production.state().promotion
        assert view is not None and view.eligible is None
        assert view.not_eligible == [
            {"sha": sha, "why": "its rollback was not rehearsed upstream (requireRehearsal)"}
        ]


def hog_free_devices(client: ClusterClient) -> None:
    """Someone else's pods take the two free devices (one each: the two may be on different nodes)."""
    claims = client.resource_for("resource.k8s.io/v1", "ResourceClaim")
    for index in range(2):
        name = f"hog-{index}"
        request = {"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}
        client.apply(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"devices": {"requests": [request]}},
            }
        )
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": "default"},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimName": name}],
                    "containers": [
                        {"name": "c", "image": "busybox", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            }
        )
    for index in range(2):
        wait_for(
            lambda n=f"hog-{index}": ((client.get(claims, "default", n) or {}).get("status") or {}).get(
                "allocation"
            ),
            60,
            f"hog-{index} allocated",
        )


def test_a_rollback_that_no_longer_fits_fails_the_rehearsal_and_production_refuses_the_commit(
    stages: tuple[Stage, Stage], remote: GitRemote
) -> None:
    staging, production = stages
    first = remote.commit_and_push("example: two trainers and a notebook, 3 of the 4 devices")
    assert staging.reconciler.reconcile().outcome == "applied"
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=1))
    second = remote.commit_and_push("one trainer")
    quiet = staging.reconciler.progress

    def progress(message: str) -> None:
        quiet(message)
        if "rehearsing the rollback" in message:
            # Between the verification and the rehearsal, the devices the first commit needs are taken.
            hog_free_devices(staging.client)

    staging.reconciler.progress = progress
    result = staging.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("applied", second), result.message
    state = staging.state()
    assert state.last_good == second and state.in_progress is None
    rehearsal = state.history[0].rehearsal
    assert rehearsal is not None and rehearsal["ok"] is False
    assert [(s["step"], s["sha"], s["outcome"]) for s in rehearsal["steps"]] == [
        ("rollback", first, "verify-failed"),
        ("re-apply", second, "applied"),
    ]
    assert "cannot allocate all claims" in rehearsal["steps"][0]["message"]
    assert [(v.sha, v.rehearsed) for v in state.verified][0] == (second, False)
    # Not published: the ref stays on the last commit whose rehearsal passed.
    assert state.history[0].published == {"ref": REF, "error": "its rollback rehearsal failed"}
    assert remote.git("rev-parse", REF, cwd=remote.bare) == first
    trainer = staging.client.get(staging.client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert trainer is not None and trainer["spec"]["replicas"] == 1
    events = staging.client.list_kind("", "Event", "dra-gitops")
    assert any(e["reason"] == "RollbackRehearsalFailed" and second[:12] in e["message"] for e in events)
    item = build_checklist(gather_facts(staging.client, "staging", "dra-gitops")).item("rollback-target")
    assert item.status != CHECKED and any("the rollback rehearsal FAILED" in e for e in item.evidence)

    # Production (requireRehearsal) takes the first commit, never the second.
    result = production.reconciler.reconcile()
    assert (result.outcome, result.sha) == ("awaiting-approval", first)
    view = production.state().promotion
    assert view is not None and view.not_eligible == [
        {"sha": second, "why": "its rollback rehearsal failed upstream"}
    ]
