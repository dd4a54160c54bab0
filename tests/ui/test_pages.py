"""The pure page renderers: escaping of hostile strings everywhere, device states, totals and filters,
the targets page's promotion column, the report page's parts (no cluster, no Git, no server)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from reconciler.policy.result import CheckResult, Finding, RuleInfo
from reconciler.ui.devicemap import device_map_page
from reconciler.ui.devices import DeviceFilter, build_device_cells, totals_by_driver
from reconciler.ui.history import commit_page, history_page
from reconciler.ui.html import Html, esc, path, tag
from reconciler.ui.report import CommitReport, report_page
from reconciler.ui.reports import base_of
from reconciler.ui.targets import TargetView, targets_page

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
        commit_page(view, "b" * 40),
        device_map_page(cells, DeviceFilter(namespace=hostile)),
        device_map_page(cells, DeviceFilter()),
        device_map_page(cells, DeviceFilter(driver=hostile), [], [(hostile, hostile), ("b", "B")], hostile),
        device_map_page([], DeviceFilter(), [], [(hostile, hostile), ("b", "B")], "b", error=hostile),
        targets_page([TargetView(hostile, hostile, {}, error=hostile, cluster=(hostile, hostile))]),
        report_page(CommitReport(hostile, "b" * 40, unavailable=hostile)),
    ]
    for page in rendered:
        no_markup_from(page, hostile)
    assert esc(hostile) in rendered[1]  # shown, as text
    assert esc(hostile) in rendered[4]


def test_esc_tag_and_path() -> None:
    assert esc("<a href='x'>&") == "&lt;a href=&#x27;x&#x27;&gt;&amp;"
    assert esc(Html("<b>ok</b>")) == "<b>ok</b>"
    assert esc(None) == ""
    assert (
        tag("a", "<x>", href='"/y"', class_="c", hidden=True, title=None)
        == '<a href="&quot;/y&quot;" class="c" hidden>&lt;x&gt;</a>'
    )
    assert path("targets", "a/b?c", "history") == "/targets/a%2Fb%3Fc/history"


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
    text = " ".join(
        re.sub(r"<[^>]+>", " ", history_page(TargetView("t", "ns", {"history": history}))).split()
    )
    assert "Rollback rehearsal: ✗ failed" in text
    assert f"rollback {'a' * 12} ✓ applied t1 2.2s 1 claim(s) allocated verified" in text
    assert f"re-apply {'b' * 12} ✗ verify-failed t2 3.0s claim ml/train not allocated" in text
    assert "Promoted from staging (verified at t, rehearsed)" in text and "Approved by ann at t0" in text
    assert "Failure and diagnosis" not in text  # waiting for a person is no failure


def test_history_anchors_the_newest_record_of_each_sha() -> None:
    sha = "f" * 40
    view = TargetView(
        "t",
        "ns",
        {
            "history": [
                record(id=3, sha=sha, operation="rollback"),
                record(id=2, sha=sha),
                record(id=1, sha="e" * 40),
            ]
        },
    )
    page = history_page(view)
    assert page.count(f'id="{sha}"') == 1
    assert page.index(f'id="{sha}"') < page.index('data-record="2"')
    assert 'id="record-1"' in page and 'id="record-3"' in page
    assert "no record of this commit" in commit_page(view, "0" * 40)
    assert commit_page(view, sha[:7]).count("data-record=") == 2


def test_base_of_is_the_last_good_commit_before() -> None:
    history = [
        record(sha="d" * 40, outcome="verify-failed"),
        record(sha="c" * 40, outcome="applied", operation="rollback"),
        record(sha="b" * 40, outcome="denied"),
        record(sha="c" * 40, outcome="applied"),
        record(sha="a" * 40, outcome="applied"),
    ]
    assert base_of(history, "d" * 40) == "c" * 40
    assert base_of(history, "b" * 40) == "c" * 40
    assert base_of(history, "c" * 40) == "a" * 40
    assert base_of(history, "a" * 40) is None
    assert base_of(history, "9" * 40) is None


def test_report_page_has_the_markdown_reports_parts() -> None:
    rules = {"driver-canary": RuleInfo("driver-canary", "Canary first", "", "deny", "x.rego")}
    findings = [
        Finding("driver-canary", "deny", "<b>changed</b>", "DaemonSet/ns/d", "10-driver/d.yaml", 4),
        Finding("capacity", "warn", "tight", "Deployment/ns/t", "40-workloads/t.yaml", 1, waived="known"),
    ]
    result = CheckResult(findings, rules, objects_checked=12, files_checked=9)
    page = report_page(CommitReport("t", "a" * 40, "b" * 40, result=result, markdown="x"))
    assert "Denied" in page and "12 objects, 9 files: 1 denied, 0 warnings, 1 waived" in page
    assert 'id="rules"' in page and 'id="violations"' in page and 'id="waivers"' in page
    assert "&lt;b&gt;changed&lt;/b&gt;" in page and "10-driver/d.yaml:4" in page
    assert "?format=markdown" in page
    missing = report_page(CommitReport("t", "a" * 40, unavailable="no Git cache"))
    assert "cannot be produced: no Git cache" in missing and "What its pass recorded" not in missing
    recorded = record(
        decisions=[
            {
                "rule": "driver-canary",
                "severity": "deny",
                "ref": "DaemonSet/ns/d",
                "msg": "m",
                "path": "d.yaml",
                "line": 4,
            }
        ]
    )
    fallback = report_page(CommitReport("t", "a" * 40, unavailable="no Git cache"), recorded)
    assert "What its pass recorded" in fallback and "d.yaml:4" in fallback
