"""A canary whose only canary node is not Ready says so, instead of asking to label a canary node."""

from __future__ import annotations

from typing import Any

from reconciler.cluster.readiness import idle_canary_reason


def canary() -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": "plugin-canary",
            "namespace": "gpu-system",
            "generation": 2,
            "annotations": {"dra-gitops.io/canary-for": "plugin", "dra-gitops.io/driver": "gpu.example.com"},
        },
        "spec": {"template": {"spec": {"nodeSelector": {"dra-gitops.io/canary": "true"}, "containers": []}}},
        "status": {"observedGeneration": 2, "desiredNumberScheduled": 0},
    }


def node(name: str, ready: str, labels: dict[str, str]) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "status": {"conditions": [{"type": "Ready", "status": ready}]},
    }


def test_the_not_ready_canary_node_is_named() -> None:
    nodes = [node("node-1", "True", {}), node("node-2", "False", {"dra-gitops.io/canary": "true"})]
    reason = idle_canary_reason(canary(), nodes) or ""
    assert "runs on no node: node-2 is not Ready (0 pods desired)" in reason
    assert reason.endswith("bring node-2 back (kubectl describe node node-2)")
    assert "label a canary node" not in reason


def test_no_canary_node_at_all_still_asks_for_a_label() -> None:
    reason = idle_canary_reason(canary(), [node("node-1", "True", {})]) or ""
    assert "label a canary node" in reason
