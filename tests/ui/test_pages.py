"""The page renderers (Jinja2 templates, no cluster, no Git, no server): escaping of hostile strings
everywhere, bidi isolation and truncation, device states, totals, filters, holders, pending claims and the
compact view, the targets page's sync status and commands, the history's table, filter, paging and live
marker, the commit page's failure first, and the report as its pass recorded it."""

from __future__ import annotations

import re
from typing import Any

import pytest
from markupsafe import escape

from reconciler.ui.devicemap import device_map_page
from reconciler.ui.devices import (
    DeviceFilter,
    build_device_cells,
    link_holders,
    pending_claims,
    totals_by_driver,
)
from reconciler.ui.history import commit_page, history_page, matching
from reconciler.ui.html import path
from reconciler.ui.render import text, visible
from reconciler.ui.report import report_markdown, report_page
from reconciler.ui.targets import TargetView, sync_row, targets_page

HOSTILE = [
    "<script>alert(1)</script>",
    '"><img src=x onerror=alert(1)>',
    "' onmouseover='alert(1)",
    "</title><script>x()</script>",
    "&lt;already&gt; escaped? &amp;",
]


def no_markup_from(page: str, hostile: str) -> None:
    """`hostile` appears only escaped: its tags never open, its quotes never close an attribute."""
    assert hostile not in page or not re.search(r"[<>\"']", hostile)
    assert "<script>alert" not in page and "<img src=x" not in page and "onmouseover='" not in page
    assert "<script>x()" not in page


def record(**fields: Any) -> dict[str, Any]:
    return {
        "id": 1,
        "sha": "a" * 40,
        "operation": "apply",
        "outcome": "applied",
        "at": "2026-01-01T00:00:00Z",
        **fields,
    }


@pytest.mark.parametrize("hostile", HOSTILE)
def test_every_value_is_escaped_on_every_page(hostile: str) -> None:
    history = [
        record(
            id=2,
            sha="b" * 40,
            outcome="denied",
            message=hostile,
            requestedBy=hostile,
            diff={"summary": hostile},
            decisions=[
                {
                    "rule": hostile,
                    "severity": "deny",
                    "ref": hostile,
                    "msg": hostile,
                    "path": hostile,
                    "line": 3,
                }
            ],
            devices=[{"claim": hostile, "pod": hostile, "devices": [hostile], "node": hostile}],
        ),
        record(
            approval={"by": hostile, "at": hostile},
            promoted={"from": hostile, "verifiedAt": hostile, "rehearsed": True},
            published={"ref": hostile, "error": hostile},
            rehearsal={
                "ok": False,
                "steps": [
                    {
                        "step": hostile,
                        "sha": hostile,
                        "outcome": hostile,
                        "at": hostile,
                        "seconds": 1.5,
                        "verified": hostile,
                        "message": hostile,
                    }
                ],
            },
        ),
    ]
    status = {
        "lastGood": "a" * 40,
        "lastAttempted": {"sha": "b" * 40, "outcome": "denied", "at": hostile},
        "inProgress": {"operation": hostile, "sha": hostile, "stage": hostile, "since": hostile},
        "suspended": {"at": hostile, "by": hostile},
        "source": {"ok": False, "since": hostile, "error": hostile},
        "history": history,
        "promotion": {
            "upstream": hostile,
            "eligible": hostile,
            "waiting": "soak",
            "soakUntil": hostile,
            "notEligible": [{"sha": hostile, "why": hostile}],
            "error": hostile,
        },
        "approval": {"sha": hostile, "since": hostile},
        "verified": [{"sha": hostile, "at": hostile, "rehearsed": True, "withdrawn": hostile}],
    }
    commits = {"b" * 40: {"subject": hostile, "author": hostile, "message": hostile}}
    view = TargetView(hostile, hostile, status, commits, cluster=(hostile, hostile))
    cells = build_device_cells(
        [_slice("gpu.example.com", "node-a", ["gpu-0"])],
        [
            _claim(
                "ns",
                hostile,
                "gpu.example.com",
                "node-a",
                "gpu-0",
                annotations={"x/y": hostile},
                labels={"l": hostile},
            )
        ],
        [_node("node-a")],
    )
    rendered = [
        targets_page([view]),
        history_page(view),
        commit_page(view, history[:1]),
        commit_page(view, history[1:]),
        device_map_page(cells, DeviceFilter(namespace=hostile)),
        device_map_page(cells, DeviceFilter()),
        device_map_page(cells, DeviceFilter(driver=hostile), [], [(hostile, hostile), ("b", "B")], hostile),
        device_map_page([], DeviceFilter(), [], [(hostile, hostile), ("b", "B")], "b", error=hostile),
        targets_page([TargetView(hostile, hostile, {}, error=hostile, cluster=(hostile, hostile))]),
        report_page(view, history[0]),
    ]
    for page in rendered:
        no_markup_from(page, hostile)
    assert str(escape(hostile)) in rendered[2]  # shown, as text
    assert str(escape(hostile)) in rendered[5]


