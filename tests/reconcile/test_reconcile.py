"""The reconcile pass against the simulated cluster, following a real bare Git repository.

Each test pushes commits to a bare repository and runs passes of `Reconciler` through `GitSource`, the
same path `dra-gitops run` takes: apply, steady state, rollback, denial, drift, crash recovery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import GitRemote, wait_for
from pass_support import BROKEN_DRIVER, TARGET, edit, live_specs, reconciler_for

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.records import InProgress
from reconciler.loop.store.state import StateStore


def test_first_commit_applies_and_a_steady_pass_writes_nothing(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    sha = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    result = reconciler.reconcile()
    assert result.outcome == "applied", (result.message, result.records)
    state = StateStore(client, TARGET).load()
    assert state.last_good == sha
    assert state.in_progress is None
    assert state.history[0].sha == sha and state.history[0].outcome == "applied"
    assert any(d["devices"] for d in state.history[0].devices or [])
    assert "apps/v1 Deployment/ml-team/trainer" in state.inventory

    writes = client.writes_sent
    again = reconciler.reconcile()
    assert again.outcome == "unchanged"
    assert client.writes_sent == writes
    assert again.drift is not None and again.drift.dry_runs == 0

    # A fresh reconciler (a restarted controller) has no fingerprints yet: still no writes.
    fresh = reconciler_for(client, remote, tmp_path)
    assert fresh.reconcile().outcome == "unchanged"
    assert client.writes_sent == writes


def test_a_commit_asking_for_more_devices_than_exist_is_rolled_back(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    before = live_specs(client)
    before_workloads = {k: v for k, v in before.items() if not k.startswith(("Pod/", "ResourceClaim/"))}

    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    bad = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")
    result = reconciler.reconcile()
    assert result.outcome == "rolled-back", (result.message, result.records)
    assert result.delivery is not None and result.delivery.outcome == "verify-failed"
    after = live_specs(client)
    assert {
        k: v for k, v in after.items() if not k.startswith(("Pod/", "ResourceClaim/"))
    } == before_workloads
    assert after["Deployment/ml-team/trainer"]["spec"]["replicas"] == 2

    state = StateStore(client, TARGET).load()
    assert state.last_good == good
    assert state.last_attempted is not None and state.last_attempted.sha == bad
    assert state.last_attempted.rolled_back is True
    outcomes = [(r.sha, r.operation, r.outcome) for r in state.history[:3]]
    assert outcomes == [
        (bad, "apply", "verify-failed"),
        (good, "rollback", "applied"),
        (good, "apply", "applied"),
    ]
    events = client.list_kind("", "Event", "dra-gitops")
    assert any(e["reason"] == "RolledBack" and bad[:12] in e["message"] for e in events)

    # The failed sha is not retried: the next pass holds on the last good revision and writes nothing.
    writes = client.writes_sent
    held = reconciler.reconcile()
    assert held.outcome == "held"
    assert client.writes_sent == writes

    # The next good commit (the fix: two trainers again, with a new argument, so their pods roll) applies.
    def fix(doc: dict[str, Any]) -> None:
        doc["spec"]["replicas"] = 2
        doc["spec"]["template"]["spec"]["containers"][0]["args"] = ["--epochs=20"]

    edit(remote, "40-workloads/trainer.yaml", fix)
    fixed = remote.commit_and_push("trainer: back to 2 replicas, 20 epochs")
    result = reconciler.reconcile()
    assert result.outcome == "applied", (result.message, result.records)
    assert StateStore(client, TARGET).load().last_good == fixed
    live = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert live is not None and live["spec"]["template"]["spec"]["containers"][0]["args"] == ["--epochs=20"]


def test_a_denied_commit_writes_nothing_and_retry_tries_it_again(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    # A main driver image change without the canary first: driver-canary denies it (base = last good).
    edit(
        remote,
        "10-driver/kubelet-plugin.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            image="registry.example.com/gpu-example-driver:v0.4.0"
        ),
    )
    denied = remote.commit_and_push("driver v0.4.0 straight to main")
    writes = client.writes_sent
    result = reconciler.reconcile()
    assert result.outcome == "denied"
    assert ("driver-canary", "deny") in result.violations
    # The pass says why (what `run --once` prints and the logs carry), with the file and line.
    assert result.message.startswith("10-driver/kubelet-plugin.yaml:")
    assert "driver-canary: DaemonSet/gpu-system/gpu-example-kubelet-plugin changes" in result.message
    state = StateStore(client, TARGET).load()
    assert state.last_attempted is not None
    assert state.last_attempted.to_json() == {
        "sha": denied,
        "outcome": "denied",
        "at": state.last_attempted.at,
    }
    assert "driver-canary" in (state.history[0].message or "")
    # Only the state record was written (and an event): no managed object.
    assert client.writes_sent - writes <= 2
    assert reconciler.reconcile().outcome == "held"
    StateStore(client, TARGET).update(lambda s: setattr(s, "retry", denied))
    assert reconciler.reconcile().outcome == "denied"


def test_drift_is_corrected_and_recorded(client: ClusterClient, remote: GitRemote, tmp_path: Path) -> None:
    sha = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    deployments = client.resource_for("apps/v1", "Deployment")
    client.patch_merge(
        deployments,
        "ml-team",
        "trainer",
        {
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {
                                "name": "trainer",
                                "image": "registry.example.com/ml/trainer:9.9.9",
                                "args": ["--epochs=10"],
                                "resources": {"claims": [{"name": "gpu"}]},
                            }
                        ]
                    }
                }
            }
        },
    )
    classes = client.resource_for("resource.k8s.io/v1", "DeviceClass")
    result = reconciler.reconcile()
    assert result.outcome == "drift-corrected", (result.message, result.records)
    live = client.get(deployments, "ml-team", "trainer")
    assert live is not None
    assert (
        live["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example.com/ml/trainer:2.1.0"
    )
    assert client.get(classes, None, "gpu.example.com") is not None
    state = StateStore(client, TARGET).load()
    assert state.history[0].operation == "drift" and state.history[0].sha == sha
    assert (state.history[0].drift or {})["changed"] == ["Deployment/ml-team/trainer"]
    assert reconciler.reconcile().outcome == "unchanged"


def test_a_first_pass_that_fails_leaves_the_cluster_as_it_was(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    # A namespace that existed before the reconciler came: the failed first pass must not delete it.
    client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}})
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    remote.commit_and_push("too many GPUs from the start")
    reconciler = reconciler_for(client, remote, tmp_path)
    result = reconciler.reconcile()
    assert result.outcome == "rolled-back", (result.message, result.records)
    namespaces = client.resource_for("v1", "Namespace")
    assert client.get(namespaces, None, "ml-team") is not None
    deployments = client.resource_for("apps/v1", "Deployment")
    assert client.get(deployments, "ml-team", "trainer") is None
    classes = client.resource_for("resource.k8s.io/v1", "DeviceClass")
    assert client.get(classes, None, "gpu.example.com") is None
    state = StateStore(client, TARGET).load()
    assert state.last_good is None


def test_an_interrupted_pass_converges_to_one_revision(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "40-workloads/trainer.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=30"]),
    )
    newer = remote.commit_and_push("trainer: 30 epochs")
    # What a pass killed after its first stage leaves behind.
    store = StateStore(client, TARGET)
    store.update(
        lambda s: setattr(
            s, "in_progress", InProgress(sha=newer, operation="apply", from_sha=good, stage="2", since="x")
        )
    )
    result = reconciler_for(client, remote, tmp_path).reconcile()
    assert result.outcome == "applied"
    state = store.load()
    assert state.in_progress is None and state.last_good == newer
    assert [(r.sha, r.outcome) for r in state.history[:2]] == [
        (newer, "applied"),
        (newer, "interrupted"),
    ]


def test_a_crash_looping_canary_is_rolled_back_and_ends_healthy_on_the_old_template(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "10-driver/kubelet-plugin-canary.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(image=BROKEN_DRIVER),
    )
    bad = remote.commit_and_push("canary: driver v0.4.0-broken")
    result = reconciler.reconcile()
    assert result.outcome == "rolled-back", (result.message, result.records)
    assert result.delivery is not None and result.delivery.outcome == "apply-failed"
    state = StateStore(client, TARGET).load()
    assert state.last_good == good and state.last_attempted is not None and state.last_attempted.sha == bad

    def canary_healthy() -> bool:
        pods = client.list_kind("", "Pod", "gpu-system", label_selector="app.kubernetes.io/instance=canary")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return bool(live) and all(
            p["spec"]["containers"][0]["image"].endswith("v0.3.0")
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions") or []
            )
            for p in live
        )

    wait_for(canary_healthy, 30, "the canary healthy on the old template")


def test_a_force_push_is_followed_and_recorded_even_after_a_restart(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    first = remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == "applied"
    edit(
        remote, "40-workloads/trainer.yaml", lambda d: d["metadata"].update(annotations={"rewritten": "yes"})
    )
    remote.git("add", "-A")
    remote.git("commit", "--quiet", "--amend", "-m", "example, rewritten")
    rewritten = remote.git("rev-parse", "HEAD")
    remote.push("--force")
    # A new reconciler (a restarted controller, a fresh cache) still knows what it attempted last: the state.
    result = reconciler_for(client, remote, tmp_path / "restarted").reconcile()
    assert result.outcome == "applied", (result.message, result.records)
    record = StateStore(client, TARGET).load().history[0]
    assert record.sha == rewritten and record.force_push == {"previous": first}
