"""A driver upgrade in waves on the dashboard (issue 32), from the page renderers (no cluster, no server):
the targets page's Progressing and Suspended rows, the history page and the in-progress commit's page show
the DaemonSet, `wave N of M (phase)`, nodes done of all, the failed nodes with their evidence and the next
soak's end, escaped; `inProgress.rollout` is read as one object or as a list of them. Over HTTP against a
real suspended rollout: tests/waves/test_waves_dashboard.py."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.ui.history import commit_page, history_page, in_progress_sha
from reconciler.ui.render import due
from reconciler.ui.targets import TargetView, rollouts_of, sync_row, targets_page

SHA, GOOD = "c" * 40, "a" * 40
SOAK_END = "2030-01-02T03:04:05.000Z"
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


def progress(**fields: Any) -> dict[str, Any]:
    return {
        "driver": "gpu.example.com",
        "namespace": "gpu-system",
        "daemonset": "gpu-example-kubelet-plugin",
        "revision": "7d4f",
        "wave": 2,
        "of": 4,
        "nodes": 6,
        "done": ["sim-node-1", "sim-node-4"],
        "failedNodes": {},
        "phase": "soaking",
        "soakUntil": SOAK_END,
        "since": "2030-01-02T03:00:00.000Z",
        **fields,
    }


def status(rollout: Any, suspended: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "lastGood": GOOD,
        "lastAttempted": {"sha": GOOD, "outcome": "applied"},
        "inProgress": {
            "sha": SHA,
            "operation": "apply",
            "stage": "",
            "since": "2030-01-02T03:00:00Z",
            "rollout": rollout,
        },
        "history": [{"id": 1, "sha": GOOD, "operation": "apply", "outcome": "applied", "at": "2030"}],
    }
    if suspended:
        out["suspended"] = {"at": "2030-01-02T03:02:00Z", "by": "tester"}
    return out


def words(page: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", page))


def test_a_progressing_row_shows_the_wave_nodes_failed_and_the_soaks_end() -> None:
    failed = {"sim-node-3": "CrashLoopBackOff: back-off 10s restarting failed container"}
    view = TargetView("gpu", "dra-gitops", status(progress(failedNodes=failed)))
    row = sync_row(view)
    assert row.sync == "Progressing" and len(row.rollouts) == 1
    shown = row.rollouts[0]
    assert shown.daemonset == "DaemonSet/gpu-system/gpu-example-kubelet-plugin"
    assert shown.wave == "wave 2 of 4 (soaking)" and (shown.done, shown.nodes) == (2, 6)
    assert shown.failed == sorted(failed.items()) and shown.soak_until == SOAK_END
    text = words(targets_page([view]))
    assert (
        "driver waves DaemonSet/gpu-system/gpu-example-kubelet-plugin gpu.example.com: wave 2 of 4 (soaking)"
        in text
    )
    assert "2/6 nodes done" in text
    assert (
        "✗ 1 failed node(s): sim-node-3 (CrashLoopBackOff: back-off 10s restarting failed container)" in text
    )
    assert "next soak ends 2030-01-02 03:04:05 UTC (in " in text


def test_a_suspended_rollout_shows_where_it_stands_and_offers_abort() -> None:
    view = TargetView("gpu", "dra-gitops", status(progress(phase="suspended"), suspended=True))
    row = sync_row(view)
    assert row.sync == "Suspended" and row.rollouts[0].wave == "wave 2 of 4 (suspended)"
    assert row.commands[:2] == ["dra-gitops resume --target gpu", "dra-gitops abort --target gpu"]
    assert row.rollouts[0].soak_until == SOAK_END  # the rest of the soak comes after `resume`
    text = words(targets_page([view]))
    assert "‖ Suspended" in text and "wave 2 of 4 (suspended)" in text and "next soak ends" in text
    # Suspended without a rollout: no abort offered (nothing in progress to revert).
    plain = TargetView("gpu", "dra-gitops", {**status(None, suspended=True), "inProgress": None})
    assert sync_row(plain).rollouts == [] and "dra-gitops abort --target gpu" not in sync_row(plain).commands


def test_no_soak_end_outside_soaking_and_suspended_and_nothing_without_a_rollout() -> None:
    replacing = sync_row(TargetView("gpu", "dra-gitops", status(progress(phase="replacing"))))
    assert replacing.rollouts[0].soak_until is None
    assert "next soak ends" not in targets_page([replacing.view])
    bare = TargetView("gpu", "dra-gitops", status(None))
    assert sync_row(bare).rollouts == [] and "driver waves" not in targets_page([bare])
    # A rollout the state holds that does not read as one (edited by hand) is left out, not a crash.
    assert rollouts_of(status({"wave": "x"})) == [] and rollouts_of(status("nonsense")) == []


def test_history_and_the_in_progress_commits_page_show_the_rollout() -> None:
    view = TargetView(
        "gpu", "dra-gitops", status(progress(phase="suspended"), suspended=True), {SHA: {"subject": "v0.4.0"}}
    )
    history = words(history_page(view))
    assert "in progress apply of" in history and "v0.4.0" in history and "‖ suspended" in history
    assert "wave 2 of 4 (suspended)" in history and "2/6 nodes done" in history
    # The commit being delivered has a page before the history holds a record of it.
    assert in_progress_sha(view, SHA[:7]) == SHA and in_progress_sha(view, "ccc") is None
    assert in_progress_sha(view, GOOD) is None and in_progress_sha(view, "") is None
    odd = TargetView("gpu", "dra-gitops", {"inProgress": {"sha": "<script>x", "operation": "apply"}})
    assert in_progress_sha(odd, "<scr") is None  # only hex prefixes, as for the history's commits
    page = words(commit_page(view, [], SHA))
    assert "In progress: apply at stage - (suspended)" in page and "wave 2 of 4 (suspended)" in page
    assert "0 record(s) in the history" in page and "Policy report" not in page
    # Another commit's page says nothing of the rollout.
    other = words(commit_page(view, view.status["history"]))
    assert "driver waves" not in other and "In progress" not in other


def test_two_rollouts_of_one_delivery_each_shown() -> None:
    second = progress(daemonset="nic-plugin", driver="nic.example.com", wave=1, of=2, nodes=3, done=[])
    view = TargetView("gpu", "dra-gitops", status([progress(phase="done", soakUntil=None), second]))
    shown = [(r.daemonset, r.wave) for r in sync_row(view).rollouts]
    assert shown == [
        ("DaemonSet/gpu-system/gpu-example-kubelet-plugin", "wave 2 of 4 (done)"),
        ("DaemonSet/gpu-system/nic-plugin", "wave 1 of 2 (soaking)"),
    ]
    text = words(targets_page([view]))
    assert "2/6 nodes done" in text and "0/3 nodes done" in text


@pytest.mark.parametrize("field", ["driver", "namespace", "daemonset", "phase", "soakUntil", "failed"])
def test_hostile_rollout_fields_are_escaped_everywhere(field: str) -> None:
    fields: dict[str, Any] = {"failedNodes": {HOSTILE: HOSTILE}} if field == "failed" else {field: HOSTILE}
    view = TargetView("gpu", "dra-gitops", status(progress(**fields), suspended=True))
    for page in (targets_page([view]), history_page(view), commit_page(view, [], SHA)):
        assert "<script>alert" not in page and "<img src=x" not in page
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_due_says_how_far_off_a_time_is() -> None:
    now = datetime(2030, 1, 2, 3, 0, 0, tzinfo=UTC)
    later = (now + timedelta(minutes=4, seconds=5)).isoformat()
    assert ">2030-01-02 03:04:05 UTC (in 4 min)</time>" in str(due(later, now))
    assert "(in 5 s)" in str(due((now + timedelta(seconds=5)).isoformat(), now))
    assert "(passed)" in str(due((now - timedelta(seconds=1)).isoformat(), now))
    assert str(due(None)) == "—" and "&lt;b&gt;" in str(due("<b>"))
