"""The promotion gates of a `--config` target (`loop/config/gates.py`), and the pure decision over what an
upstream verified (`loop/promotion/decide.py`): eligibility, soak, approval, rehearsal, and the reasons why not."""

from __future__ import annotations

import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.errors import UserError
from reconciler.loop.config.gates import Gates
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.promotion.decide import decide, format_time, note_verified, withdraw
from reconciler.loop.store.records import Approval, VerifiedCommit

CHAIN = """\
targets:
  - name: staging
    repo: https://git.example.com/dra.git
    rehearseRollback: true
    publishVerified: true
  - name: production
    repo: https://git.example.com/dra.git
    promoteFrom: staging
    soak: 10m
    approval: manual
    requireRehearsal: true
  - name: edge
    repo: https://git.example.com/dra.git
    promoteFrom:
      ref: refs/dra-gitops/production/verified
"""


def test_a_chain_of_targets_reads_its_gates() -> None:
    staging, production, edge = load_targets(CHAIN, "targets.yaml")
    assert staging.gates == Gates(rehearse_rollback=True, publish_verified=True)
    assert production.gates == Gates(
        upstream="staging", soak=600.0, approval="manual", require_rehearsal=True
    )
    assert production.gates.where == "targets.yaml:8"
    assert edge.gates == Gates(upstream_ref="refs/dra-gitops/production/verified")
    assert edge.gates.promoted and not staging.gates.promoted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: nowhere\n",
            "targets.yaml:4: `promoteFrom` names an unknown target 'nowhere' (targets: a)",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: b\n  - name: b\n    repo: r\n    promoteFrom: a\n",
            "targets.yaml:4: promotion cycle: a → b → a",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: a\n",
            "targets.yaml:4: target 'a' cannot promote from itself",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: {ref: main}\n",
            "targets.yaml:4: `promoteFrom.ref` 'main' must be a full Git ref",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: {branch: main}\n",
            "targets.yaml:4: unknown key 'branch' (expected one of: ref)",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    soak: 5m\n",
            "targets.yaml:4: `soak` gates what comes from upstream: it needs `promoteFrom`",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n  - name: b\n    repo: r\n    promoteFrom: a\n    approval: maybe\n",
            "targets.yaml:7: `approval` must be one of auto, manual, not 'maybe'",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n  - name: b\n    repo: r\n    promoteFrom: a\n    soak: soon\n",
            "targets.yaml:7:",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    rehearseRollback: yes please\n",
            "targets.yaml:4: `rehearseRollback` must be true or false",
        ),
        (
            "targets:\n  - name: a\n    repo: r\n    promoteFrom: {ref: refs/x/verified}\n    requireRehearsal: true\n",
            "targets.yaml:5: `requireRehearsal` cannot be checked through a published ref",
        ),
    ],
)
def test_bad_gates_name_the_line(text: str, expected: str) -> None:
    with pytest.raises(UserError) as caught:
        load_targets(textwrap.dedent(text), "targets.yaml")
    assert str(caught.value).startswith(expected), str(caught.value)


NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def at(minutes_ago: float) -> str:
    return format_time(NOW - timedelta(minutes=minutes_ago))


def test_the_newest_verified_commit_newer_than_the_last_good_one_is_eligible() -> None:
    verified = [
        VerifiedCommit(sha="c3", at=at(1)),
        VerifiedCommit(sha="c2", at=at(5)),
        VerifiedCommit(sha="c1", at=at(9)),
    ]
    decision = decide(verified, Gates(upstream="s"), "c1", None, NOW)
    assert (decision.eligible, decision.deliver, decision.waiting) == ("c3", "c3", None)
    # Already on the newest: nothing to do; never back to an older one.
    assert decide(verified, Gates(upstream="s"), "c3", None, NOW).eligible is None


