"""A cluster per target: one controller drives a staging and a production cluster (each a `SimCluster` with
its own control plane) from `examples/two-clusters/targets.yaml`, while its Leases live in a third, its
own. State, kept copy, ApplySet parent, Events and objects land in each target's cluster; a cluster that
stops answering delays its own target only, and `/readyz` names it; the verbs given `--config` reach the
target's cluster."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from cluster_support import NAMESPACE, Cluster, write_kubeconfig
from controller_support import REPO, Running, free_port, readyz
from helpers import GitRemote, wait_for

from reconciler.cluster import applyset
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.leaseshard import REPLICA_LABEL
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.sim.server import SimCluster

EXAMPLE = REPO / "examples" / "two-clusters" / "targets.yaml"
MANIFESTS = REPO / "manifests-example"


def example_config(tmp_path: Path, repo: str, poll: str = "2s") -> Path:
    """The example as deployed: its kubeconfigs under tmp instead of /etc/dra-gitops, our Git remote."""
    text = EXAMPLE.read_text()
    for old, new in (
        ("/etc/dra-gitops/clusters", str(tmp_path / "clusters")),
        ("https://git.example.com/platform/dra-manifests.git", repo),
        ("pollInterval: 1m", f"pollInterval: {poll}"),
        ("grace: 60s", "grace: 5s"),
    ):
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "targets.yaml"
    path.write_text(text)
    return path


def manifests_remote(root: Path) -> GitRemote:
    remote = GitRemote(root)
    shutil.copytree(MANIFESTS, remote.work / "manifests")
    return remote


def label_namespaces(remote: GitRemote, value: str) -> str:
    path = remote.work / "manifests" / "00-foundation" / "namespaces.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    docs[0]["metadata"]["labels"]["example.com/revision"] = value
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return remote.commit_and_push(f"revision {value}")


def namespace_labels(cluster: Cluster) -> dict[str, str]:
    live = cluster.client.get(cluster.client.resource_for("v1", "Namespace"), None, "gpu-system")
    assert live is not None
    return dict(live["metadata"].get("labels") or {})


def lease_holders(client: ClusterClient, *, replicas: bool = False) -> dict[str, str]:
    """The targets' Leases and their holders (with `replicas`, the replicas' heartbeat Leases instead)."""
    resource = client.resource_for("coordination.k8s.io/v1", "Lease")
    return {
        lease["metadata"]["name"]: str((lease.get("spec") or {}).get("holderIdentity") or "")
        for lease in client.list(resource, NAMESPACE)
        if (REPLICA_LABEL in (lease["metadata"].get("labels") or {})) == replicas
    }


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"},
        timeout=600,
    )


@pytest.fixture
def home(tmp_path: Path) -> Iterator[tuple[ClusterClient, Path]]:
    """The controller's own cluster: only the Leases (and their namespace) live here."""
    with SimCluster() as sim, ClusterClient.for_url(sim.url) as client:
        yield client, write_kubeconfig(tmp_path / "home" / "kubeconfig", sim.url, "home")