def test_text_isolates_direction_shows_bidi_controls_and_cuts() -> None:
    reversing = "evil\u202egnp.exe"
    assert str(text(reversing)) == '<bdi dir="auto">evil⟨U+202E⟩gnp.exe</bdi>'
    assert "\u202e" not in visible(reversing + "\u2066\u200f")
    long = "s" * 3000
    cut = str(text(long, 80))
    assert '">' + "s" * 79 + "…</bdi>" in cut and 'title="' + long + '"' in cut
    assert str(text("<b>")) == '<bdi dir="auto">&lt;b&gt;</bdi>'
    assert path("targets", "a/b?c", "history") == "/targets/a%2Fb%3Fc/history"


def test_hostile_subjects_and_file_names_stay_in_their_place() -> None:
    """A 3,000-character subject is cut (the outcome stays on screen); a U+202E in a file name cannot
    reverse the failure message around it."""
    subject = "x" * 3000
    message = "apply of manifests/\u202egpu.yaml failed"
    history = [record(id=1, sha="b" * 40, outcome="apply-failed", message=message)]
    view = TargetView(
        "t",
        "ns",
        {"lastAttempted": {"sha": "b" * 40, "outcome": "apply-failed"}, "history": history},
        {"b" * 40: {"subject": subject}},
    )
    for page in (targets_page([view]), history_page(view), commit_page(view, history)):
        assert "\u202e" not in page and "⟨U+202E⟩" in page
        assert "x" * 100 + "…" not in page or 'class="cut"' in page
        assert 'data-outcome="apply-failed"' in page
    row = re.search(r'<tr id="record-1".*?</tr>', history_page(view), re.S)
    assert (
        row is not None
        and 'class="cut"' in row.group(0)
        and len(re.sub(r'title="[^"]*"', "", row.group(0))) < 1500
    )


def _slice(driver: str, node: str, devices: list[str], pool: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{driver}"},
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": pool or node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": d} for d in devices],
        },
    }


def _claim(ns: str, name: str, driver: str, pool: str, device: str, **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"namespace": ns, "name": name, **meta},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": driver, "pool": pool, "device": device}]}
            },
            "reservedFor": [{"resource": "pods", "name": f"{name}-pod", "uid": "1"}],
        },
    }


def _node(name: str, ready: bool = True) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]},
    }


