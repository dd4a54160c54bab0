"""`dra-gitops check --cluster` against the simulated cluster over real HTTP: live state feeds the rules."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers import wait_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.facts import collect_facts
from reconciler.errors import EnvironmentProblem
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}

CHANGE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  replicas: %d
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      resourceClaims:
      - {name: gpu, resourceClaimTemplateName: one-gpu}
      containers:
      - name: main
        image: trainer:1
        resources: {claims: [{name: gpu}]}
"""


@pytest.fixture
def gpu_sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    """One node with two gpu.example.com devices published, the class and namespace in place."""
    with SimCluster() as sim:
        plane = install(sim, nodes=1, devices_per_node=2, driver_preinstalled=True)
        try:
            client = ClusterClient.for_url(sim.url)
            client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}})
            client.apply(CLASS)
            deadline = time.monotonic() + 10
            while not client.list_kind("resource.k8s.io", "ResourceSlice"):
                assert time.monotonic() < deadline, "the simulated driver published no slices"
                time.sleep(0.05)
            client.close()
            kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
            yield sim, kubeconfig
        finally:
            plane.stop()


def check(kubeconfig: Path, directory: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["check", str(directory), "--kubeconfig", str(kubeconfig), "-o", "json", "-q", *extra]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def test_change_needing_three_devices_where_two_are_free_reports_capacity(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = gpu_sim
    change = tmp_path / "change"
    change.mkdir()
    (change / "trainer.yaml").write_text(CHANGE % 3)
    code, report = check(kubeconfig, change)
    capacity = [f for f in report["findings"] if f["rule"] == "capacity"]
    assert len(capacity) == 1, report["findings"]
    assert capacity[0]["severity"] == "warn" and code == 0
    assert capacity[0]["ref"] == "Deployment/ml/trainer"
    assert capacity[0]["path"].endswith("trainer.yaml") and capacity[0]["line"] == 11
    assert capacity[0]["msg"].startswith(
        "Deployment/ml/trainer: pod ml/trainer-2 (1 of 3) cannot be scheduled: "
        "sim-node-0: claim gpu: needs 1, 0 of 2 matching devices free (2 held by pods placed before it)"
    )
    # Every pod and claim of the change has its predicted outcome in the report.
    pods = {p["pod"]: (p["outcome"], p["node"]) for p in report["capacity"]["pods"]}
    assert pods == {
        "ml/trainer-0": ("fits", "sim-node-0"),
        "ml/trainer-1": ("fits", "sim-node-0"),
        "ml/trainer-2": ("does-not-fit", None),
    }
    claims = {c["claim"]: c["devices"] for c in report["capacity"]["claims"]}
    assert claims == {
        "ml/trainer-0-gpu": ["gpu.example.com/sim-node-0/gpu-0"],
        "ml/trainer-1-gpu": ["gpu.example.com/sim-node-0/gpu-1"],
        "ml/trainer-2-gpu": [],
    }

    # With the param set it blocks; two replicas fit and pass.
    params = tmp_path / "params"
    params.mkdir()
    (params / "data.json").write_text(json.dumps({"params": {"capacity_deny": True}}))
    code, report = check(kubeconfig, change, "--policy", str(params))
    assert code == 1 and [f["rule"] for f in report["findings"] if f["severity"] == "deny"] == ["capacity"]
    (change / "trainer.yaml").write_text(CHANGE % 2)
    code, report = check(kubeconfig, change)
    assert (code, report["findings"]) == (0, [])


def test_live_objects_satisfy_class_before_template(gpu_sim: tuple[SimCluster, Path], tmp_path: Path) -> None:
    # The class is not in the change, only in the cluster: offline this is a denial, with --cluster it passes.
    _, kubeconfig = gpu_sim
    (tmp_path / "trainer.yaml").write_text(CHANGE % 1)
    offline = CliRunner().invoke(cli, ["check", str(tmp_path), "-o", "json", "-q"])
    assert offline.exit_code == 1
    assert "class-before-template" in {f["rule"] for f in json.loads(offline.stdout)["findings"]}
    code, report = check(kubeconfig, tmp_path)
    assert (code, report["findings"]) == (0, [])


def test_versions_the_cluster_does_not_serve_are_denied(tmp_path: Path) -> None:
    with SimCluster(served_versions=("v1beta1",)) as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "class.yaml").write_text(
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu.example.com}\n"
        )
        code, report = check(kubeconfig, tmp_path / "m")
    assert code == 1
    [finding] = [f for f in report["findings"] if f["rule"] == "served-versions"]
    assert finding["severity"] == "deny" and "v1" in finding["msg"]


