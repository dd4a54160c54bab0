"""The rig of the fault tests: a simulated cluster served over HTTP, a bare Git remote, and the controller
as a real process (`dra-gitops run`), which a test kills with SIGKILL at a chosen point and starts again.

The kill point is exact: the test watches the sim's store from inside the sim and sends SIGKILL from the
very write that records the point (the state ConfigMap's `inProgress` reaching a stage), before the API
server answers it, so the controller dies with that write durable and nothing after it sent.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from controller_support import REPO, Running, example_remote, free_port, state_of
from helpers import GitRemote, freeze_process, wait_for

from reconciler.cluster import applyset
from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.sim.storebase import Change

TARGET = "default"
STATE_NAME = applyset.parent_name(TARGET)
TEAM = "ml-team"
# One marker ConfigMap per stage, each placed there by the stage annotation: a revision changes every
# stage, so a pass (and a rollback) writes in each and records each as it finishes.
STAGES = ("0 foundation", "1 drivers", "2 classes", "3 claims", "4 workloads")
MARKERS = {label: f"marker-stage-{label.split()[0]}" for label in STAGES}


def write_markers(remote: GitRemote, revision: str) -> None:
    docs = [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": TEAM,
                "annotations": {"dra-gitops.io/stage": label.split()[0]},
            },
            "data": {"revision": revision},
        }
        for label, name in MARKERS.items()
    ]
    (remote.work / "40-workloads" / "markers.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))


def set_trainers(remote: GitRemote, replicas: int) -> None:
    path = remote.work / "40-workloads/trainer.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    docs[0]["spec"]["replicas"] = replicas
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def live_markers(sim: SimCluster) -> dict[str, str | None]:
    """Each marker's `revision` as the cluster has it (None: absent)."""
    found: dict[str, str | None] = {}
    for name in MARKERS.values():
        obj = sim.store.get_ref("", "configmaps", TEAM, name)
        found[name] = None if obj is None else (obj.get("data") or {}).get("revision")
    return found


class StageKiller:
    """SIGKILLs a process from inside the sim when the state's `inProgress` reaches (operation, stage)."""

    def __init__(self, sim: SimCluster, operation: str, stage: str) -> None:
        self.operation, self.stage = operation, stage
        self.pid: int | None = None
        self.fired = threading.Event()
        self.seen: list[tuple[str, str]] = []
        self._unsubscribe = sim.store.subscribe_raw(self._changed)

    def arm(self, pid: int) -> None:
        self.pid = pid

    def _changed(self, change: Change) -> None:
        rtype, obj = change[2], change[3]
        if rtype.plural != "configmaps" or obj["metadata"].get("name") != STATE_NAME:
            return
        raw = (obj.get("data") or {}).get("inProgress") or "null"
        marker = json.loads(raw)
        if not marker:
            return
        point = (str(marker.get("operation") or ""), str(marker.get("stage") or ""))
        if not self.seen or self.seen[-1] != point:
            self.seen.append(point)
        if self.pid is not None and not self.fired.is_set() and point == (self.operation, self.stage):
            os.kill(self.pid, signal.SIGKILL)
            self.fired.set()

    def close(self) -> None:
        self._unsubscribe()


def start_controller(root: Path, repo: str, kubeconfig: Path, cache: str, *extra: str) -> Running:
    """`dra-gitops run` on one repository, polling every second, with a short Lease and grace."""
    args = ["--repo", repo, "--kubeconfig", str(kubeconfig), "--poll-interval", "1s"]
    args += ["--cache-dir", str(root / cache), "--lease-duration", "2", "--grace", "1s", *extra]
    logs = len(list(root.glob("run*.log")))
    return Running(args, free_port(), root / f"run{logs}.log")