@pytest.fixture
def staging(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster("staging", tmp_path / "clusters" / "staging" / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def production(tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster("production", tmp_path / "clusters" / "production" / "kubeconfig")
    try:
        yield cluster
    finally:
        cluster.stop()


def test_one_controller_two_clusters_and_a_stopped_one_delays_only_its_own_target(
    home: tuple[ClusterClient, Path], staging: Cluster, production: Cluster, tmp_path: Path
) -> None:
    home_client, home_kubeconfig = home
    remote = manifests_remote(tmp_path / "git")
    first = remote.commit_and_push("example")
    config = example_config(tmp_path, remote.url)
    verb_on_staging = ["--config", str(config), "--target", "staging", "--kubeconfig", str(home_kubeconfig)]
    run = Running(
        [
            "--config",
            str(config),
            "--kubeconfig",
            str(home_kubeconfig),
            "--cache-dir",
            str(tmp_path / "cache"),
        ]
        + ["--lease-duration", "6", "--identity", "replica-a"],
        free_port(),
        tmp_path / "run.log",
    )
    try:
        wait_for(lambda: run.get("/readyz") == 200, 180, "both targets reconciled")
        for cluster in (staging, production):
            state = wait_for(lambda c=cluster: (s := c.state(c.name)).last_good == first and s, 60, "state")
            assert state.in_progress is None
            # The state, its kept copy and ApplySet parent, the Events and the objects: in its own cluster.
            parent = cluster.client.get(
                cluster.client.resource_for("v1", "ConfigMap"), NAMESPACE, f"dra-gitops-{cluster.name}"
            )
            assert parent is not None
            assert parent["metadata"]["labels"][applyset.ID_LABEL] == applyset.applyset_id(
                cluster.name, NAMESPACE
            )
            other = "production" if cluster is staging else "staging"
            assert f"dra-gitops-{cluster.name}-last-good" in cluster.configmaps()
            assert not {f"dra-gitops-{other}", f"dra-gitops-{other}-last-good"} & cluster.configmaps()
            events = cluster.client.list_kind("", "Event", NAMESPACE)
            assert {"Applied"} <= {
                e.get("reason") for e in events if e["involvedObject"]["name"] == parent["metadata"]["name"]
            }
            claims = cluster.client.list_kind("resource.k8s.io", "ResourceClaim")
            assert claims and all((c.get("status") or {}).get("allocation") for c in claims)
            assert lease_holders(cluster.client) == {}  # no Lease in a target's cluster
            assert lease_holders(cluster.client, replicas=True) == {}
        # The Leases (the targets', the replica's heartbeat), and nothing else of ours, in the controller's
        # own cluster.
        assert lease_holders(home_client) == {
            "dra-gitops-staging": "replica-a",
            "dra-gitops-production": "replica-a",
        }
        assert lease_holders(home_client, replicas=True) == {"dra-gitops-replica.replica-a": "replica-a"}
        assert not any(
            n.startswith("dra-gitops-")
            for n in {c["metadata"]["name"] for c in home_client.list_kind("", "ConfigMap", NAMESPACE)}
        )
        assert home_client.list_kind("resource.k8s.io", "DeviceClass") == []
        assert 'dra_gitops_pending_claims{target="staging"} 0.0' in run.text("/metrics")
        # The claim metrics read each target's cluster: the devices allocated in both, added up.
        allocated = sum(
            len(claim["status"]["allocation"]["devices"]["results"])
            for cluster in (staging, production)
            for claim in cluster.client.list_kind("resource.k8s.io", "ResourceClaim")
        )
        assert allocated > 0
        line = f'dra_gitops_allocated_devices{{driver="gpu.example.com"}} {allocated:.1f}'
        wait_for(lambda: line in run.text("/metrics"), 30, line)

        # `get` reads each target's state in its own cluster.
        table = cli("get", "--config", str(config), "--kubeconfig", str(home_kubeconfig), "-o", "json")
        assert table.returncode == 0, table.stderr
        assert [(r["target"], r["lastGood"]) for r in json.loads(table.stdout)] == [
            ("staging", first),
            ("production", first),
        ]

        production.stop()
        second = label_namespaces(remote, "two")
        wait_for(lambda: staging.state("staging").last_good == second, 120, "staging on the second commit")
        status, body = wait_for(
            lambda: (answer := readyz(run))[0] == 503 and "production" in answer[1] and answer,
            60,
            "/readyz naming production",
        )
        assert "target production: its cluster (kubeconfig " in body
        assert "context production) cannot be reached" in body
        assert "staging" not in body
        assert namespace_labels(staging)["example.com/revision"] == "two"
        errors = [
            line
            for line in run.text("/metrics").splitlines()
            if line.startswith("dra_gitops_passes_total{") and 'target="production"' in line
        ]
        assert any('outcome="error"' in line for line in errors), errors

        # Handed to the controller: the request goes into staging's state, the wake-up onto its Lease at home.
        rolled = cli("rollback", *verb_on_staging, "--via", "controller", "--timeout", "3m", "-o", "json")
        assert rolled.returncode == 0, rolled.stderr + rolled.stdout
        assert json.loads(rolled.stdout)["sha"] == first
        state = staging.state("staging")
        assert (state.last_good, state.hold) == (first, second)  # the head it left is held
        assert "example.com/revision" not in namespace_labels(staging)

        # The Lease that wakes the controller is found in its cluster (exit 4 were it looked in staging's).
        woken = cli("reconcile", *verb_on_staging, "--no-wait")
        assert woken.returncode == 0, woken.stderr
        assert cli("suspend", *verb_on_staging, "--reason", "freeze").returncode == 0
        suspended = staging.state("staging").suspended
        assert suspended is not None and suspended.reason == "freeze"
        assert cli("resume", *verb_on_staging).returncode == 0
        assert staging.state("staging").suspended is None
    finally:
        assert run.stop() == 0, run.log.read_text()[-3000:]

    # The verbs with --config reach the target's cluster; without, --kubeconfig's (the Leases only).
    shown = cli("status", *verb_on_staging, "-o", "json")
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["lastGood"] == first
    elsewhere = cli("status", "--target", "staging", "--kubeconfig", str(home_kubeconfig), "-o", "json")
    assert elsewhere.returncode == 1 and "no target 'staging'" in elsewhere.stderr, elsewhere.stderr

    # From here, holding the target's Lease in the controller's cluster and delivering into staging's.
    synced = cli(
        "sync",
        *verb_on_staging,
        "--revision",
        second,
        "--via",
        "local",
        "--cache-dir",
        str(tmp_path / "cli"),
        "-o",
        "json",
    )
    assert synced.returncode == 0, synced.stderr + synced.stdout
    assert staging.state("staging").last_good == second
    assert namespace_labels(staging)["example.com/revision"] == "two"
    assert set(lease_holders(home_client)) == {"dra-gitops-staging", "dra-gitops-production"}
    history = cli("history", *verb_on_staging, "-o", "json")
    operations = [r["operation"] for r in json.loads(history.stdout)]
    assert operations[:4] == ["sync", "resume", "suspend", "rollback"]
    # staging's objects are those of the revision (it would be all to create in the controller's cluster).
    diff = cli(
        "diff", *verb_on_staging, "--revision", second, "--cache-dir", str(tmp_path / "cli"), "--no-diff"
    )
    assert diff.returncode == 0, diff.stderr + diff.stdout
    assert f"staging: {second[:12]} against {staging.sim.url}" in diff.stderr
    checklist = cli("checklist", *verb_on_staging, "-o", "json")
    assert f"reading the checklist of target staging from {staging.sim.url}" in checklist.stderr
    assert second in checklist.stdout  # the last attempt it judges is staging's


def test_a_cluster_nothing_listens_on_never_holds_up_the_others(
    home: tuple[ClusterClient, Path], staging: Cluster, tmp_path: Path
) -> None:
    home_client, _ = home
    remote = manifests_remote(tmp_path / "git")
    sha = remote.commit_and_push("example")
    nowhere = write_kubeconfig(
        tmp_path / "clusters" / "production" / "kubeconfig", f"http://127.0.0.1:{free_port()}", "production"
    )
    assert nowhere.is_file()
    config = example_config(tmp_path, remote.url, poll="1h")
    targets = load_targets(config.read_text(), str(config))
    options = ControllerOptions(
        cache_dir=tmp_path / "cache",
        port=0,
        identity="replica-a",
        stage_timeout=60,
        verify_timeout=60,
        check=CheckOptions(),
        request_timeout=10,
    )
    controller = Controller(home_client, targets, options)
    namespaces = staging.client.resource_for("v1", "Namespace")
    assert staging.client.get(namespaces, None, NAMESPACE) is None
    controller.start()
    try:
        # Its state namespace created in its cluster, by its worker; the Leases' in the controller's.
        wait_for(lambda: staging.state("staging").last_good == sha, 180, "staging reconciled")
        reason = wait_for(lambda: controller.server.ready and controller.unready_reason(), 60, "readiness")
        assert reason.startswith("target production: its cluster (kubeconfig ")
        assert "cannot be reached" in reason
        assert "staging" not in reason
        assert controller.workers["production"].passes == 0
        # Tried again soon (its poll interval is an hour), each try counted as a failed pass.
        registry = controller.metrics.registry
        labels = {"target": "production", "outcome": "error"}
        wait_for(
            lambda: (registry.get_sample_value("dra_gitops_passes_total", labels) or 0) >= 2,
            120,
            "production tried again",
            interval=0.5,
        )
        # Both Leases taken in the controller's cluster: the dead cluster does not keep its Lease from it.
        assert lease_holders(home_client) == {
            "dra-gitops-staging": "replica-a",
            "dra-gitops-production": "replica-a",
        }

        # Its state namespace deleted in its cluster: the next pass puts it back there, state and all.
        staging.client.delete(namespaces, None, NAMESPACE)
        wait_for(lambda: staging.client.get(namespaces, None, NAMESPACE) is None, 60, "the namespace gone")

        def recorded_again() -> bool:
            controller.trigger({"staging"}, "the test")
            return staging.state("staging").last_good == sha

        wait_for(recorded_again, 120, "staging's state recorded again", interval=1.0)
        assert staging.client.get(namespaces, None, NAMESPACE) is not None
    finally:
        controller.stop()