def test_facts_read_served_versions_and_live_objects(gpu_sim: tuple[SimCluster, Path]) -> None:
    sim, _ = gpu_sim
    with ClusterClient.for_url(sim.url) as client:
        client.request_log = []
        facts = collect_facts(client)
    assert facts.served["resource.k8s.io"] == ["v1"] and facts.served[""] == ["v1"]
    assert facts.kinds["resource.k8s.io"]["DeviceClass"] == ["v1"] and facts.unavailable == []
    kinds = {m.kind for m in facts.objects}
    assert {"Namespace", "Node", "DeviceClass", "ResourceSlice"} <= kinds
    assert all(method == "GET" for method, _, _ in client.request_log)
    assert all("managedFields" not in m.body["metadata"] for m in facts.objects)


def test_cluster_without_dra_is_explained() -> None:
    with (
        SimCluster(served_versions=()) as sim,
        ClusterClient.for_url(sim.url) as client,
        pytest.raises(EnvironmentProblem) as error,
    ):
        collect_facts(client)
    assert "does not serve the Dynamic Resource Allocation API" in str(error.value)


IDLE_CANARY = """\
apiVersion: v1
kind: Namespace
metadata:
  name: gpu-system
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: plugin-canary
  namespace: gpu-system
  labels: {app.kubernetes.io/component: kubelet-plugin}
  annotations:
    dra-gitops.io/driver: gpu.example.com
    dra-gitops.io/canary-for: plugin
spec:
  selector:
    matchLabels: {app: plugin-canary}
  template:
    metadata:
      labels: {app: plugin-canary, app.kubernetes.io/component: kubelet-plugin}
    spec:
      nodeSelector: {dra-gitops.io/canary: "true"}
      containers:
      - name: plugin
        image: driver:v1
"""


def test_unchanged_canary_on_no_node_warns_in_check_and_inventory(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    """The canary is live and unchanged, but no node is labelled for it: warnings, not failures."""
    sim, kubeconfig = gpu_sim
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "canary.yaml").write_text(IDLE_CANARY)
    with ClusterClient.for_url(sim.url) as client:
        for body in yaml.safe_load_all(IDLE_CANARY):
            client.apply(body)
        daemonsets = client.find_kind("apps", "DaemonSet")
        assert daemonsets is not None

        def observed() -> bool:
            live = client.get(daemonsets, "gpu-system", "plugin-canary") or {}
            return (live.get("status") or {}).get("observedGeneration") == 1

        wait_for(observed, what="the DaemonSet controller to observe the canary")

    code, report = check(kubeconfig, repo)
    nowhere = [
        f for f in report["findings"] if f["rule"] == "driver-canary" and "runs on no node" in f["msg"]
    ]
    assert code == 0 and len(nowhere) == 1, report["findings"]
    assert nowhere[0]["severity"] == "warn" and nowhere[0]["ref"] == "DaemonSet/gpu-system/plugin-canary"
    assert "kubectl label node <node> dra-gitops.io/canary=true" in nowhere[0]["msg"]

    for output in ("json", "text"):
        result = CliRunner().invoke(cli, ["inventory", "--kubeconfig", str(kubeconfig), "-o", output])
        assert result.exit_code == 0, result.output
        warnings = (
            json.loads(result.stdout)["warnings"]
            if output == "json"
            else [line for line in result.stdout.splitlines() if line.startswith("  ! ")]
        )
        idle = [w for w in warnings if "plugin-canary" in w and "runs on no node" in w]
        assert len(idle) == 1, warnings
        assert "nodeSelector dra-gitops.io/canary=true matches no node" in idle[0]
        assert "kubectl label node <node> dra-gitops.io/canary=true" in idle[0]


def test_verbose_check_prints_the_predicted_placement(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = gpu_sim
    (tmp_path / "trainer.yaml").write_text(CHANGE % 3)
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "--kubeconfig", str(kubeconfig), "-v"])
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()
    start = lines.index("capacity (predicted placement):")
    assert lines[start + 1 : start + 6] == [
        "  1 of 3 pods stay Pending",
        "  pod ml/trainer-0: fits on sim-node-0",
        "  pod ml/trainer-1: fits on sim-node-0",
        "  pod ml/trainer-2: does-not-fit",
        "    sim-node-0: claim gpu: needs 1, 0 of 2 matching devices free (2 held by pods placed before it)",
    ]
    assert "  claim ml/trainer-0-gpu: fits on sim-node-0 [gpu.example.com/sim-node-0/gpu-0]" in lines
    assert "  placements explored: 1 exact; 0 pods needed a search" in lines
    assert any(
        line.startswith("  note: pods are placed one at a time in the scheduler's order") for line in lines
    )


DRIVER_DAEMONSET = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: plugin
  namespace: gpu-system
  annotations: {dra-gitops.io/driver: %s}
