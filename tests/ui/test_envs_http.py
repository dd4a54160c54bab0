"""The dashboard of targets in clusters of their own, over real HTTP: the controller's (as `run` serves
it) and `dra-gitops ui --config` (a process), after staging rehearsed and production awaited approval.
Targets rows against `status -o json --config F --target T`, each cluster's device map against
`inventory -o json --kubeconfig <that cluster's>`, the promotion column, rehearsals and approvals in the
history, and a target whose cluster cannot be reached (refused, or never answering) shown as such while
the others' pages work."""

from __future__ import annotations

import html
import http.client
import re
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cluster_support import write_kubeconfig
from envs_support import HOSTILE_SUBJECT, Envs
from markupsafe import escape
from ui_support import HOSTILE_SCRIPT

from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.run.clusters import TargetClusters
from reconciler.ui.build import build_dashboard
from reconciler.ui.server import DashboardServer


def get(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def text_of(page: str) -> str:
    """What a reader sees: each tag a space, entities decoded, runs of spaces one."""
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", page)).split())


def row_of(page: str, target: str) -> str:
    """The text of a target's row of the Targets page."""
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", page, re.S):
        if f'href="/targets/{target}/history"' in row:
            return text_of(row)
    raise AssertionError(f"no row of {target}")


def totals_of(page: str) -> dict[str, tuple[int, int, int]]:
    rows = re.findall(r"<tr><td>([^<]+)</td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td></tr>", page)
    totals = re.search(r"<strong>Total</strong></td><td>(\d+)</td><td>(\d+)</td><td>(\d+)</td>", page)
    assert totals is not None, page
    shown = {driver: (int(d), int(a), int(f)) for driver, d, a, f in rows}
    shown["Total"] = (int(totals[1]), int(totals[2]), int(totals[3]))
    return shown


def expected_totals(inventory: Any) -> dict[str, tuple[int, int, int]]:
    drivers = inventory["drivers"].items()
    out = {k: (v["devices"], v["allocated"], v["free"]) for k, v in drivers if v["devices"]}
    t = inventory["totals"]
    out["Total"] = (t["devices"], t["allocated"], t["free"])
    return out


def check_targets_page(envs: Envs, page: str) -> None:
    """Each target's row says what `status -o json --config F --target T` says, promotion included."""
    one, two = envs.shas["one"], envs.shas["two"]
    staging, production = envs.status("staging"), envs.status("production")
    row = row_of(page, "staging")
    assert staging["lastGood"] == two and two[:12] in row
    assert staging["lastAttempted"]["sha"][:12] in row and "applied" in row
    offered = staging["verified"][0]
    assert offered["sha"] == two and offered["rehearsed"] is True
    assert f"verified {two[:12]}" in row and f"since {offered['at']} (rehearsed)" in row
    assert "cluster staging" in row
    assert f'title="the device map of staging (kubeconfig {envs.clusters["staging"].kubeconfig})"' in page
    assert 'href="/devices?cluster=staging"' in page

    row = row_of(page, "production")
    assert production["lastGood"] == one and f"{one[:12]} settings: one" in row
    promotion, approval = production["promotion"], production["approval"]
    assert promotion["upstream"] == "staging" and "promotes from staging" in row
    assert f"eligible {promotion['eligible'][:12]}" in row
    assert approval["sha"] == two and "approvedBy" not in approval
    assert f"awaiting approval ‖ {two[:12]}" in row and f"since {approval['since']}" in row
    assert f"dra-gitops approve --target production {two[:12]}" in row
    assert f'href="/targets/production/commits/{two}"' in page  # the awaited sha links to its page
    assert 'href="/devices?cluster=production"' in page
    # The hostile subject of the awaited commit is shown, as text.
    assert HOSTILE_SUBJECT in row and HOSTILE_SCRIPT not in page and str(escape(HOSTILE_SCRIPT)) in page


def test_run_targets_page_reads_each_target_in_its_own_cluster(envs: Envs) -> None:
    code, page = get(envs.port, "/")
    assert code == 200
    check_targets_page(envs, page)
    assert "Promotion: eligible / awaiting approval" in page


def test_history_shows_rehearsals_and_approvals(envs: Envs) -> None:
    one, two = envs.shas["one"], envs.shas["two"]
    # Staging: each verified commit's rollback rehearsal, step by step.
    status = envs.status("staging")
    code, page = get(envs.port, "/targets/staging/history")
    assert code == 200
    ids = [int(i) for i in re.findall(r'data-record="(\d+)"', page)]
    assert ids == [r["id"] for r in status["history"]]
    rehearsed = [r for r in status["history"] if r.get("rehearsal")]
    assert {r["sha"] for r in rehearsed} == {one, two}
    # Each rehearsed commit's page: its rehearsal, step by step.
    text = " ".join(text_of(get(envs.port, f"/targets/staging/commits/{sha}")[1]) for sha in (one, two))
    assert text.count("Rollback rehearsal: ✓ passed") == len(rehearsed)
    for record in rehearsed:
        for step in record["rehearsal"]["steps"]:
            assert step["at"] in text and step["step"] in text
            if step["verified"]:
                assert step["verified"] in text
    # Production: who approved commit one, and when; what staging said of it.
    status = envs.status("production")
    approved = [r for r in status["history"] if r.get("approval")]
    assert [r["sha"] for r in approved] == [one]
    by, at = approved[0]["approval"]["by"], approved[0]["approval"]["at"]
    code, page = get(envs.port, "/targets/production/history")
    assert code == 200
    code, page = get(envs.port, f"/targets/production/commits/{one}")
    assert "Promoted from staging (verified at" in text_of(page)
    assert code == 200 and f"Approved by {by} at {at}" in text_of(page)


def test_device_map_per_cluster_matches_its_inventory(envs: Envs) -> None:
    counted = {}
    for cluster in ("staging", "production"):
        code, page = get(envs.port, f"/devices?cluster={cluster}")
        assert code == 200, page
        counted[cluster] = totals_of(page)
        assert counted[cluster] == expected_totals(envs.inventory(cluster))
        assert f'<option value="{cluster}" selected>' in page  # the form's cluster choice
        assert f"Device map of {cluster} (kubeconfig" in text_of(page)
    assert counted["staging"] != counted["production"]  # 2 nodes there, 3 here: each read its own
    code, page = get(envs.port, "/devices")  # the controller's own cluster first
    assert code == 200 and '<option value="home" selected>' in page
    assert totals_of(page) == expected_totals(envs.cli_json("inventory"))
    code, _ = get(envs.port, "/devices?cluster=elsewhere")
    assert code == 404


@pytest.fixture
def ui_url(envs: Envs, tmp_path: Path) -> Iterator[str]:
    """`dra-gitops ui` with the targets file naming a third target whose cluster does not answer."""
    command = [
        sys.executable, "-m", "reconciler", "ui", "--kubeconfig", str(envs.home_kubeconfig),
        "--config", str(envs.ui_config), "--cache-dir", str(tmp_path / "cache"), "--listen", "127.0.0.1:0",
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (url, process.poll())
        yield url
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)


def test_ui_shows_an_unreachable_cluster_and_serves_the_others(envs: Envs, ui_url: str) -> None:
    port = int(ui_url.rstrip("/").rsplit(":", 1)[1])
    code, page = get(port, "/")
    assert code == 200
    check_targets_page(envs, page)
    lost = row_of(page, "lost")
    assert (
        f"✗ its cluster (kubeconfig {envs.ui_config.parent / 'clusters' / 'lost' / 'kubeconfig'}) cannot be read"
        in lost
    )
    assert "Connection refused" in lost  # the reason
    code, page = get(port, "/targets/lost/history")
    assert code == 503 and "cannot be read" in text_of(page)
    code, page = get(port, "/devices?cluster=lost")
    assert code == 503 and "lost (kubeconfig" in text_of(page) and "cannot be read" in text_of(page)
    assert '<option value="staging">' in page  # the other clusters stay one choice away
    # The others' pages still work, from their own clusters.
    code, page = get(port, "/targets/production/history")
    assert code == 200 and f'title="{envs.shas["one"]}"' in page
    for cluster in ("staging", "production"):
        code, page = get(port, f"/devices?cluster={cluster}")
        assert code == 200 and totals_of(page) == expected_totals(envs.inventory(cluster))
    code, _ = get(port, "/api/version")
    assert code == 200


def test_a_cluster_that_never_answers_costs_its_deadline_once(envs: Envs, tmp_path: Path) -> None:
    """A target whose API server takes connections and never answers: its row says so after the read
    deadline, the other targets' rows are whole, and the next pages say it again without waiting."""
    with socket.socket() as frozen:
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(16)  # connections complete in the backlog; nothing ever reads them
        kubeconfig = write_kubeconfig(
            tmp_path / "frozen" / "kubeconfig", f"http://127.0.0.1:{frozen.getsockname()[1]}", "frozen"
        )
        config = tmp_path / "targets.yaml"
        config.write_text(envs.config.read_text() + f"  - name: frozen\n    kubeconfig: {kubeconfig}\n")
        targets = load_targets(config.read_text(), str(config))
        clusters = TargetClusters(envs.home, targets, str(envs.home_kubeconfig), timeout=30)
        dashboard = build_dashboard(envs.home, targets=targets, clusters=clusters, read_timeout=1.0)
        server = DashboardServer(dashboard, "127.0.0.1", 0)
        port = server.start()
        try:
            code, page = get(port, "/")
            assert code == 200
            assert "no answer from the API server within 1s" in row_of(page, "frozen")
            assert envs.shas["two"][:12] in row_of(page, "staging")
            assert f"dra-gitops approve --target production {envs.shas['two'][:12]}" in row_of(
                page, "production"
            )
            code, page = get(port, "/devices?cluster=frozen")
            assert code == 503 and "no answer from the API server within 1s" in text_of(page)
            assert "asked again in" in text_of(page)  # not asked: the reason of the last time
            code, page = get(port, "/devices?cluster=production")
            assert code == 200 and totals_of(page) == expected_totals(envs.inventory("production"))
            # The live fingerprint of the frozen target alone holds still while it is down (the page
            # would otherwise reload at every poll).
            frozen_only = [t for t in targets if t.name == "frozen"]
            alone = build_dashboard(envs.home, targets=frozen_only, clusters=clusters, read_timeout=1.0)
            # The first waits out its deadline (a fresh place), the second is told the reason at once.
            assert alone.data.version() == alone.data.version()
        finally:
            server.stop()
            clusters.close()
