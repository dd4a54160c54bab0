"""The harness itself, with the official client only: nodes, fake driver and fake kubelet make a DRA
workload run on a control plane that has none of them."""

from __future__ import annotations

import os

import pytest
from e2e_support import (
    DEVICES_PER_NODE,
    DRIVER,
    DRIVER_ANNOTATION,
    E2E_ENV,
    RESOURCE_API,
    SKIP_MESSAGE,
    E2ECluster,
    md,
    pod_ready,
    wait_for,
)

if not os.environ.get(E2E_ENV):
    pytest.skip(SKIP_MESSAGE, allow_module_level=True)


def test_claim_template_deployment_runs_on_the_fake_nodes(fresh_example: E2ECluster) -> None:
    e2e_cluster = fresh_example  # all devices free: nothing of the example (or an earlier test) holds one
    kube, run = e2e_cluster.kube, e2e_cluster.run_id
    ns, dclass = f"{run}-harness", f"{run}-gpu"

    def cleanup() -> None:
        kube.delete(f"/api/v1/namespaces/{ns}")
        kube.delete(f"{RESOURCE_API}/deviceclasses/{dclass}")
        wait_for(f"namespace {ns} to go", lambda: kube.get(f"/api/v1/namespaces/{ns}") is None, timeout=120)

    e2e_cluster.extra_cleanup.append(cleanup)
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_for(
        f"ServiceAccount {ns}/default",
        lambda: kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
        60,
    )
    kube.create(
        f"{RESOURCE_API}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": dclass},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        },
    )
    labels = {"app": "plugin"}
    kube.create(
        f"/apis/apps/v1/namespaces/{ns}/daemonsets",
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "plugin", "annotations": {DRIVER_ANNOTATION: DRIVER}},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {"containers": [{"name": "plugin", "image": "registry.example.com/plugin:1"}]},
                },
            },
        },
    )
    wait_for(
        "the fake driver to publish a slice on every node",
        lambda: e2e_cluster.driver.published() == set(e2e_cluster.nodes),
        timeout=60,
    )
    kube.create(
        f"{RESOURCE_API}/namespaces/{ns}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "one-gpu"},
            "spec": {
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": dclass}}]}}
            },
        },
    )
    app = {"app": "work"}
    replicas = 2
    kube.create(
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "work"},
            "spec": {
                "replicas": replicas,
                "selector": {"matchLabels": app},
                "template": {
                    "metadata": {"labels": app},
                    "spec": {
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                        "containers": [
                            {
                                "name": "work",
                                "image": "registry.example.com/work:1",
                                "resources": {"claims": [{"name": "gpu"}]},
                            }
                        ],
                    },
                },
            },
        },
    )

    def ready_pods() -> list[dict]:
        pods = kube.list(f"/api/v1/namespaces/{ns}/pods", labelSelector="app=work")
        ready = [p for p in pods if pod_ready(p)]
        return ready if len(ready) == replicas else []

    pods = wait_for(f"{replicas} Ready pods ({e2e_cluster.health()})", ready_pods, timeout=90)
    devices = set()
    for pod in pods:
        node = pod["spec"]["nodeName"]
        assert node in e2e_cluster.nodes
        (status,) = pod["status"]["resourceClaimStatuses"]
        claim = kube.get(f"{RESOURCE_API}/namespaces/{ns}/resourceclaims/{status['resourceClaimName']}")
        assert claim is not None
        allocation = claim["status"]["allocation"]
        (result,) = allocation["devices"]["results"]
        assert result["driver"] == DRIVER and result["pool"] == node
        assert int(result["device"].rsplit("-", 1)[1]) < DEVICES_PER_NODE
        assert [r["uid"] for r in claim["status"]["reservedFor"]] == [md(pod)["uid"]]
        devices.add((result["pool"], result["device"]))
    assert len(devices) == replicas, "two pods got the same device"
    deployment = wait_for(
        "the Deployment to report its replicas available",
        lambda: (
            (d := kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/work"))
            and (d.get("status") or {}).get("availableReplicas") == replicas
            and d
        ),
        timeout=60,
    )
    assert deployment["status"]["readyReplicas"] == replicas

    # deleting a pod: the kubelet ends the graceful deletion, the generated claim goes, a new pod starts
    victim = pods[0]
    kube.delete(f"/api/v1/namespaces/{ns}/pods/{md(victim)['name']}")
    wait_for(
        "the deleted pod to be gone and replaced",
        lambda: md(victim)["uid"] not in {md(p)["uid"] for p in ready_pods()} and ready_pods(),
        timeout=90,
    )
    cleanup()
    e2e_cluster.extra_cleanup.remove(cleanup)
    wait_for(
        "the driver to withdraw the slices of the deleted DaemonSet",
        lambda: not e2e_cluster.driver.published(),
        timeout=60,
    )


def test_crash_image_crash_loops_and_a_rollback_repairs_it(e2e_cluster: E2ECluster) -> None:
    kube, run, kubelet = e2e_cluster.kube, e2e_cluster.run_id, e2e_cluster.kubelet
    ns, crash = f"{run}-crash", f"crashloop-{run}"
    labels = {"app": "crashy-plugin"}

    def cleanup() -> None:
        kubelet.crash_images.discard(crash)
        kubelet.time_scale = 1.0
        kube.delete(f"/api/v1/namespaces/{ns}")
        wait_for(f"namespace {ns} to go", lambda: kube.get(f"/api/v1/namespaces/{ns}") is None, timeout=120)

    e2e_cluster.extra_cleanup.append(cleanup)
    kubelet.crash_images.add(crash)
    kubelet.time_scale = 0.05  # back-off 0.5 s, 1 s, 2 s ... instead of 10 s, 20 s, 40 s
    kube.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    wait_for(
        f"ServiceAccount {ns}/default",
        lambda: kube.get(f"/api/v1/namespaces/{ns}/serviceaccounts/default"),
        60,
    )
    path = f"/apis/apps/v1/namespaces/{ns}/daemonsets"
    kube.create(
        path,
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "plugin", "annotations": {DRIVER_ANNOTATION: DRIVER}},
            "spec": {
                "selector": {"matchLabels": labels},
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "containers": [{"name": "plugin", "image": f"registry.example.com/plugin:{crash}"}]
                    },
                },
            },
        },
    )

    def crash_looping() -> list[dict]:
        pods = kube.list(f"/api/v1/namespaces/{ns}/pods")
        looping = [
            p
            for p in pods
            if any(
                (s.get("state") or {}).get("waiting", {}).get("reason") == "CrashLoopBackOff"
                and s.get("restartCount", 0) >= 2
                for s in (p.get("status") or {}).get("containerStatuses") or []
            )
        ]
        return looping if len(looping) == len(e2e_cluster.nodes) else []

    pods = wait_for(f"every plugin pod crash-looping ({e2e_cluster.health()})", crash_looping, timeout=90)
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert status["lastState"]["terminated"]["exitCode"] == 1
        assert not pod_ready(pod)
    events = kube.list(f"/api/v1/namespaces/{ns}/events")
    assert any(e["reason"] == "BackOff" and e["type"] == "Warning" for e in events)
    assert e2e_cluster.driver.published() == set()  # a crash-looping plugin publishes nothing

    # back to a good image: the controller replaces the crash-looping pods, the driver publishes
    kube.merge_patch(
        f"{path}/plugin",
        {
            "spec": {
                "template": {
                    "spec": {"containers": [{"name": "plugin", "image": "registry.example.com/plugin:1"}]}
                }
            }
        },
    )

    def repaired() -> list[dict]:
        pods = kube.list(f"/api/v1/namespaces/{ns}/pods")
        good = [p for p in pods if pod_ready(p) and crash not in p["spec"]["containers"][0]["image"]]
        return good if len(good) == len(pods) == len(e2e_cluster.nodes) else []

    repaired_pods = wait_for(f"the DaemonSet repaired ({e2e_cluster.health()})", repaired, timeout=120)
    assert all(p["metadata"]["labels"].get("controller-revision-hash") for p in repaired_pods)
    wait_for(
        "slices published again",
        lambda: e2e_cluster.driver.published() == set(e2e_cluster.nodes),
        timeout=60,
    )
    cleanup()
    e2e_cluster.extra_cleanup.remove(cleanup)
