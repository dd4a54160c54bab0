"""`GET pods/NAME/log` on the simulated cluster: what the kubelet and the driver wrote, as diagnose reads it."""

from __future__ import annotations

from helpers import wait_for

from reconciler.cluster.client import ClusterClient, Invalid
from reconciler.cluster.diagnose import collect_snapshot
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

PLUGIN = {
    "apiVersion": "apps/v1",
    "kind": "DaemonSet",
    "metadata": {
        "name": "plugin",
        "namespace": "gpu-system",
        "annotations": {"dra-gitops.io/driver": "gpu.example.com"},
    },
    "spec": {
        "selector": {"matchLabels": {"app": "plugin"}},
        "template": {
            "metadata": {"labels": {"app": "plugin"}},
            "spec": {"containers": [{"name": "plugin", "image": "registry.example.com/drv:1"}]},
        },
    },
}


def test_driver_pod_logs_tell_registration_and_crash() -> None:
    with SimCluster() as sim:
        plane = install(sim, nodes=1, devices_per_node=2)
        try:
            with ClusterClient.for_url(sim.url) as client:
                client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-system"}})
                client.apply(PLUGIN)
                wait_for(lambda: client.list_kind("resource.k8s.io", "ResourceSlice"))
                [pod] = client.list_kind("", "Pod", "gpu-system")
                name = pod["metadata"]["name"]
                wait_for(lambda: "published ResourceSlice" in client.pod_logs("gpu-system", name))
                log = client.pod_logs("gpu-system", name)
                assert "started container plugin (image registry.example.com/drv:1)" in log
                assert log.count("started container") == 1
                assert "registered DRA plugin gpu.example.com" in log

                plane.crash_driver("gpu.example.com")
                wait_for(lambda: "simulated crash" in client.pod_logs("gpu-system", name, tail_lines=1))
                assert len(client.pod_logs("gpu-system", name, tail_lines=1).splitlines()) == 1
                # diagnose gathers the driver pods' last lines as evidence
                snapshot = collect_snapshot(client, namespace="gpu-system")
                assert "simulated crash" in snapshot.driver_logs[f"gpu-system/{name}"]

                try:
                    client.request(
                        "GET",
                        f"/api/v1/namespaces/gpu-system/pods/{name}/log",
                        query=[("container", "nope")],
                        raw=True,
                    )
                except Invalid as error:
                    assert "container nope is not valid" in str(error)
                else:
                    raise AssertionError("an unknown container must be refused")
        finally:
            plane.stop()
