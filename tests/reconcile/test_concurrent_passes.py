"""`run --concurrent N`: a replica's passes run on a pool of N threads, whatever the number of targets it holds
(a thread per target would keep a pass's deep stack resident for each: see benchmarks/bench_scale.py)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
import yaml
from helpers import GitRemote, wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targets import Target
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.outcome import Outcome

TARGETS = [f"small-{n}" for n in range(5)]


def remote_with_a_folder_per_target(root: Path) -> GitRemote:
    remote = GitRemote(root)
    for name in TARGETS:
        folder = remote.work / name
        folder.mkdir()
        settings = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"settings-{name}", "namespace": "default"},
            "data": {"target": name},
        }
        (folder / "settings.yaml").write_text(yaml.safe_dump(settings))
    remote.commit_and_push("a folder per target")
    return remote


@pytest.mark.parametrize("concurrent", [1, 2])
def test_passes_run_on_a_pool_of_the_given_size(
    client: ClusterClient, tmp_path: Path, concurrent: int
) -> None:
    remote = remote_with_a_folder_per_target(tmp_path / "git")
    targets = [Target(name=name, repo=remote.url, path=name, poll_interval=3600.0) for name in TARGETS]
    options = ControllerOptions(
        cache_dir=tmp_path / "cache",
        port=0,
        identity="replica-a",
        concurrent_passes=concurrent,
        check=CheckOptions(),
    )
    controller = Controller(client, targets, options)
    ran_on: dict[str, tuple[str, Outcome]] = {}  # target -> the thread its first pass ran on, its outcome

    def finished(target: str, result: PassResult) -> None:
        ran_on.setdefault(target, (threading.current_thread().name, result.outcome))

    controller.pass_listeners.append(finished)
    controller.start()
    try:
        wait_for(lambda: len(ran_on) == len(TARGETS), 120, "a first pass of every target", 0.1)
    finally:
        controller.stop()
    assert {outcome for _, outcome in ran_on.values()} == {Outcome.APPLIED}, ran_on
    # N threads of the pool, none of the targets' own: never more than N passes at once.
    assert {thread for thread, _ in ran_on.values()} <= {f"pass_{n}" for n in range(concurrent)}, ran_on
