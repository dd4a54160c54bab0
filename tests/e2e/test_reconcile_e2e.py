"""The reconciler (`dra-gitops run --once`, as a subprocess) against the cluster of $DRA_GITOPS_E2E_KUBECONFIG.

It follows a bare Git repository made in tmp, the way a platform team's repository would be followed:
the first commit is applied; a commit asking for more devices than the nodes have is applied, fails
verification and is rolled back; the fix applies; a canary whose driver image crash-loops is rolled back and
ends healthy on the old template.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    DEVICES_PER_NODE,
    E2E_ENV,
    EXAMPLE,
    NODE_COUNT,
    SKIP_MESSAGE,
    STATE_TARGET,
    E2ECluster,
    wait_for,
)
from helpers import GitRemote

if not os.environ.get(E2E_ENV):
    pytest.skip(SKIP_MESSAGE, allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]


def reconcile_once(cluster: E2ECluster, remote: GitRemote, cache: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable, "-m", "reconciler", "run", "--once",
            "--repo", remote.url,
            "--kubeconfig", cluster.kubeconfig,
            "--state-namespace", cluster.state_namespace,
            "--target", STATE_TARGET,
            "--cache-dir", str(cache),
            "--grace", "5s",
            "--stage-timeout", "150",
            "--verify-timeout", "150",
            "--listen", "127.0.0.1:0",
        ],
        cwd=REPO, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


def status(cluster: E2ECluster) -> dict[str, Any]:
    done = subprocess.run(
        [
            sys.executable, "-m", "reconciler", "status", "-o", "json",
            "--kubeconfig", cluster.kubeconfig,
            "--state-namespace", cluster.state_namespace,
            "--target", STATE_TARGET,
        ],
        cwd=REPO, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def edit(remote: GitRemote, relative: str, change: Any) -> None:
    path = remote.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}"


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


def test_exhaustion_commit_is_rolled_back_and_the_fix_applies(
    fresh_example: E2ECluster, remote: GitRemote, tmp_path: Path
) -> None:
    cluster = fresh_example
    good = remote.commit_and_push("example")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 0 and "applied" in done.stdout, f"{explain(done)}\n{cluster.health()}"
    assert status(cluster)["lastGood"] == good

    total = NODE_COUNT * DEVICES_PER_NODE
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=total))
    bad = remote.commit_and_push(f"{total} trainers: one GPU more than the nodes have")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 1 and "rolled-back" in done.stdout, explain(done)
    trainer = cluster.kube.get("/apis/apps/v1/namespaces/ml-team/deployments/trainer")
    assert trainer is not None and trainer["spec"]["replicas"] == 2
    state = status(cluster)
    assert state["lastGood"] == good
    assert state["lastAttempted"]["sha"] == bad and state["lastAttempted"]["rolledBack"] is True
    assert [(r["sha"], r["outcome"]) for r in state["history"][:3]] == [
        (bad, "verify-failed"),
        (good, "applied"),
        (good, "applied"),
    ]

    def fix(doc: dict[str, Any]) -> None:
        doc["spec"]["replicas"] = 2
        doc["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=20"]

    edit(remote, "40-workloads/trainer.yaml", fix)
    fixed = remote.commit_and_push("trainer: back to 2, 20 epochs")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 0 and "applied" in done.stdout, f"{explain(done)}\n{cluster.health()}"
    assert status(cluster)["lastGood"] == fixed


def test_crash_looping_canary_is_rolled_back_and_ends_healthy(
    fresh_example: E2ECluster, remote: GitRemote, tmp_path: Path
) -> None:
    cluster = fresh_example
    broken = f"v0.4.0-crash-{cluster.run_id}"
    kubelet = cluster.kubelet

    def undo() -> None:
        kubelet.crash_images.discard(broken)
        kubelet.time_scale = 1.0

    cluster.extra_cleanup.append(undo)
    kubelet.crash_images.add(broken)
    kubelet.time_scale = 0.05

    good = remote.commit_and_push("example")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 0, f"{explain(done)}\n{cluster.health()}"
    edit(
        remote,
        "10-driver/kubelet-plugin-canary.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            image=f"registry.example.com/gpu-example-driver:{broken}"
        ),
    )
    bad = remote.commit_and_push("canary: a driver build that crashes")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 1 and "rolled-back" in done.stdout, explain(done)
    state = status(cluster)
    assert state["lastGood"] == good and state["lastAttempted"]["sha"] == bad

    def canary_healthy() -> bool:
        pods = cluster.kube.list(
            "/api/v1/namespaces/gpu-system/pods", labelSelector="app.kubernetes.io/instance=canary"
        )
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return bool(live) and all(
            p["spec"]["containers"][0]["image"].endswith("v0.3.0")
            and any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in (p.get("status") or {}).get("conditions") or []
            )
            for p in live
        )

    wait_for(f"the canary healthy on the old template ({cluster.health()})", canary_healthy, timeout=120)


def check_cluster(cluster: E2ECluster, work: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "check", str(work), "--cluster", "-q", "-o", "json",
         "--kubeconfig", cluster.kubeconfig],
        cwd=REPO, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, explain(done)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_a_rollout_with_every_device_in_use_is_foreseen_and_rolled_back(
    fresh_example: E2ECluster, remote: GitRemote, tmp_path: Path
) -> None:
    # The trainers and the notebook hold every device; a new pod template under the default strategy
    # (maxSurge 1, maxUnavailable 0 for a few replicas) starts a new pod before deleting an old one.
    cluster = fresh_example
    full = NODE_COUNT * DEVICES_PER_NODE - 1  # with the notebook's shared GPU: every device
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=full))
    good = remote.commit_and_push(f"{full} trainers: every device in use")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 0 and "applied" in done.stdout, f"{explain(done)}\n{cluster.health()}"

    def new_args(doc: dict[str, Any]) -> None:
        doc["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=30"]

    edit(remote, "40-workloads/trainer.yaml", new_args)
    report = check_cluster(cluster, remote.work)
    warned = [f for f in report["findings"] if f["rule"] == "capacity"]
    assert (
        len(warned) == 1 and "rolling update to a new pod template with maxUnavailable 0" in warned[0]["msg"]
    ), report["findings"]
    bad = remote.commit_and_push("trainer: 30 epochs")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 1 and "rolled-back" in done.stdout, f"{explain(done)}\n{cluster.health()}"
    state = status(cluster)
    assert state["lastGood"] == good and state["lastAttempted"]["sha"] == bad

    def room(doc: dict[str, Any]) -> None:
        doc["spec"]["strategy"] = {
            "type": "RollingUpdate",
            "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
        }

    edit(remote, "40-workloads/trainer.yaml", room)
    report = check_cluster(cluster, remote.work)
    assert [f for f in report["findings"] if f["rule"] == "capacity"] == []
    fixed = remote.commit_and_push("trainer: roll one pod at a time")
    done = reconcile_once(cluster, remote, tmp_path / "cache")
    assert done.returncode == 0 and "applied" in done.stdout, f"{explain(done)}\n{cluster.health()}"
    assert status(cluster)["lastGood"] == fixed
