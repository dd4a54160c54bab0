"""The sim writes kube-apiserver's PodSpec defaults, in Pods and in workload templates, and server-side
apply keys a container port applied without a protocol as the defaulted live TCP port."""

from __future__ import annotations

from typing import Any

from reconciler.cluster.client import ClusterClient
from reconciler.sim.server import SimCluster

DEPLOYMENT: dict[str, Any] = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "web", "namespace": "default"},
    "spec": {
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx",
                        "ports": [{"containerPort": 80}],
                        "env": [{"name": "NODE", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                        "readinessProbe": {"httpGet": {"path": "/", "port": 80}},
                        "volumeMounts": [{"name": "cfg", "mountPath": "/etc/web"}],
                    }
                ],
                "volumes": [
                    {"name": "cfg", "configMap": {"name": "web"}},
                    {"name": "host", "hostPath": {"path": "/var/run"}},
                ],
            },
        },
    },
}


def test_template_defaults_are_written(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        live = client.apply(DEPLOYMENT)
    spec = live["spec"]["template"]["spec"]
    assert (spec["restartPolicy"], spec["dnsPolicy"], spec["schedulerName"]) == (
        "Always",
        "ClusterFirst",
        "default-scheduler",
    )
    assert spec["terminationGracePeriodSeconds"] == 30 and spec["securityContext"] == {}
    assert "enableServiceLinks" not in spec  # a Pod's default, not a template's
    web = spec["containers"][0]
    assert web["imagePullPolicy"] == "Always"  # untagged
    assert (web["terminationMessagePath"], web["terminationMessagePolicy"]) == (
        "/dev/termination-log",
        "File",
    )
    assert web["resources"] == {} and web["ports"] == [{"containerPort": 80, "protocol": "TCP"}]
    assert web["env"][0]["valueFrom"]["fieldRef"] == {"apiVersion": "v1", "fieldPath": "spec.nodeName"}
    assert web["readinessProbe"] == {
        "httpGet": {"path": "/", "port": 80, "scheme": "HTTP"},
        "timeoutSeconds": 1,
        "periodSeconds": 10,
        "successThreshold": 1,
        "failureThreshold": 3,
    }
    assert spec["volumes"] == [
        {"name": "cfg", "configMap": {"name": "web", "defaultMode": 420}},
        {"name": "host", "hostPath": {"path": "/var/run", "type": ""}},
    ]


def test_reapplying_a_port_without_protocol_is_a_no_op(sim_cluster: SimCluster) -> None:
    with ClusterClient.for_url(sim_cluster.url) as client:
        first = client.apply(DEPLOYMENT)
        again = client.apply(DEPLOYMENT)
        dry = client.apply(DEPLOYMENT, dry_run=True)
    assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
    assert dry["spec"]["template"]["spec"]["containers"][0]["ports"] == [
        {"containerPort": 80, "protocol": "TCP"}
    ]
    owned = [e for e in again["metadata"]["managedFields"] if e["manager"] == "dra-gitops"][0]
    ports = owned["fieldsV1"]["f:spec"]["f:template"]["f:spec"]["f:containers"]['k:{"name":"web"}']["f:ports"]
    assert list(ports) == ['k:{"containerPort":80,"protocol":"TCP"}']


def test_a_pod_gets_the_pod_defaults(sim_cluster: SimCluster) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]},
    }
    with ClusterClient.for_url(sim_cluster.url) as client:
        live = client.apply(pod)
    assert live["spec"]["enableServiceLinks"] is True
    assert live["spec"]["containers"][0]["imagePullPolicy"] == "IfNotPresent"