def test_device_states_holders_and_totals() -> None:
    slices = [
        _slice("gpu.example.com", "a", ["gpu-0", "gpu-1", "gpu-2"]),
        _slice("gpu.example.com", "b", ["gpu-0"]),
        _slice("nic.example.com", "a", ["nic-0"]),
    ]
    claims = [
        _claim("ml", "train", "gpu.example.com", "a", "gpu-0"),
        # admin access holds no device (as the inventory counts it)
        {
            "metadata": {"namespace": "ops", "name": "watch"},
            "status": {
                "allocation": {
                    "devices": {
                        "results": [
                            {"driver": "gpu.example.com", "pool": "a", "device": "gpu-1", "adminAccess": True}
                        ]
                    }
                }
            },
        },
    ]
    rules = [
        {"spec": {"deviceSelector": {"device": "gpu-2"}, "taint": {"key": "broken", "effect": "NoSchedule"}}}
    ]
    cells = build_device_cells(slices, claims, [_node("a"), _node("b", ready=False)], rules)
    states = {(c.driver, c.node, c.name): c.state for c in cells}
    assert states == {
        ("gpu.example.com", "a", "gpu-0"): "allocated",
        ("gpu.example.com", "a", "gpu-1"): "free",
        ("gpu.example.com", "a", "gpu-2"): "tainted",
        ("gpu.example.com", "b", "gpu-0"): "node-not-ready",
        ("nic.example.com", "a", "nic-0"): "free",
    }
    held = next(c for c in cells if c.claim)
    assert (held.claim, held.namespace, held.pods) == ("ml/train", "ml", ["train-pod"])
    totals = totals_by_driver(cells)
    assert {d: (t.devices, t.allocated, t.free) for d, t in totals.items()} == {
        "gpu.example.com": (4, 1, 3),
        "nic.example.com": (1, 0, 1),
    }
    page = device_map_page(cells, DeviceFilter())
    assert "<strong>Total</strong></td><td>5</td><td>1</td><td>4</td>" in page
    # Every state has a word and a shape, not only a colour.
    for word, shape in (("free", "○"), ("allocated", "●"), ("tainted", "▲"), ("node not Ready", "✕")):
        assert word in page and shape in page
    assert "broken:NoSchedule" in page


def _pod(
    ns: str, name: str, claim: str, owner: tuple[str, str] | None = None, why: str = ""
) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": ns, "name": name}
    if owner:
        meta["ownerReferences"] = [{"kind": owner[0], "name": owner[1]}]
    status: dict[str, Any] = {"resourceClaimStatuses": [{"name": "gpu", "resourceClaimName": claim}]}
    if why:
        status["conditions"] = [{"type": "PodScheduled", "status": "False", "message": why}]
    return {"metadata": meta, "spec": {"resourceClaims": [{"name": "gpu"}]}, "status": status}


def test_device_holders_and_pending_claims() -> None:
    """device → claim → pod → workload → target; a claim without a device, with the pod that waits."""
    slices = [_slice("gpu.example.com", "a", ["gpu-0"])]
    set_ids = {"applyset-x-v1": "prod"}
    claims = [
        _claim(
            "ml",
            "train",
            "gpu.example.com",
            "a",
            "gpu-0",
            labels={"applyset.kubernetes.io/part-of": "applyset-x-v1"},
        ),
        {
            "metadata": {
                "namespace": "ml",
                "name": "more",
                "labels": {"applyset.kubernetes.io/part-of": "applyset-x-v1"},
            },
            "status": {},
        },
    ]
    pods = [
        _pod("ml", "train-pod", "train", ("ReplicaSet", "trainer-5d9f")),
        _pod(
            "ml",
            "waiter",
            "more",
            ("Job", "burst"),
            why="0/2 nodes are available: cannot allocate all claims",
        ),
    ]
    cells = build_device_cells(slices, claims, [_node("a")], set_ids=set_ids)
    link_holders(cells, pods, set_ids)
    (held,) = cells
    assert (held.workloads, held.target) == (["Deployment/trainer"], "prod")
    (waiting,) = pending_claims(claims, pods, set_ids)
    assert (waiting.claim, waiting.waiting, waiting.target) == (
        "ml/more",
        [("waiter", "0/2 nodes are available: cannot allocate all claims")],
        "prod",
    )
    page = device_map_page(cells, DeviceFilter(), pending=[waiting], live={"prod": "a" * 40})
    assert 'data-claim="ml/more"' in page and "cannot allocate all claims" in page
    assert "Deployment/trainer" in page and 'href="/targets/prod/history"' in page
    assert f'href="/targets/prod/commits/{"a" * 40}"' in page


