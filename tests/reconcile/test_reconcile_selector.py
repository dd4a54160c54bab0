"""A reconcile pass whose commit breaks a class selector at run time rolls back at once (no grace wait).

The cluster has two drivers: accel.example.com (pre-installed, no productName) and gpu.example.com (the
example's driver, publishing productName H200). The bad commit makes the example's class read
`productName` without a guard and adds a trainer: the new pod's search reaches an accel device first and
kube-scheduler (the simulated one) fails it with SchedulerError. `check --cluster` only warns (some
devices match), so the commit is applied, verification stops at once and the pass rolls back.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.store.state import StateStore
from reconciler.sim.controlplane import DriverConfig, install
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
TARGET = "gpu-cluster"
H200 = 'device.attributes["gpu.example.com"].productName == "H200"'


@pytest.fixture
def client() -> Iterator[ClusterClient]:
    drivers = [
        DriverConfig("accel.example.com", devices_per_node=2, device_prefix="accel", preinstalled=True),
        DriverConfig("gpu.example.com", devices_per_node=2, attributes={"productName": {"string": "H200"}}),
    ]
    with SimCluster() as sim:
        plane = install(sim, nodes=2, drivers=drivers, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            with ClusterClient.for_url(sim.url) as c:
                yield c
        finally:
            plane.stop()


def edit(remote: GitRemote, relative: str, change: Any) -> None:
    path = remote.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def test_a_selector_failing_at_run_time_is_rolled_back_at_once(client: ClusterClient, tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    good = remote.commit_and_push("example")
    # grace and timeouts far beyond the test's run: only a terminal verdict lets the pass return
    options = ReconcileOptions(
        DeliverOptions(target=TARGET, grace=3600, stage_timeout=120, verify_timeout=3600)
    )
    source = GitSource(remote.url, tmp_path / "cache", branch="main")
    reconciler = Reconciler(client, GitRevisions(source), options, CheckOptions())
    assert reconciler.reconcile().outcome == "applied"

    edit(
        remote,
        "20-classes/gpu-class.yaml",
        lambda d: d["spec"]["selectors"][0]["cel"].update(expression=H200),
    )
    edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=3))
    bad = remote.commit_and_push("gpu class: productName H200 only; a third trainer")
    result = reconciler.reconcile()
    assert result.outcome == "rolled-back", (result.message, result.records)
    delivery = result.delivery
    assert delivery is not None and delivery.outcome == "verify-failed" and delivery.verified is not None
    assert (
        "selector error: class gpu.example.com: selector #0: CEL runtime error: no such key: productName"
        in (delivery.verified.terminal)
    )
    (diag,) = [d for d in delivery.verified.diagnoses if d.mode == "selector-error"]
    assert diag.numbers["key"] == "productName" and diag.numbers["matching"] == 4
    assert "exhaustion" not in {d.mode for d in delivery.verified.diagnoses}
    assert delivery.check is not None
    warned = [f for f in delivery.check.result.findings if f.rule == "capacity" and f.severity == "warn"]
    assert warned and "sim-node-0/accel-0" in warned[0].msg

    state = StateStore(client, TARGET).load()
    assert state.last_good == good
    assert state.last_attempted is not None and state.last_attempted.sha == bad
    assert state.last_attempted.rolled_back is True
    live = client.get(client.resource_for("resource.k8s.io/v1", "DeviceClass"), None, "gpu.example.com")
    assert (
        live is not None
        and live["spec"]["selectors"][0]["cel"]["expression"] == 'device.driver == "gpu.example.com"'
    )
