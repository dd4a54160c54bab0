"""Verbs that refuse what they cannot do (issue 29, item 5), against a running controller: an unknown target
is exit 1 with nothing written and the known targets named; `retry` of a sha that would do nothing is
refused; `reconcile` of a suspended target is refused; `sync` through the controller exits as the delivery
ended (a commit that failed verification, the last good put back: exit 1, not 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import REPO
from faults_support import Rig, live_markers, markers_of, rig_at, tail

UNKNOWN = (
    ("suspend",),
    ("resume",),
    ("status",),
    ("history",),
    ("retry",),
    ("reconcile", "--no-wait"),
    ("abort", "--no-wait"),
    ("sync", "--revision", "0" * 40, "--via", "controller"),
    ("rollback", "1", "--via", "controller"),
)


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[Rig]:
    yield from rig_at(tmp_path)


def cli(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    command = [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=180)


def configmaps(rig: Rig) -> list[str]:
    return sorted(o["metadata"]["name"] for o in rig.sim.store.list("", "configmaps", "dra-gitops"))


def test_verbs_refuse_unknown_targets_and_shas_and_exit_as_the_delivery_ended(rig: Rig) -> None:
    good = rig.commit("a")
    run = rig.start("cache-a", "--identity", "replica-a")
    rig.settled(good)
    before = configmaps(rig)
    for verb in UNKNOWN:
        done = cli(rig.kubeconfig, *verb, "--target", "nosuch")
        said = f"{verb}: {done.returncode}\n{done.stdout}\n{done.stderr}"
        assert done.returncode == 1, said
        assert "no target 'nosuch'" in done.stderr and "targets there: default" in done.stderr, said
    source = ["--repo", rig.remote.url, "--cache-dir", str(rig.root / "diff-cache")]
    nosuch = cli(rig.kubeconfig, "diff", *source, "--target", "nosuch")
    assert nosuch.returncode == 1 and "no target 'nosuch'" in nosuch.stderr, nosuch.stderr
    unknown = cli(rig.kubeconfig, "diff", *source, "--revision", "zzz")
    assert unknown.returncode == 1 and "no revision 'zzz'" in unknown.stderr, unknown.stderr
    assert configmaps(rig) == before

    for sha, why in (("zzzzzzz", "no commit this target attempted"), (good, "the last good commit")):
        done = cli(rig.kubeconfig, "retry", "--sha", sha)
        assert done.returncode == 1 and why in done.stderr, f"{done.stdout}\n{done.stderr}"
    assert rig.state().retry is None

    bad = rig.commit("bad", trainers=4)  # fails verification, rolled back by the pass: held
    rig.settled(good)
    synced = cli(rig.kubeconfig, "sync", "--revision", bad, "--via", "controller", "--timeout", "120s")
    assert synced.returncode == 1, f"{synced.stdout}\n{synced.stderr}\n{tail(run)}"
    assert live_markers(rig.sim) == markers_of("a")

    assert cli(rig.kubeconfig, "suspend", "--reason", "maintenance").returncode == 0
    refused = cli(rig.kubeconfig, "reconcile", "--no-wait")
    assert refused.returncode == 1 and "resume" in refused.stderr, refused.stderr
