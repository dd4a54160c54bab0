"""Drift while Git cannot be reached (issue 29, item 6): the last good revision's copy kept beside the state
is what the cluster must look like, so a controller with a cold cache and no Git still puts back what
drifted, and says where from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from faults_support import GitServer, Rig, live_markers, markers_of, rig_at, tail
from helpers import wait_for


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def events(rig: Rig, reason: str) -> list[str]:
    with rig.client() as client:
        found = client.list_kind("", "Event", "dra-gitops")
    return [str(e.get("message")) for e in found if e.get("reason") == reason]


def test_drift_is_corrected_from_the_kept_copy_while_git_is_unreachable(rig: Rig) -> None:
    git = GitServer(rig.remote)
    try:
        good = rig.commit("a")
        first = rig.start("cache-a", "--identity", "replica-a", repo=git.url)
        rig.settled(good)
        first.stop()
        git.vanish()
        run = rig.start("cache-b", "--identity", "replica-b", repo=git.url)  # a cold cache, no Git
        wait_for(lambda: "pass source-error" in run.log.read_text(), 60, "a pass without Git")
        with rig.client() as client:
            client.delete(client.resource_for("v1", "ConfigMap"), "ml-team", "marker-stage-4")
        wait_for(
            lambda: live_markers(rig.sim) == markers_of("a"), 30, f"the deleted marker put back\n{tail(run)}"
        )
        said = wait_for(lambda: events(rig, "DriftCorrected"), 30, "a DriftCorrected Event")
        assert any("kept beside the state" in m and "Git unreachable" in m for m in said), said
        state = rig.state()
        assert state.last_good == good and state.in_progress is None
        assert state.source is not None and state.source.error, state.source  # the outage still shown
    finally:
        git.come_back()
