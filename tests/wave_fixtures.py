"""A driver's kubelet-plugin DaemonSet as waves deliver it (`updateStrategy: OnDelete`), for the tests and the
benchmark of driver upgrades in waves: one image per revision, recognised as the driver's by its annotation."""

from __future__ import annotations

from typing import Any


def plugin_daemonset(
    image: str, namespace: str, name: str = "gpu-plugin", driver: str = "gpu.example.com"
) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": namespace, "annotations": {"dra-gitops.io/driver": driver}},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "updateStrategy": {"type": "OnDelete"},
            "template": {
                "metadata": {"labels": {"app": name, "app.kubernetes.io/component": "kubelet-plugin"}},
                "spec": {"containers": [{"name": "plugin", "image": image}]},
            },
        },
    }