def test_compact_view_for_large_clusters() -> None:
    slices = [_slice("gpu.example.com", f"n{i:03d}", [f"gpu-{j}" for j in range(8)]) for i in range(50)]
    cells = build_device_cells(
        slices,
        [_claim("ml", "train", "gpu.example.com", "n000", "gpu-0")],
        [_node(f"n{i:03d}") for i in range(50)],
    )
    page = device_map_page(cells, DeviceFilter())  # 400 devices: compact by default
    assert page.count('<li class="c ') == 400 and 'class="tile ' not in page.replace(
        'class="tile free"', ""
    ).replace('class="tile allocated"', "").replace('class="tile tainted"', "").replace(
        'class="tile node-not-ready"', ""
    )
    assert page.count('class="node-row compact"') == 50
    assert 'title="gpu-0: allocated, claim ml/train, pods train-pod"' in page
    cards = device_map_page(cells, DeviceFilter(), view="cards")
    assert cards.count("data-device=") == 400


def test_device_filters_keep_the_totals_whole() -> None:
    slices = [_slice("gpu.example.com", "a", ["gpu-0", "gpu-1"]), _slice("gpu.example.com", "b", ["gpu-0"])]
    claims = [
        _claim("ml", "train", "gpu.example.com", "a", "gpu-0"),
        _claim("web", "infer", "gpu.example.com", "b", "gpu-0"),
    ]
    cells = build_device_cells(slices, claims, [_node("a"), _node("b")])
    page = device_map_page(cells, DeviceFilter(namespace="ml"))
    assert page.count("data-device=") == 1 and "ml/train" in page and "web/infer" not in page
    assert "Showing 1 of 3 device(s)." in page
    assert "<strong>Total</strong></td><td>3</td><td>2</td><td>1</td>" in page  # totals: the whole cluster
    assert '<option value="ml" selected>' in page
    page = device_map_page(cells, DeviceFilter(node="a"))
    assert set(re.findall(r'data-node="([^"]*)"', page)) == {"a"}
    assert "No device matches the filters." in device_map_page(cells, DeviceFilter(driver="other"))


def test_targets_page_promotion_column_only_when_the_status_carries_it() -> None:
    plain = TargetView(
        "prod",
        "dra-gitops",
        {"lastGood": "a" * 40, "lastAttempted": {"sha": "a" * 40, "outcome": "applied", "rolledBack": None}},
    )
    assert "awaiting approval" not in targets_page([plain])
    upstream = TargetView(
        "staging",
        "dra-gitops",
        {**plain.status, "verified": [{"sha": "a" * 40, "at": "t1", "rehearsed": True}]},
    )
    waiting = TargetView(
        "production",
        "dra-gitops",
        {
            **plain.status,
            "promotion": {
                "upstream": "staging",
                "eligible": "c" * 40,
                "waiting": "soak",
                "soakUntil": "t9",
                "notEligible": [{"sha": "e" * 40, "why": "soaking upstream until t9"}],
            },
            "approval": {"sha": "c" * 40, "since": "t2"},
        },
    )
    page = targets_page([plain, upstream, waiting])
    text = re.sub(r"<[^>]+>", "", page)
    assert "Promotion" in page
    assert "promotes from staging" in text
    assert f"eligible {'c' * 12}" in text
    assert (
        f"awaiting approval ‖ {'c' * 12} since t2: dra-gitops approve --target production {'c' * 12}" in text
    )
    assert "soaking a newer commit is eligible at t9" in text
    assert f"not eligible {'e' * 12}: soaking upstream until t9" in text
    assert f"verified {'a' * 12} since t1 (rehearsed)" in text
    assert f'href="/targets/production/commits/{"c" * 40}"' in page  # a sha links to its commit
    assert f'href="/targets/production/commits/{"e" * 40}"' in page
    approved = TargetView(
        "production",
        "dra-gitops",
        {
            "promotion": {"upstream": "staging"},
            "approval": {"sha": "c" * 40, "approvedBy": "ann", "approvedAt": "t3"},
        },
    )
    text = re.sub(r"<[^>]+>", "", targets_page([approved]))
    assert f"approved {'c' * 12} by ann at t3" in text and "eligible nothing newer" in text
    failed = TargetView(
        "x", "ns", {"lastAttempted": {"sha": "e" * 40, "outcome": "verify-failed", "rolledBack": False}}
    )
    assert 'data-outcome="rollback-failed"' in targets_page([failed])
    assert "No targets" in targets_page([])


