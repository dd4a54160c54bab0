"""`dra-gitops checklist` against the simulated cluster after real reconcile passes of manifests-example.

The reconcile passes run through `Reconciler` and a real bare Git repository (as tests/reconcile does);
the last test drives the shipped commands as processes: `sim serve`, `run --once`, then `checklist`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import GitRemote, wait_for

from reconciler.checklist.gather import gather_facts
from reconciler.checklist.items import (
    CHECKED,
    ITEM_IDS,
    NOT_APPLICABLE,
    NOT_CHECKED,
    Checklist,
    build_checklist,
)
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"
TARGET = "gpu-cluster"
BROKEN_DRIVER = "registry.example.com/gpu-example-driver:v0.4.0-broken"


@pytest.fixture
def cluster() -> Iterator[SimCluster]:
    """Two nodes with two devices each; the first is a canary node. BROKEN_DRIVER crash-loops."""
    with SimCluster() as sim:
        plane = install(
            sim,
            nodes=2,
            devices_per_node=2,
            node_labels=[{"dra-gitops.io/canary": "true"}, {}],
            crash_images=[BROKEN_DRIVER],
            time_scale=0.05,
        )
        try:
            yield sim
        finally:
            plane.stop()


@pytest.fixture
def client(cluster: SimCluster) -> Iterator[ClusterClient]:
    with ClusterClient.for_url(cluster.url) as c:
        yield c


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


def reconciler_for(client: ClusterClient, remote: GitRemote, tmp_path: Path) -> Reconciler:
    source = GitSource(remote.url, tmp_path / "cache", branch="main")
    options = ReconcileOptions(DeliverOptions(target=TARGET, grace=3.0, stage_timeout=60, verify_timeout=60))
    return Reconciler(client, GitRevisions(source), options, CheckOptions())


def edit(remote: GitRemote, relative: str, change: Any) -> None:
    path = remote.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def checklist_of(client: ClusterClient, target: str = TARGET) -> Checklist:
    return build_checklist(gather_facts(client, target, "dra-gitops"))


def text(checklist: Checklist, item_id: str) -> str:
    return "\n".join(checklist.item(item_id).evidence)


def live_allocations(client: ClusterClient) -> dict[str, list[str]]:
    found = {}
    for claim in client.list_kind("resource.k8s.io", "ResourceClaim", "ml-team"):
        results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
            "results"
        ) or []
        found[f"ml-team/{claim['metadata']['name']}"] = [
            f"{r['driver']}/{r['pool']}/{r['device']}" for r in results
        ]
    return found


def test_after_the_example_is_reconciled_every_item_is_checked_with_real_evidence(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    sha = remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == "applied"

    checklist = checklist_of(client)
    statuses = {i.id: i.status for i in checklist.items}
    assert statuses == {**dict.fromkeys(ITEM_IDS, CHECKED), "devices-in-container": NOT_APPLICABLE}, [
        (i.id, i.evidence) for i in checklist.items if i.status != CHECKED
    ]
    assert checklist.exit_code == 0
    assert checklist.last_good == sha
    assert text(checklist, "api").startswith("Kubernetes v1.")
    assert "resource.k8s.io served: v1 (preferred)" in text(checklist, "api")
    assert "DaemonSet/gpu-system/gpu-example-kubelet-plugin (driver gpu.example.com): current" in text(
        checklist, "driver-rollout"
    )
    assert text(checklist, "driver-pods").startswith("2/2 driver pod(s) of the current template Ready")
    assert "gpu.example.com → gpu.example.com" in text(checklist, "classes")
    assert "gpu.example.com: 2 slice(s), 4 device(s) in 2 pool(s) on sim-node-0, sim-node-1" in text(
        checklist, "slices"
    )
    # The example asks for 3 GPUs (a shared one and one per trainer) of the 4 published.
    assert text(checklist, "capacity").startswith("4 device(s), 3 allocated, 1 free")
    assert f"{sha[:12]}: 12 to create" in text(checklist, "dry-run")
    assert f"lastGood {sha[:12]}, apply verified at" in text(checklist, "rollback-target")
    assert "3 claim(s) in namespace(s) gpu-system, ml-team: 3 allocated, 3 reserved, 0 pending" in text(
        checklist, "claims"
    )
    assert text(checklist, "pods-ready").startswith("3/3 pod(s) using claims Ready")
    assert text(checklist, "verified").startswith(f"{sha[:12]} applied and verified at")
    # Every live allocation is named, device and all, under the claims of the pods.
    allocations = live_allocations(client)
    assert len(allocations) == 3 and all(len(devices) == 1 for devices in allocations.values())
    for claim, devices in allocations.items():
        assert f"claim {claim} → {devices[0]} on sim-node-" in text(checklist, "claims-allocated")
        assert f"{claim} → {devices[0]} on sim-node-" in text(checklist, "verified")


def test_after_a_rolled_back_commit_the_attempt_items_are_unchecked_with_the_reason(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    good = remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
    bad = remote.commit_and_push("trainer: 4 replicas (5 GPUs needed, 4 exist)")
    assert reconciler.reconcile().outcome == "rolled-back"

    checklist = checklist_of(client)
    assert checklist.exit_code == 1
    verified = checklist.item("verified")
    assert verified.status == NOT_CHECKED
    assert verified.evidence[0].startswith(
        f"{bad[:12]} verify-failed: verification failed: pod ml-team/trainer-"
    )
    assert "cannot allocate all claims" in verified.evidence[0]
    assert verified.evidence[0].endswith(f"; rolled back to {good[:12]} and verified")
    # The pod that found no device is named among the claims the failed attempt recorded.
    assert any(line.endswith(" → - on - (pod " + line.split("(pod ")[-1]) for line in verified.evidence[1:])

    events = checklist.item("events")
    assert events.status == NOT_CHECKED
    assert any(
        "FailedScheduling" in line and "cannot allocate all claims" in line and line.endswith("[gone now]")
        for line in events.evidence[1:]
    ), events.evidence
    # Its dry-run passed (the capacity rule only warns) and the rollback target took the cluster back.
    assert checklist.item("dry-run").status == CHECKED
    assert f"{bad[:12]}: 0 to create, 1 to update" in text(checklist, "dry-run")
    assert "warn capacity 40-workloads/trainer.yaml:1 Deployment/ml-team/trainer" in text(
        checklist, "dry-run"
    )
    assert checklist.item("rollback-target").status == CHECKED
    assert f"lastGood {good[:12]}, rollback verified at" in text(checklist, "rollback-target")
    assert f"{bad[:12]} (verify-failed) was rolled back to it" in text(checklist, "rollback-target")

    # The cluster itself is back on the last good revision: its pods get Ready with their devices.
    def settled() -> Checklist | None:
        again = checklist_of(client)
        wanted = ("pods-ready", "claims-allocated", "claims", "driver-pods")
        return again if all(again.item(i).status == CHECKED for i in wanted) else None

    again = wait_for(settled, 20, "the rolled-back cluster settled")
    assert again.item("pods-ready").evidence[0].startswith("3/3 pod(s) using claims Ready")


def test_a_denied_commit_leaves_the_dry_run_unchecked(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == "applied"
    edit(
        remote,
        "10-driver/kubelet-plugin.yaml",
        lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
            image="registry.example.com/gpu-example-driver:v0.4.0"
        ),
    )
    denied = remote.commit_and_push("driver v0.4.0 without a canary")
    assert reconciler.reconcile().outcome == "denied"

    checklist = checklist_of(client)
    dry_run = checklist.item("dry-run")
    assert dry_run.status == NOT_CHECKED
    assert dry_run.evidence[0] == (
        f"{denied[:12]}: denied by policy before the dry-run (1 denial(s)); nothing was written"
    )
    assert any(
        line.startswith(
            "deny driver-canary 10-driver/kubelet-plugin.yaml:1 DaemonSet/gpu-system/gpu-example-kubelet-plugin: "
            "DaemonSet/gpu-system/gpu-example-kubelet-plugin changes the driver's pod template"
        )
        for line in dry_run.evidence[1:]
    ), dry_run.evidence
    assert checklist.item("verified").evidence[0].startswith(f"{denied[:12]} denied:")
    # Nothing was written: the live items still hold.
    for item_id in (
        "driver-rollout",
        "driver-pods",
        "claims",
        "pods-ready",
        "claims-allocated",
        "rollback-target",
    ):
        assert checklist.item(item_id).status == CHECKED, checklist.item(item_id)


def test_a_crash_looping_driver_pod_unchecks_driver_health(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == "applied"
    # Someone changes the canary by hand to a driver that crashes (drift, not yet corrected).
    daemonsets = client.resource_for("apps/v1", "DaemonSet")
    live = client.get(daemonsets, "gpu-system", "gpu-example-kubelet-plugin-canary")
    assert live is not None
    container = live["spec"]["template"]["spec"]["containers"][0]["name"]
    patch = {"spec": {"template": {"spec": {"containers": [{"name": container, "image": BROKEN_DRIVER}]}}}}
    client.patch_merge(daemonsets, "gpu-system", "gpu-example-kubelet-plugin-canary", patch)

    def crash_looping() -> Checklist | None:
        checklist = checklist_of(client)
        return checklist if "CrashLoopBackOff" in text(checklist, "driver-pods") else None

    checklist = wait_for(crash_looping, 30, "the canary driver pod in CrashLoopBackOff")
    item = checklist.item("driver-pods")
    assert item.status == NOT_CHECKED
    assert "1 in CrashLoopBackOff" in item.evidence[0]
    assert any(
        line.startswith("gpu-system/gpu-example-kubelet-plugin-canary-")
        and line.endswith(": CrashLoopBackOff")
        for line in item.evidence
    )
    assert checklist.exit_code == 1


def test_no_state_for_the_target_names_the_targets_that_have_one(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    assert reconciler_for(client, remote, tmp_path).reconcile().outcome == "applied"
    checklist = checklist_of(client, "default")
    assert checklist.item("verified").evidence == (
        "no reconcile recorded for target default (ConfigMap/dra-gitops/dra-gitops-default not found); "
        f"targets with a state there: {TARGET}",
    )
    # Without a state the live items look at every namespace.
    assert "in all namespaces" in text(checklist, "claims")
    assert checklist.item("claims").status == CHECKED


def _dra_gitops(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args], capture_output=True, text=True, timeout=timeout, cwd=REPO
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Path]:
    """`dra-gitops sim serve` as a process (one canary node), and its kubeconfig."""
    kubeconfig = tmp_path / "sim.kubeconfig"
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "reconciler",
            "sim",
            "serve",
            "--canary-nodes",
            "1",
            "--kubeconfig-out",
            str(kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), url
        yield kubeconfig
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_the_command_against_sim_serve_after_run_once(
    served: Path, remote: GitRemote, tmp_path: Path
) -> None:
    sha = remote.commit_and_push("example")
    kube = ("--kubeconfig", str(served))
    ran = _dra_gitops(
        "run", "--once", "--repo", remote.url, "--target", TARGET, "--listen", "127.0.0.1:0",
        "--cache-dir", str(tmp_path / "cache"), "-q", *kube,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert f"{TARGET}: applied {sha}" in ran.stdout

    markdown = _dra_gitops("checklist", "--target", TARGET, *kube, "-q")
    assert markdown.returncode == 0, markdown.stdout + markdown.stderr
    out = markdown.stdout
    assert out.startswith(f"## DRA deployment checklist: target `{TARGET}`\n")
    assert out.count("- [x] **") == len(ITEM_IDS) - 1 and "- [ ]" not in out
    assert "- [x] ~~Devices seen in the container (verify-exec)~~ — not applicable" in out
    assert f"last good `{sha[:12]}`" in out
    assert "13/13 applicable item(s) checked" in out

    as_json = _dra_gitops(
        "checklist", "--target", TARGET, "--namespace", "dra-gitops", "-o", "json", *kube, "-q"
    )
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert data["ok"] is True and data["lastGood"] == sha
    assert [(i["id"], i["status"]) for i in data["items"]] == [
        (i, NOT_APPLICABLE if i == "devices-in-container" else CHECKED) for i in ITEM_IDS
    ]
    assert all(
        set(i) == {"id", "section", "title", "status", "evidence"} and i["evidence"] for i in data["items"]
    )

    other = _dra_gitops("checklist", "-o", "text", *kube, "-q")
    assert other.returncode == 1
    assert f"targets with a state there: {TARGET}" in other.stdout
    assert (
        "  [ ] Last attempted revision applied and verified: no reconcile recorded for target default"
        in other.stdout
    )


def test_the_command_against_demo_keep(tmp_path: Path) -> None:
    """The issue's acceptance: after `demo --keep`, `checklist` prints every item with its evidence."""
    workdir = tmp_path / "demo"
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "demo", "--keep", "--plain", "--workdir", str(workdir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stdout is not None
        seen = []
        for line in process.stdout:
            seen.append(line)
            if line.startswith("Ctrl-C stops everything"):
                break
        assert any("every one ended as expected" in line for line in seen), "".join(seen)
        done = _dra_gitops("checklist", "--kubeconfig", str(workdir / "kubeconfig"), "-o", "json", "-q")
        assert done.returncode == 0, done.stdout + done.stderr
        data = json.loads(done.stdout)
        assert [(i["id"], i["status"]) for i in data["items"]] == [(i, CHECKED) for i in ITEM_IDS]
        inside = next(i for i in data["items"] if i["id"] == "devices-in-container")
        assert inside["evidence"][0].endswith("4/4 container(s) ok")  # the fix's four trainers, over exec
        assert all("'printenv GPU_DEVICE_0': ok: gpu-" in line for line in inside["evidence"][1:])
        verified = next(i for i in data["items"] if i["id"] == "verified")
        assert verified["evidence"][0].startswith(f"{data['lastGood'][:12]} applied and verified at")
        assert any(" → gpu.example.com/sim-node-" in line for line in verified["evidence"][1:])
    finally:
        process.terminate()
        process.wait(timeout=20)