spec:
  selector: {matchLabels: {app: plugin}}
  template:
    metadata: {labels: {app: plugin}}
    spec:
      containers: [{name: plugin, image: "plugin:1"}]
"""


@pytest.mark.parametrize(
    ("driver", "outcome"),
    [
        # The repository holds the driver's workload, but the driver already publishes: judged on its devices.
        ("gpu.example.com", "does-not-fit"),
        # Another driver the change installs does not make these pods unknown.
        ("other.example.com", "does-not-fit"),
    ],
)
def test_a_driver_in_the_repository_that_already_publishes_is_judged_on_its_devices(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path, driver: str, outcome: str
) -> None:
    _, kubeconfig = gpu_sim
    change = tmp_path / "change"
    change.mkdir()
    (change / "trainer.yaml").write_text(CHANGE % 3)
    (change / "driver.yaml").write_text(DRIVER_DAEMONSET % driver)
    code, report = check(kubeconfig, change)
    pods = {p["pod"]: p["outcome"] for p in report["capacity"]["pods"]}
    assert pods["ml/trainer-2"] == outcome, report["capacity"]
    assert [f["rule"] for f in report["findings"] if f["rule"] == "capacity"] == ["capacity"]


def test_pods_of_a_driver_the_change_installs_are_unknown(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    _, kubeconfig = gpu_sim
    change = tmp_path / "change"
    change.mkdir()
    other_class = {**CLASS, "metadata": {"name": "nic.example.com"}}
    other_class["spec"] = {"selectors": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]}
    (change / "class.yaml").write_text(yaml.safe_dump(other_class))
    (change / "trainer.yaml").write_text(
        (CHANGE % 1).replace("deviceClassName: gpu.example.com", "deviceClassName: nic.example.com")
    )
    (change / "driver.yaml").write_text(DRIVER_DAEMONSET % "nic.example.com")
    code, report = check(kubeconfig, change)
    (pod,) = report["capacity"]["pods"]
    assert pod["outcome"] == "unknown" and "nic.example.com is installed by this change" in pod["unknown"]
    assert [f for f in report["findings"] if f["rule"] == "capacity"] == []


UNNAMED_PLUGIN = """apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nic-plugin, namespace: gpu-system}
spec:
  selector: {matchLabels: {app: nic-plugin}}
  template:
    metadata: {labels: {app: nic-plugin}}
    spec:
      containers: [{name: plugin, image: "nic-plugin:1"}]
      volumes: [{name: registration, hostPath: {path: /var/lib/kubelet/plugins_registry}}]
"""


def test_pods_of_a_driver_known_only_from_its_device_class_are_unknown(
    gpu_sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    # The plugin carries no driver name (no label, flag or env): only the DeviceClass the change adds says it.
    _, kubeconfig = gpu_sim
    change = tmp_path / "change"
    change.mkdir()
    other_class = {**CLASS, "metadata": {"name": "nic.example.com"}}
    other_class["spec"] = {"selectors": [{"cel": {"expression": 'device.driver == "nic.example.com"'}}]}
    (change / "class.yaml").write_text(yaml.safe_dump(other_class))
    (change / "trainer.yaml").write_text(
        (CHANGE % 1).replace("deviceClassName: gpu.example.com", "deviceClassName: nic.example.com")
    )
    (change / "driver.yaml").write_text(UNNAMED_PLUGIN)
    code, report = check(kubeconfig, change)
    (pod,) = report["capacity"]["pods"]
    assert pod["outcome"] == "unknown" and "nic.example.com is installed by this change" in pod["unknown"], (
        pod
    )
    assert "add nodes" not in pod.get("reason", "")


def test_live_priority_classes_order_the_prediction(gpu_sim: tuple[SimCluster, Path], tmp_path: Path) -> None:
    """Only the cluster knows class `urgent`: its pod is placed first and a lower one is the one left out."""
    sim, kubeconfig = gpu_sim
    with ClusterClient.for_url(sim.url) as client:
        client.apply(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "urgent"},
                "value": 100000,
            }
        )
    change = tmp_path / "change"
    change.mkdir()
    (change / "trainer.yaml").write_text(CHANGE % 2)
    urgent = (CHANGE % 1).split("---\n", 1)[1]
    urgent = urgent.replace("name: trainer", "name: urgent").replace("app: trainer", "app: urgent")
    urgent = urgent.replace("      resourceClaims:", "      priorityClassName: urgent\n      resourceClaims:")
    (change / "urgent.yaml").write_text(urgent)
    _, report = check(kubeconfig, change)
    pods = {p["pod"]: p["outcome"] for p in report["capacity"]["pods"]}
    assert pods == {"ml/urgent-0": "fits", "ml/trainer-0": "fits", "ml/trainer-1": "does-not-fit"}, pods