def test_sync_status_reason_and_commands() -> None:
    good, bad = "a" * 40, "b" * 40
    synced = TargetView(
        "prod", "dra-gitops", {"lastGood": good, "lastAttempted": {"sha": good, "outcome": "applied"}}
    )
    degraded = TargetView(
        "prod",
        "team",
        {
            "lastGood": good,
            "lastAttempted": {"sha": bad, "outcome": "verify-failed", "rolledBack": True},
            "history": [record(sha=bad, outcome="verify-failed", message="claim ml/train: no device\nmore")],
        },
    )
    suspended = TargetView("prod", "dra-gitops", {**synced.status, "suspended": {"at": "t", "by": "ann"}})
    progressing = TargetView(
        "prod",
        "dra-gitops",
        {**synced.status, "inProgress": {"operation": "apply", "sha": bad, "stage": "20-classes"}},
    )
    waiting = TargetView("prod", "dra-gitops", {**synced.status, "approval": {"sha": bad, "since": "t"}})
    out = TargetView(
        "prod", "dra-gitops", {"lastGood": good, "lastAttempted": {"sha": bad, "outcome": "held"}}
    )
    rows = [sync_row(v) for v in (synced, degraded, suspended, progressing, waiting, out)]
    assert [r.sync for r in rows] == [
        "Synced",
        "Degraded",
        "Suspended",
        "Progressing",
        "Awaiting approval",
        "OutOfSync",
    ]
    assert rows[1].reason == "claim ml/train: no device"
    assert rows[1].commands[0] == "dra-gitops retry --target prod --state-namespace team"
    assert "dra-gitops resume --target prod" in rows[2].commands
    assert "dra-gitops abort --target prod" in rows[3].commands
    assert f"dra-gitops approve --target prod {bad[:12]}" in rows[4].commands
    page = targets_page([degraded])
    assert 'data-sync="Degraded"' in page and "claim ml/train: no device" in page and "more" not in page
    assert '<code class="command">dra-gitops retry --target prod --state-namespace team</code>' in page
    assert "<button" not in page and "<form" not in page  # never a button that writes


def test_history_is_a_compact_table_filtered_paged_with_the_live_entry_marked() -> None:
    good, bad = "a" * 40, "b" * 40
    history = [
        record(
            id=i,
            sha=bad if i % 2 else good,
            outcome="verify-failed" if i % 2 else "applied",
            timings={"apply": 1.0, "verify": 0.5},
        )
        for i in range(60, 0, -1)
    ]
    view = TargetView("t", "ns", {"lastGood": good, "history": history})
    page = history_page(view)
    ids = re.findall(r'<tr id="record-(\d+)"', page)
    assert ids == [str(i) for i in range(60, 35, -1)] and len(set(ids)) == len(ids)
    assert page.count("● live") == 1 and '<tr id="record-60" data-record="60" class="live-entry"' in page
    assert "1.5s" in page and "page 1 of 3" in page and 'href="/targets/t/history?page=2"' in page
    failed = history_page(view, "failed", 2)
    assert re.findall(r'<tr id="record-(\d+)"', failed) == [str(i) for i in range(9, 0, -2)]
    assert "● live" not in failed and '<option value="failed" selected>' in failed
    assert (
        re.findall(r'<tr id="record-(\d+)"', history_page(view, "applied", 9))[-1] == "2"
    )  # past the end: the last page


