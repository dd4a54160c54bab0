"""kill -9 of a real controller process (`dra-gitops run`) in the middle of a wave, then another controller
taking the target over: it resumes the driver upgrade at the wave it was in (issue 32), not from the first
wave and not by rolling back. The kill is exact: sent from inside the sim by the state write that records the
rollout at wave 2, replacing (the old plugin pod of the wave's node already deleted)."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from controller_support import Running, free_port
from helpers import GitRemote, wait_for
from waves_support import CANARY, GPU_NODES, MAIN, NEW, NS, WAVES, node_labels, seed

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.model.wave_progress import current_rollout
from reconciler.outcome import Outcome
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.sim.storebase import Change

TARGET = "default"
STATE_NAME = f"dra-gitops-{TARGET}"
ROLLOUT = {"waves": ["1", "2", "50%", "100%"], "soak": "100ms", "drainDevices": True}


class WaveKiller:
    """SIGKILLs `pid` from inside the sim when the state's `inProgress.rollout` reaches (wave, phase)."""

    def __init__(self, sim: SimCluster, wave: int, phase: str) -> None:
        self.wave, self.phase = wave, phase
        self.pid: int | None = None
        self.fired = threading.Event()
        self._unsubscribe = sim.store.subscribe_raw(self._changed)

    def _changed(self, change: Change) -> None:
        rtype, obj = change[2], change[3]
        if rtype.plural != "configmaps" or obj["metadata"].get("name") != STATE_NAME:
            return
        marker = json.loads((obj.get("data") or {}).get("inProgress") or "null") or {}
        rollout = current_rollout(marker.get("rollout"))
        if rollout is None or (rollout.wave, rollout.phase) != (self.wave, self.phase):
            return
        if self.pid is not None and not self.fired.is_set():
            os.kill(self.pid, signal.SIGKILL)
            self.fired.set()

    def close(self) -> None:
        self._unsubscribe()


def set_image(remote: GitRemote, name: str, image: str) -> str:
    path = (
        remote.work / "10-driver" / ("kubelet-plugin.yaml" if name == MAIN else "kubelet-plugin-canary.yaml")
    )
    text = path.read_text()
    path.write_text(text.replace("gpu-example-driver:v0.3.0", f"gpu-example-driver:{image}"))
    return remote.commit_and_push(f"{name}: {image}")


def start(root: Path, remote: GitRemote, kubeconfig: Path, cache: str) -> Running:
    args = ["--repo", remote.url, "--kubeconfig", str(kubeconfig), "--poll-interval", "1s"]
    args += ["--cache-dir", str(root / cache), "--lease-duration", "2", "--grace", "1s"]
    return Running(args, free_port(), root / f"{cache}.log")


@pytest.fixture
def rig(tmp_path: Path) -> Iterator[tuple[SimCluster, GitRemote, Path]]:
    remote = GitRemote(tmp_path / "git")
    seed(remote, ROLLOUT)
    remote.commit_and_push("the example driver, upgraded in waves")
    sim = SimCluster(served_versions=("v1", "v1beta2"), audit=True).start()
    plane = install(sim, nodes=7, devices_per_node=2, node_labels=node_labels(), time_scale=0.05)
    try:
        yield sim, remote, sim.write_kubeconfig(tmp_path / "kubeconfig")
    finally:
        plane.stop()
        sim.stop()


def state(sim: SimCluster) -> TargetState:
    with ClusterClient.for_url(sim.url) as client:
        return StateStore(client, TARGET).load()


def settled(sim: SimCluster, sha: str, run: Running) -> TargetState:
    return wait_for(
        lambda: (s := state(sim)).in_progress is None and s.last_good == sha and s,
        120,
        f"{sha[:12]} the last good revision, nothing in progress ({run.log})",
        0.1,
    )


def deleted_pods(sim: SimCluster) -> list[str]:
    assert sim.api.audit is not None
    return [
        e.request.name
        for e in sim.api.audit.events
        if e.request.verb == "delete"
        and e.request.resource == "pods"
        and e.request.namespace == NS
        and not e.dry_run
        and e.code < 400
    ]


def test_kill_9_mid_wave_then_another_controller_resumes_at_that_wave(
    rig: tuple[SimCluster, GitRemote, Path], tmp_path: Path
) -> None:
    sim, remote, kubeconfig = rig
    first = start(tmp_path, remote, kubeconfig, "first")
    try:
        settled(sim, remote.git("rev-parse", "HEAD"), first)
        settled(sim, set_image(remote, CANARY, NEW), first)
        killer = WaveKiller(sim, 2, "replacing")
        killer.pid = first.proc.pid
        try:
            sha = set_image(remote, MAIN, NEW)
            assert killer.fired.wait(120), first.log.read_text()[-3000:]
            assert first.proc.wait(10) == -9
        finally:
            killer.close()
    finally:
        first.stop(signal.SIGKILL)
    left = state(sim)
    rollout = current_rollout(left.in_progress.rollout if left.in_progress else None)
    assert rollout is not None and rollout.wave == 2 and rollout.done == WAVES[0], left.in_progress
    with ClusterClient.for_url(sim.url) as client:
        pods = client.list_kind("", "Pod", NS)
        wave_1_pod = next(p["metadata"]["name"] for p in pods if p["spec"].get("nodeName") == WAVES[0][0])
    sim.api.audit.clear()  # type: ignore[union-attr]
    second = start(tmp_path, remote, kubeconfig, "second")  # a cold cache, as a standby replica has
    try:
        done = settled(sim, sha, second)
    finally:
        second.stop(signal.SIGKILL)
    assert wave_1_pod not in deleted_pods(sim)  # wave 1 was not run again
    interrupted = next(r for r in done.history if r.sha == sha and r.outcome == Outcome.INTERRUPTED)
    assert "resumes: wave 2 of 4" in (interrupted.message or "")
    assert not any(r.operation == "rollback" and r.from_sha == sha for r in done.history)
    with ClusterClient.for_url(sim.url) as client:
        images = {
            p["spec"]["nodeName"]: p["spec"]["containers"][0]["image"]
            for p in client.list_kind("", "Pod", NS)
            if not p["metadata"].get("deletionTimestamp")
            and p["metadata"]["name"].startswith(MAIN + "-")
            and not p["metadata"]["name"].startswith(CANARY)
        }
        assert {n: i.rsplit(":", 1)[1] for n, i in images.items() if n in GPU_NODES} == dict.fromkeys(
            GPU_NODES, NEW
        )
        assert client.list_kind("resource.k8s.io", "DeviceTaintRule") == []
