"""Driver workloads recognized with what the rest of the desired state says (`dra.hints_of`): the driver a
DeviceClass uses named by a container, a workload declared in `drivers:`, `allowNoNodes` by driver."""

from __future__ import annotations

from typing import Any

from reconciler.model import dra
from reconciler.model.loader import load_blobs
from reconciler.model.repoconfig import DriverDecl, allowing_no_nodes, declared_workloads

CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: fpga.example.com}
spec:
  selectors: [{cel: {expression: "device.driver == 'fpga.example.com'"}}]
"""


def deployment(env_value: str, kind: str = "Deployment") -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": kind,
        "metadata": {"name": "fpga-controller", "namespace": "fpga"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "c", "image": "x", "env": [{"name": "D", "value": env_value}]}]
                }
            }
        },
    }


def test_a_container_naming_a_device_class_driver_is_a_driver_only_with_the_hints() -> None:
    body = deployment("fpga.example.com")
    assert not dra.is_driver_workload(body)
    hints = dra.hints_of(load_blobs([("class.yaml", CLASS.encode())]).manifests)
    assert hints.known_drivers == frozenset({"fpga.example.com"})
    with dra.driver_hints(hints):
        assert dra.recognized_by(body) == (
            "container c names driver fpga.example.com, used by a DeviceClass or ResourceSlice"
        )
        assert dra.workload_driver(body) == "fpga.example.com"
        assert dra.driver_role(body) == "controller"
        assert not dra.is_driver_workload(deployment("other.example.com"))
    assert not dra.is_driver_workload(body)  # outside the block: as before


def test_declared_drivers_and_allow_no_nodes() -> None:
    drivers = (
        DriverDecl("fpga.example.com", (("Deployment", "fpga", "fpga-controller"),), allow_no_nodes=True),
    )
    body = deployment("nothing")
    with dra.driver_hints(dra.hints_of([], declared_workloads(drivers), allowing_no_nodes(drivers))):
        assert dra.recognized_by(body) == "declared in `drivers` of dra-gitops.yaml (driver fpga.example.com)"
        assert dra.workload_driver(body) == "fpga.example.com"
        assert dra.allows_no_nodes(body) == "allowNoNodes of driver fpga.example.com in dra-gitops.yaml"
    assert dra.allows_no_nodes(body) is None


def test_a_kubelet_plugin_mounting_the_plugin_directory_is_a_driver_without_hints() -> None:
    body = deployment("x", kind="DaemonSet")
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": "p", "hostPath": {"path": "/var/lib/kubelet/plugins/"}}
    ]
    assert dra.recognized_by(body) == "mounts the kubelet plugin directory /var/lib/kubelet/plugins"
    assert dra.driver_role(body) == "kubelet-plugin"


def test_allow_no_nodes_never_covers_a_canary() -> None:
    canary = deployment("x", kind="DaemonSet")
    canary["spec"]["template"]["spec"]["volumes"] = [
        {"name": "p", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}}
    ]
    canary["metadata"]["annotations"] = {
        "dra-gitops.io/canary-for": "plugin",
        "dra-gitops.io/allow-no-nodes": "true",
    }
    assert dra.is_driver_workload(canary) and dra.allows_no_nodes(canary) is None
    del canary["metadata"]["annotations"]["dra-gitops.io/canary-for"]
    assert dra.allows_no_nodes(canary) == 'annotation dra-gitops.io/allow-no-nodes: "true"'


def test_a_workload_is_recognized_once_per_block_of_hints_and_afresh_in_another() -> None:
    """The answer is kept for the block's hints only: the same body under other hints is judged again."""
    from reconciler.model.dra import DriverHints, driver_hints, recognized_by

    body = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "ctrl", "namespace": "gpu"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "args": ["--driver=gpu.example.com"]}]}}},
    }
    with driver_hints(DriverHints()):
        assert recognized_by(body) is None
        assert recognized_by(body) is None
    with driver_hints(DriverHints(known_drivers=frozenset({"gpu.example.com"}))):
        assert (
            recognized_by(body)
            == "container c names driver gpu.example.com, used by a DeviceClass or ResourceSlice"
        )
        assert recognized_by(dict(body)) == recognized_by(body)  # an equal body of its own
    assert recognized_by(body) is None  # outside any block: no hints, nothing kept