def test_commit_pages_only_for_commits_of_the_history() -> None:
    records = [record(id=2, sha="ab12" + "0" * 36), record(id=1, sha="ab13" + "0" * 36)]
    assert matching(records, "ab12") == records[:1]
    assert matching(records, "ab1") == [] and matching(records, "ab1") == []  # too short, or ambiguous
    assert (
        matching(records, "ab") == []
        and matching(records, "main~0") == []
        and matching(records, "f" * 40) == []
    )
    assert matching(records, "AB12") == records[:1]


def test_history_shows_rehearsal_steps_approval_and_the_upstreams_word() -> None:
    steps = [
        {"step": "rollback", "sha": "a" * 40, "outcome": "applied", "at": "t1", "seconds": 2.25,
         "verified": "1 claim(s) allocated", "message": "verified"},
        {"step": "re-apply", "sha": "b" * 40, "outcome": "verify-failed", "at": "t2", "seconds": 3,
         "verified": "", "message": "claim ml/train not allocated"},
    ]  # fmt: skip
    history = [
        record(id=2, sha="b" * 40, rehearsal={"ok": False, "steps": steps}),
        record(
            approval={"by": "ann", "at": "t0"},
            promoted={"from": "staging", "verifiedAt": "t", "rehearsed": True},
        ),
        record(
            id=3, sha="c" * 40, outcome="awaiting-approval", operation="promote", message="awaiting approval"
        ),
    ]
    view = TargetView("t", "ns", {"history": history})
    text = " ".join(
        re.sub(
            r"<[^>]+>",
            " ",
            commit_page(view, history[:1]) + commit_page(view, history[1:2]) + commit_page(view, history[2:]),
        ).split()
    )
    assert "Rollback rehearsal: ✗ failed" in text
    assert f"rollback {'a' * 12} ✓ applied t1 2.2s 1 claim(s) allocated verified" in text
    assert f"re-apply {'b' * 12} ✗ verify-failed t2 3.0s claim ml/train not allocated" in text
    assert "Promoted from staging (verified at t, rehearsed)" in text and "Approved by ann at t0" in text
    assert "Failure and diagnosis" not in text  # waiting for a person is no failure


def test_commit_page_puts_the_failure_and_its_diagnosis_first() -> None:
    failed = record(
        id=4,
        sha="b" * 40,
        outcome="verify-failed",
        message="claim ml/train not allocated",
        rolledBackTo="a" * 40,
        rollback="applied",
        diagnoses=[
            {
                "mode": "exhaustion",
                "ref": "ResourceClaim/ml/train",
                "summary": "no free device",
                "evidence": ["4 of 4 allocated"],
                "recovery": ["free a device"],
            }
        ],
        devices=[
            {"claim": "ml/train", "pod": "train-pod", "devices": [], "node": None},
            {"claim": "ml/ok", "pod": "p", "devices": ["gpu-0"], "node": "a"},
        ],
        diff={
            "summary": "1 to update",
            "update": 1,
            "objects": [{"ref": "Deployment/ml/train", "op": "update", "fields": ["spec.replicas: 1 → 4"]}],
        },
        decisions=[
            {
                "rule": "capacity",
                "severity": "warn",
                "ref": "Deployment/ml/train",
                "msg": "asks 4 GPUs, 2 free",
                "path": "w.yaml",
                "line": 1,
            }
        ],
    )
    page = commit_page(TargetView("t", "ns", {"history": [failed]}), [failed])
    order = [
        page.index(s)
        for s in (
            "Failure and diagnosis",
            "exhaustion",
            "4 of 4 allocated",
            "free a device",
            "Changed objects",
            "Verification chain",
            "Policy findings",
        )
    ]
    assert order == sorted(order)
    assert (
        "spec.replicas: 1 → 4" in page
        and '<li class="failing">' in page
        and page.count('class="failing"') == 1
    )
    report = report_page(TargetView("t", "ns", {}), failed)
    assert "Passed with warnings" in report and "asks 4 GPUs, 2 free" in report and "capacity" in report
    assert "| warn | `w.yaml:1` | `capacity` |" in report_markdown(failed)