class Rig:
    """One cluster, one remote seeded with `manifests-example/` plus the markers, controllers started on it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sim = SimCluster().start()
        self.plane = install(
            self.sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        self.kubeconfig = self.sim.write_kubeconfig(root / "kubeconfig")
        self.remote = example_remote(root / "git")
        self.runs: list[Running] = []

    def commit(self, revision: str, *, trainers: int = 1) -> str:
        write_markers(self.remote, revision)
        set_trainers(self.remote, trainers)
        return self.remote.commit_and_push(f"revision {revision}")

    def start(self, cache: str, *extra: str, repo: str | None = None) -> Running:
        run = start_controller(self.root, repo or self.remote.url, self.kubeconfig, cache, *extra)
        self.runs.append(run)
        return run

    def state(self) -> TargetState:
        return state_of(self.sim, TARGET)

    def kill_at(self, run: Running, operation: str, point: str, revision: str, *, trainers: int = 1) -> str:
        """Commit `revision` and SIGKILL `run` when its pass records (operation, point); the new sha."""
        killer = StageKiller(self.sim, operation, point)
        killer.arm(run.proc.pid)
        try:
            sha = self.commit(revision, trainers=trainers)
            assert killer.fired.wait(90), f"never reached {operation} {point!r}: {killer.seen}\n{tail(run)}"
            assert run.proc.wait(10) == -9
        finally:
            killer.close()
        return sha

    def settled(self, sha: str, timeout: float = 90) -> TargetState:
        """Wait until no pass is in progress and `sha` is the last good revision."""
        return wait_for(
            lambda: (s := self.state()).in_progress is None and s.last_good == sha and s,
            timeout,
            f"{sha[:12]} the last good revision, nothing in progress",
            0.1,
        )

    def client(self) -> ClusterClient:
        return ClusterClient.for_url(self.sim.url)

    def close(self) -> None:
        for run in self.runs:
            run.stop(signal.SIGKILL)
        self.plane.stop()
        self.sim.stop()


def rig_at(root: Path) -> Iterator[Rig]:
    rig = Rig(root)
    try:
        yield rig
    finally:
        rig.close()


def tail(run: Running, chars: int = 4000) -> str:
    return run.log.read_text()[-chars:]


def markers_of(revision: str) -> dict[str, Any]:
    return dict.fromkeys(MARKERS.values(), revision)


class GitServer:
    """The rig's bare repository as a Git server reached over file:// (git-upload-pack, the same protocol as
    over ssh): it can vanish (moved away) and come back. Like GitHub, it refuses to send a commit no ref
    reaches ("not our ref")."""

    def __init__(self, remote: GitRemote) -> None:
        self.remote = remote
        self.away = remote.bare.with_name(remote.bare.name + ".gone")

    @property
    def url(self) -> str:
        return self.remote.bare.as_uri()

    def vanish(self) -> None:
        self.remote.bare.rename(self.away)

    def come_back(self) -> None:
        if self.away.exists():
            self.away.rename(self.remote.bare)


class ServedSim:
    """`dra-gitops sim serve --data-dir` as a process of its own, on a fixed port: killed with SIGKILL and
    started again (it serves what it had answered), or frozen with SIGSTOP and thawed."""

    def __init__(self, root: Path) -> None:
        self.data = root / "sim-data"
        self.kubeconfig = root / "sim.kubeconfig"
        self.port = free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "reconciler", "sim", "serve", "--port", str(self.port)]
        command += ["--canary-nodes", "1", "--data-dir", str(self.data)]
        command += ["--kubeconfig-out", str(self.kubeconfig)]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), self.url

    def client(self) -> ClusterClient:
        return ClusterClient.for_url(self.url, timeout=5, retries=1)

    def state(self) -> TargetState:
        with self.client() as client:
            return StateStore(client, TARGET).load()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait(10)

    def freeze(self) -> None:
        assert self.proc is not None
        freeze_process(self.proc.pid)

    def thaw(self) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.thaw()
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)


# ---- the paused leader (tests/faults/test_stage_pauses.py, benchmarks/bench_faults.py) --------------


def service_account_kubeconfig(rig: Rig, name: str) -> Path:
    """A kubeconfig of the ServiceAccount `name` (cluster-admin): its requests are told apart in the audit."""
    with ClusterClient.for_url(rig.sim.url) as client:
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": "kube-system"},
            }
        )
        client.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{name}-admin"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": "kube-system"}],
            }
        )
        answer = client.request(
            "POST",
            f"/api/v1/namespaces/kube-system/serviceaccounts/{name}/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        )
    return rig.sim.write_kubeconfig(rig.root / f"{name}.kubeconfig", token=answer["status"]["token"])


class StagePauser:
    """SIGSTOPs a process from inside the sim when the state's `inProgress` reaches (operation, stage)."""

    def __init__(self, rig: Rig, stage: str, pid: int, operation: str = "apply") -> None:
        self.fired = threading.Event()
        self.seen: list[str] = []

        def changed(change: Change) -> None:
            obj = change[3]
            if change[2].plural != "configmaps" or obj["metadata"].get("name") != STATE_NAME:
                return
            marker = json.loads((obj.get("data") or {}).get("inProgress") or "null")
            if not marker or marker.get("operation") != operation:
                return
            self.seen.append(str(marker.get("stage") or ""))
            if not self.fired.is_set() and marker.get("stage", "") == stage:
                os.kill(pid, signal.SIGSTOP)
                self.fired.set()

        self.close = rig.sim.store.subscribe_raw(changed)


def lease_holder(rig: Rig) -> str:
    lease = rig.sim.store.get_ref("coordination.k8s.io", "leases", "dra-gitops", f"dra-gitops-{TARGET}")
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")
