"""The dashboard over real HTTP against a driver rollout in waves paused by `suspend` (issue 32): the
targets page, the history and the in-progress commit's page show the DaemonSet, wave N of M, nodes done and
the next soak's end as the state holds them (`status -o json`'s `inProgress.rollout`); after an `abort`,
the rollout is gone from them and the commit's page shows its record. Pure renderings: tests/ui."""

from __future__ import annotations

import html
import http.client
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from waves_support import MAIN, NS, TARGET, Env, start, suspended_while_soaking, upgraded_canary

from reconciler.loop.config.targets import target_from_flags
from reconciler.loop.httpserver import ControllerServer
from reconciler.loop.metrics import Metrics
from reconciler.loop.store.operations import TargetRef, abort
from reconciler.outcome import Outcome
from reconciler.ui.build import build_dashboard

ROLLOUT = {"waves": ["1", "2", "50%", "100%"], "soak": "3s", "drainDevices": True}


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    yield from start(tmp_path, ROLLOUT)


def page(port: int, path: str) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


def words(document: str) -> str:
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", document)))


def test_the_dashboard_shows_a_suspended_rollout_then_its_abort(env: Env, tmp_path: Path) -> None:
    upgraded_canary(env)
    sha = suspended_while_soaking(env, 1)
    progress = env.rollout()
    assert progress is not None and progress.soak_until

    target = target_from_flags(
        repo=env.remote.url, name=TARGET, branch="main", path=".", state_namespace="dra-gitops", grace=5.0
    )
    dashboard = build_dashboard(env.client, targets=[target], cache_dir=tmp_path / "ui-cache")
    server = ControllerServer(trigger=lambda names, reason: None, metrics=Metrics(), pages=dashboard)
    port = server.start()
    server.set_ready()
    try:
        soak = progress.soak_until.replace("T", " ")[:19] + " UTC"
        code, targets = page(port, "/")
        assert code == 200, targets
        text = words(targets)
        assert "Suspended" in text and f"dra-gitops abort --target {TARGET}" in text
        assert f"driver waves DaemonSet/{NS}/{MAIN} gpu.example.com : wave 1 of 4 (suspended)" in text, text
        assert "1/6 nodes done" in text and f"next soak ends {soak}" in text
        code, history = page(port, f"/targets/{TARGET}/history")
        assert code == 200 and "wave 1 of 4 (suspended)" in words(history)
        assert f'href="/targets/{TARGET}/commits/{sha}"' in history
        # The commit being delivered has no record yet; its page shows where its rollout stands.
        code, commit = page(port, f"/targets/{TARGET}/commits/{sha}")
        assert code == 200, commit
        text = words(commit)
        assert "In progress: apply" in text and "wave 1 of 4 (suspended)" in text and "1/6 nodes done" in text
        assert page(port, f"/targets/{TARGET}/commits/{sha}/report")[0] == 404  # no record to report on

        abort(env.client, TargetRef(TARGET, "dra-gitops"), "alice")
        assert env.reconciler().reconcile().outcome == Outcome.ROLLED_BACK
        text = words(page(port, "/")[1])
        assert "driver waves" not in text and "Suspended" in text
        text = words(page(port, f"/targets/{TARGET}/commits/{sha}")[1])
        assert "In progress" not in text and "aborted" in text and "aborted by alice" in text
    finally:
        server.stop()