def test_soak_lets_an_older_commit_through_while_the_newer_one_soaks() -> None:
    verified = [
        VerifiedCommit(sha="c3", at=at(2)),
        VerifiedCommit(sha="c2", at=at(30), until=at(2)),
        VerifiedCommit(sha="c1", at=at(40), until=at(30)),
    ]
    decision = decide(verified, Gates(upstream="s", soak=600), None, None, NOW)
    assert (decision.deliver, decision.waiting, decision.soaking) == ("c2", "soak", "c3")
    assert decision.soak_until == NOW + timedelta(minutes=8)
    assert decision.seconds_to_soak(NOW) == 480
    assert decision.not_eligible == [("c3", "soaking upstream until 2026-01-01T12:08:00Z (soak 0:10:00)")]
    # A commit replaced upstream before it had soaked never becomes eligible.
    short = [
        VerifiedCommit(sha="c2", at=at(30), until=at(28)),
        VerifiedCommit(sha="c1", at=at(60), until=at(30)),
    ]
    decision = decide(short, Gates(upstream="s", soak=600), None, None, NOW)
    assert decision.deliver == "c1"
    assert decision.not_eligible == [
        ("c2", "held upstream only 0:02:00 before a newer commit replaced it (soak 0:10:00)")
    ]


def test_approval_withdrawal_and_rehearsal_gates() -> None:
    verified = [
        VerifiedCommit(sha="c2", at=at(1), rehearsed=True),
        VerifiedCommit(sha="c1", at=at(9), rehearsed=False),
    ]
    manual = Gates(upstream="s", approval="manual", require_rehearsal=True)
    decision = decide(verified, manual, None, None, NOW)
    assert (decision.eligible, decision.deliver, decision.waiting) == ("c2", None, "approval")
    pending = Approval(sha="c2", since=at(1))
    assert decide(verified, manual, None, pending, NOW).deliver is None
    given = Approval(sha="c2", since=at(1), approved_by="alice", approved_at=at(0))
    assert decide(verified, manual, None, given, NOW).deliver == "c2"
    # An approval of another commit does not carry over.
    assert decide(verified, manual, None, Approval(sha="c1", approved_by="alice"), NOW).deliver is None

    pulled = withdraw(verified, "c2", "rolled back to c1 by bob")
    decision = decide(pulled, manual, None, None, NOW)
    assert decision.eligible is None
    assert decision.not_eligible == [
        ("c2", "withdrawn upstream: rolled back to c1 by bob"),
        ("c1", "its rollback rehearsal failed upstream"),
    ]


def test_note_verified_keeps_the_held_span_of_each_commit() -> None:
    verified = note_verified([], "c1", at(10))
    verified = note_verified(verified, "c2", at(5), rehearsed=True)
    assert [(v.sha, v.at, v.until, v.rehearsed) for v in verified] == [
        ("c2", at(5), None, True),
        ("c1", at(10), at(5), None),
    ]
    # Verified again (a rollback to it): held from now, once in the list.
    verified = note_verified(verified, "c1", at(1))
    assert [(v.sha, v.at, v.until) for v in verified] == [("c1", at(1), None), ("c2", at(5), at(1))]
    assert len(note_verified([VerifiedCommit(sha=str(i)) for i in range(20)], "new", at(0))) == 10


def test_approve_refuses_a_target_its_config_file_does_not_have(tmp_path: Path) -> None:
    config = tmp_path / "targets.yaml"
    config.write_text(CHAIN)
    done = CliRunner().invoke(cli, ["approve", "--config", str(config), "--target", "prod", "0123456789ab"])
    assert done.exit_code == 1, done.output
    assert f"{config}: no target 'prod' (its targets: staging, production, edge)" in done.output
    done = CliRunner().invoke(cli, ["approve", "--config", str(config), "--target", "edge", "0123456789ab"])
    assert done.exit_code == 1, done.output
    assert f"{config}:12: target 'edge' does not ask for approval (`approval: manual`)" in done.output


def test_a_downstream_never_goes_back_to_a_commit_it_had() -> None:
    upstream = [
        VerifiedCommit(sha="c3", at=at(1)),
        VerifiedCommit(sha="c2", at=at(5)),
        VerifiedCommit(sha="c1", at=at(9)),
    ]
    # Rolled back here from c2 to c1 by a person: c2 is not taken again; c3, when verified upstream, is.
    had = note_verified(
        withdraw(note_verified([], "c2", at(4)), "c2", "rolled back to c1 by bob"), "c1", at(2)
    )
    decision = decide(upstream[1:], Gates(upstream="s"), "c1", None, NOW, had=had)
    assert decision.eligible is None
    assert decision.not_eligible == [("c2", "rolled back here: rolled back to c1 by bob")]
    assert decide(upstream, Gates(upstream="s"), "c1", None, NOW, had=had).deliver == "c3"
