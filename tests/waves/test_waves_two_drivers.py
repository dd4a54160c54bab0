"""Two drivers upgraded in waves by one delivery (issue 32): `inProgress.rollout` keeps each DaemonSet's
progress (a list), so `status`, `get -o json` and the dashboard show both, and a rollout paused by
`suspend` after the first finished resumes only the second. Against the simulated cluster, with a second
driver (nic.example.com, its canary and main kubelet plugin made from the example's) beside the GPU one."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import GitRemote, wait_for
from waves_support import DRIVER, GPU_NODES, MAIN, NEW, NS, OLD, TARGET, Env, node_labels, seed

from reconciler.cluster.client import ClusterClient
from reconciler.loop.passes.reconcile_types import PassResult
from reconciler.loop.store.operations import TargetRef, resume, suspend
from reconciler.loop.store.statusview import render_status, target_row
from reconciler.model.wave_progress import rollouts_from_json
from reconciler.outcome import Outcome
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.ui.targets import TargetView, sync_row, targets_page

ROLLOUT = {"waves": ["50%", "100%"], "soak": "3s", "drainDevices": True}
NIC, NIC_MAIN = "nic.example.com", "nic-example-kubelet-plugin"
FILES = {"main": "kubelet-plugin.yaml", "canary": "kubelet-plugin-canary.yaml"}


def nic_copy(text: str) -> str:
    """The example's GPU plugin manifest as the NIC driver's (its ServiceAccount shared)."""
    for old, new in (
        ("gpu-example-kubelet-plugin", NIC_MAIN),
        ("gpu.example.com", NIC),
        ("app.kubernetes.io/name: gpu-example-driver", "app.kubernetes.io/name: nic-example-driver"),
        ("registry.example.com/gpu-example-driver:", "registry.example.com/nic-example-driver:"),
    ):
        text = text.replace(old, new)
    return text


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    remote = GitRemote(tmp_path / "git")
    seed(remote, ROLLOUT)
    folder = remote.work / "10-driver"
    for file in FILES.values():
        (folder / f"nic-{file}").write_text(nic_copy((folder / file).read_text()))
    config = yaml.safe_load((remote.work / "dra-gitops.yaml").read_text())
    config["drivers"] = [{"name": DRIVER, "rollout": ROLLOUT}, {"name": NIC, "rollout": ROLLOUT}]
    (remote.work / "dra-gitops.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    remote.commit("two drivers, both upgraded in waves")
    remote.git("push", "--quiet", "origin", "main")
    with SimCluster(served_versions=("v1", "v1beta2"), audit=True) as sim:
        drivers = (DRIVER, {"name": NIC, "device_prefix": "nic"})
        plane = install(sim, nodes=7, devices_per_node=2, node_labels=node_labels(), drivers=drivers)
        try:
            with ClusterClient.for_url(sim.url) as client:
                yield Env(sim, plane, client, remote, tmp_path)
        finally:
            plane.stop()


def set_images(env: Env, role: str, image: str) -> str:
    """Both drivers' `role` (main or canary) workload on `image`, in one commit; its sha."""
    folder = env.remote.work / "10-driver"
    for path in (folder / FILES[role], folder / f"nic-{FILES[role]}"):
        doc = yaml.safe_load(path.read_text())
        container = doc["spec"]["template"]["spec"]["containers"][0]
        container["image"] = container["image"].rsplit(":", 1)[0] + f":{image}"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
    sha = env.remote.commit(f"both drivers' {role}: {image}")
    env.remote.git("push", "--quiet", "origin", "main")
    return sha


def uids(env: Env, ds: str) -> dict[str, str]:
    return {node: pod["metadata"]["uid"] for node, pod in env.plugin_pods(ds).items()}


def images(env: Env, ds: str) -> set[str]:
    return {pod["spec"]["containers"][0]["image"].rsplit(":", 1)[1] for pod in env.plugin_pods(ds).values()}


def test_each_rollout_of_one_delivery_is_kept_shown_and_resumed(env: Env) -> None:
    assert env.reconciler().reconcile().outcome == Outcome.APPLIED
    wait_for(lambda: env.ready_on(OLD, GPU_NODES), 30, "the old GPU plugin Ready on every GPU node")
    wait_for(lambda: len(env.plugin_pods(NIC_MAIN)) == 6, 30, "the NIC plugin on every GPU node")
    set_images(env, "canary", NEW)
    canaries = env.reconciler().reconcile()
    assert canaries.outcome == Outcome.APPLIED, canaries.message
    set_images(env, "main", NEW)
    out: list[PassResult] = []
    thread = threading.Thread(target=lambda: out.append(env.reconciler().reconcile()), daemon=True)
    thread.start()

    def second_soaking() -> bool:
        marker = env.store().load().in_progress
        held = rollouts_from_json(marker.rollout if marker else None)
        return len(held) == 2 and held[1].wave == 1 and held[1].phase == "soaking"

    wait_for(second_soaking, 120, "the second rollout soaking after its wave 1", interval=0.02)
    ref = TargetRef(TARGET, "dra-gitops")
    suspend(env.client, ref, "tester", "hold the waves")
    thread.join(120)
    assert out and out[0].outcome == Outcome.SUSPENDED, out

    state = env.store().load()
    assert state.in_progress is not None and isinstance(state.in_progress.rollout, list)
    first, second = rollouts_from_json(state.in_progress.rollout)
    assert {first.daemonset, second.daemonset} == {MAIN, NIC_MAIN}
    assert (first.wave, first.of, first.phase, len(first.done)) == (2, 2, "done", 6)
    assert (second.wave, second.of, second.phase, len(second.done)) == (1, 2, "suspended", 3)
    shown = render_status(TARGET, state, 0)
    for progress in (first, second):
        assert f"driver waves:  DaemonSet/{NS}/{progress.daemonset}: {progress.line()}" in shown, shown
    row = target_row(TARGET, state)
    assert [r["daemonset"] for r in row["rollouts"]] == [first.daemonset, second.daemonset]
    assert row["rollout"]["daemonset"] == second.daemonset  # the one under way (paused), as before
    assert f"{first.daemonset}: wave 2 of 2 (done)" in row["inProgress"]
    assert f"{second.daemonset}: wave 1 of 2 (suspended)" in row["inProgress"]
    view = TargetView(TARGET, "dra-gitops", state.to_json())
    assert [r.wave for r in sync_row(view).rollouts] == ["wave 2 of 2 (done)", "wave 1 of 2 (suspended)"]
    page = targets_page([view])
    assert f"DaemonSet/{NS}/{MAIN}" in page and f"DaemonSet/{NS}/{NIC_MAIN}" in page

    # Resumed: the second goes on from its wave 2; the first, done, is not run again.
    done_before = uids(env, first.daemonset)
    resume(env.client, ref, "tester")
    result = env.reconciler().reconcile()
    assert result.outcome == Outcome.APPLIED, (result.outcome, result.message)
    assert images(env, MAIN) == {NEW} and images(env, NIC_MAIN) == {NEW}
    assert uids(env, first.daemonset) == done_before
    resumed = next(r for r in env.store().load().history if r.outcome == Outcome.INTERRUPTED)
    message: Any = resumed.message or ""
    assert f"the rollout of {second.daemonset} resumes: wave 1 of 2 (suspended)" in message, message
    assert f"the rollout of {first.daemonset}: wave 2 of 2 (done)" in message, message
