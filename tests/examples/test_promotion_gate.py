"""examples/ci/promotion-gate.py: the verdict the promote pipelines act on, for each state of the gate, run
as the pipelines run it (a process reading the JSON `dra-gitops status -o json` prints)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ci_runner import CI

SCRIPT = CI / "promotion-gate.py"
SHA = "a" * 40
OTHER = "b" * 40


def verdict(tmp_path: Path, target: dict[str, Any], upstream: dict[str, Any] | None = None) -> str:
    files = []
    for name, data in (("target", target), ("upstream", upstream)):
        if data is not None:
            path = tmp_path / f"{name}.json"
            path.write_text(json.dumps(data))
            files.append(str(path))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), SHA, *files], capture_output=True, text=True, check=True, timeout=60
    )
    return done.stdout.strip()


def promoted(**extra: Any) -> dict[str, Any]:
    return {
        "lastGood": None,
        "lastAttempted": None,
        "inProgress": None,
        "promotion": {"upstream": "staging"},
    } | extra


@pytest.mark.parametrize(
    ("target", "expected"),
    [
        (
            promoted(approval={"sha": SHA, "since": "2026-03-02T10:14:03Z"}),
            "awaiting aaaaaaaaaaaa awaits approval",
        ),
        (
            promoted(approval={"sha": SHA, "approvedBy": "alice", "approvedAt": "t"}),
            "approved aaaaaaaaaaaa was",
        ),
        (promoted(lastGood=SHA), "delivered aaaaaaaaaaaa is the last good commit already"),
        (
            promoted(
                promotion={
                    "upstream": "staging",
                    "notEligible": [{"sha": SHA, "why": "soaking upstream until 2026-03-02T10:44:10Z"}],
                }
            ),
            "waiting aaaaaaaaaaaa: soaking upstream until",
        ),
        (
            promoted(
                promotion={
                    "upstream": "staging",
                    "notEligible": [{"sha": SHA, "why": "withdrawn upstream: x"}],
                }
            ),
            "refused aaaaaaaaaaaa: withdrawn upstream: x",
        ),
        (
            promoted(approval={"sha": OTHER, "since": "t"}),
            "refused bbbbbbbbbbbb awaits approval, not aaaaaaaaaaaa",
        ),
        (promoted(), "waiting staging has not verified aaaaaaaaaaaa yet"),
        (
            promoted(promotion={"upstream": "staging", "error": "cannot read the upstream"}),
            "waiting cannot read",
        ),
        ({"lastGood": OTHER, "history": []}, "refused the target does not promote from an upstream"),
    ],
    ids=[
        "awaiting",
        "approved",
        "delivered",
        "soaking",
        "withdrawn",
        "superseded",
        "not-yet",
        "error",
        "no-gate",
    ],
)
def test_gate_verdicts(tmp_path: Path, target: dict[str, Any], expected: str) -> None:
    assert verdict(tmp_path, target).startswith(expected)


def test_the_upstream_says_at_once_what_it_failed(tmp_path: Path) -> None:
    failed = {"lastAttempted": {"sha": SHA, "outcome": "verify-failed", "rolledBack": True}, "verified": []}
    assert verdict(tmp_path, promoted(), failed) == (
        "refused the upstream did not verify aaaaaaaaaaaa: its attempt ended verify-failed"
    )
    # Failed, then a newer commit attempted: the history still says so.
    later = {
        "lastAttempted": {"sha": OTHER, "outcome": "applied"},
        "history": [{"sha": SHA, "outcome": "denied"}],
    }
    assert verdict(tmp_path, promoted(), later).startswith(
        "refused the upstream did not verify aaaaaaaaaaaa: denied"
    )
    # Verified (or still running): production has just not looked yet.
    verified = {"lastAttempted": {"sha": SHA, "outcome": "applied"}, "verified": [{"sha": SHA}]}
    assert verdict(tmp_path, promoted(), verified).startswith("waiting")
    running = {
        "inProgress": {"sha": SHA, "operation": "apply"},
        "lastAttempted": {"sha": SHA, "outcome": "denied"},
    }
    assert verdict(tmp_path, promoted(), running).startswith("waiting")


def test_outcome(tmp_path: Path) -> None:
    def outcome(target: dict[str, Any]) -> str:
        path = tmp_path / "outcome.json"
        path.write_text(json.dumps(target))
        argv = [sys.executable, str(SCRIPT), "--outcome", SHA, str(path)]
        return subprocess.run(argv, capture_output=True, text=True, check=True, timeout=60).stdout.strip()

    assert outcome({"lastGood": SHA, "lastAttempted": {"sha": SHA, "outcome": "applied"}}).startswith(
        "applied"
    )
    rolled = {
        "lastGood": OTHER,
        "lastAttempted": {"sha": SHA, "outcome": "verify-failed", "rolledBack": True},
    }
    assert outcome(rolled) == "failed aaaaaaaaaaaa: verify-failed (rolled back)"
    assert outcome({"lastGood": OTHER, "lastAttempted": {"sha": OTHER}}).startswith("waiting")
    assert outcome({"lastGood": SHA, "inProgress": {"operation": "rehearsal"}}).startswith("waiting a pass")
