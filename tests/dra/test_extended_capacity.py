"""Extended resources backed by DRA are placed as the scheduler allocates them: one claim for the pod of
that many devices of the class (`deviceclass.resource.kubernetes.io/<class>`, or a class's
`extendedResourceName`)."""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.dra.capacity import capacity_input
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.plan import compute_plan

LIVE = """\
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {conditions: [{type: Ready, status: "True"}]}
---
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  extendedResourceName: example.com/gpu
  selectors: [{cel: {expression: 'device.driver == "gpu.example.com"'}}]
---
apiVersion: resource.k8s.io/v1
kind: ResourceSlice
metadata: {name: n1-gpu}
spec:
  driver: gpu.example.com
  nodeName: n1
  pool: {name: n1, generation: 1, resourceSliceCount: 1}
  devices: [{name: gpu-0}, {name: gpu-1}]
"""


def _pod(name: str, resource: str, count: int) -> str:
    return f"""\
apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: ml}}
spec:
  containers:
  - name: main
    image: registry.example.com/trainer:1
    resources: {{limits: {{{resource}: {count}}}}}
"""


def _manifests(text: str) -> list[Manifest]:
    return [Manifest(body=b, ref=ref_of(b), path="x.yaml", line=1) for b in yaml.safe_load_all(text)]


def _outcomes(*pods: str) -> dict[str, Any]:
    head = _manifests("---\n".join(pods))
    capacity = capacity_input(compute_plan([], head), head, _manifests(LIVE))
    return {p["pod"]: (p["outcome"], p["claims"]) for p in capacity["pods"]}


def test_the_implicit_class_resource_gets_its_devices() -> None:
    outcomes = _outcomes(_pod("two", "deviceclass.resource.kubernetes.io/gpu.example.com", 2))
    assert outcomes == {"ml/two": ("fits", ["extended-resources"])}


def test_more_than_the_node_has_does_not_fit() -> None:
    outcomes = _outcomes(_pod("three", "deviceclass.resource.kubernetes.io/gpu.example.com", 3))
    assert outcomes["ml/three"][0] == "does-not-fit"


def test_a_class_extended_resource_name_counts_against_the_same_devices() -> None:
    outcomes = _outcomes(_pod("a", "example.com/gpu", 1), _pod("b", "example.com/gpu", 2))
    assert outcomes["ml/a"][0] == "fits"
    assert outcomes["ml/b"][0] == "does-not-fit"


def test_an_extended_resource_no_class_maps_is_a_device_plugins() -> None:
    outcomes = _outcomes(_pod("plugin", "vendor.example.com/fpga", 1))
    assert "ml/plugin" not in outcomes  # no device of ours: judged against node allocatable, not here
