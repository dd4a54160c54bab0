"""A live workload, defaulted by the server, compares with its manifest (pure)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from reconciler.model.compare import covers
from reconciler.model.dra import driver_template_digest
from reconciler.model.server_defaults import without_container_defaults, without_volume_defaults
from reconciler.sim.podspec_defaults import default_pod_spec

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"


def canary() -> dict[str, Any]:
    body = yaml.safe_load((EXAMPLE / "10-driver" / "kubelet-plugin-canary.yaml").read_text())
    assert isinstance(body, dict)
    return body


def as_live(body: dict[str, Any]) -> dict[str, Any]:
    """What kube-apiserver stores for it (the sim writes the same defaults)."""
    live = copy.deepcopy(body)
    default_pod_spec(live["spec"]["template"]["spec"], pod=False)
    return live


def test_the_example_canary_digests_the_same_live_and_as_written() -> None:
    body = canary()
    live = as_live(body)
    plugin = live["spec"]["template"]["spec"]["containers"][0]
    assert plugin["env"][0]["valueFrom"]["fieldRef"]["apiVersion"] == "v1"
    assert live["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["type"] == ""
    assert plugin["resources"] == {} and plugin["terminationMessagePath"] == "/dev/termination-log"
    assert driver_template_digest(live) == driver_template_digest(body)
    assert covers(live, body)


def test_a_real_change_still_changes_the_digest() -> None:
    body = canary()
    changed = copy.deepcopy(body)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = (
        "registry.example.com/gpu-example-driver:v0.4.0"
    )
    assert driver_template_digest(as_live(changed)) != driver_template_digest(body)
    mode = copy.deepcopy(body)
    mode["spec"]["template"]["spec"]["volumes"][0]["hostPath"]["type"] = "Directory"  # not the default
    assert driver_template_digest(mode) != driver_template_digest(body)


def test_container_defaults_are_dropped_and_explicit_values_kept() -> None:
    container = {
        "name": "c",
        "resources": {},
        "env": [
            {"name": "A", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "spec.nodeName"}}},
            {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu", "divisor": "0"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "x"}}},
        ],
        "securityContext": {"procMount": "Default"},
    }
    assert without_container_defaults(container) == {
        "name": "c",
        "env": [
            {"name": "A", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
            {"name": "B", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu"}}},
            {"name": "C", "valueFrom": {"fieldRef": {"apiVersion": "v2", "fieldPath": "x"}}},
        ],
    }
    assert container["resources"] == {}  # the input is left as it was
    kept = {"name": "c", "resources": {"limits": {"cpu": "1"}}, "securityContext": {"privileged": True}}
    assert without_container_defaults(kept) == kept


def test_volume_defaults_are_dropped() -> None:
    assert without_volume_defaults({"name": "h", "hostPath": {"path": "/x", "type": ""}}) == {
        "name": "h",
        "hostPath": {"path": "/x"},
    }
    assert without_volume_defaults({"name": "c", "configMap": {"name": "cfg", "defaultMode": 420}}) == {
        "name": "c",
        "configMap": {"name": "cfg"},
    }
    assert without_volume_defaults({"name": "s", "secret": {"secretName": "s", "defaultMode": 256}}) == {
        "name": "s",
        "secret": {"secretName": "s", "defaultMode": 256},
    }
    projected = {
        "name": "p",
        "projected": {
            "defaultMode": 420,
            "sources": [
                {
                    "downwardAPI": {
                        "items": [{"path": "n", "fieldRef": {"apiVersion": "v1", "fieldPath": "x"}}]
                    }
                }
            ],
        },
    }
    assert without_volume_defaults(projected) == {
        "name": "p",
        "projected": {
            "sources": [{"downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "x"}}]}}]
        },
    }
    assert without_volume_defaults("odd") == "odd"


def test_covers_sees_through_defaults_but_not_changes() -> None:
    assert covers({"a": 1, "b": 2}, {"a": 1})
    assert not covers({"a": 1}, {"a": 2})
    assert covers({"cpu": "4"}, {"cpu": 4})  # a quantity written as a number
    assert not covers({"cpu": "4000m"}, {"cpu": 4})  # not canonical: left to a dry-run
    assert not covers({"on": 1}, {"on": True})
    assert covers({}, {"labels": {}})
    assert not covers({"l": [1, 2]}, {"l": [1]})
