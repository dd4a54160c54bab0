"""Workload selectors are validated as kube-apiserver validates them (over HTTP, official client).

A Deployment, ReplicaSet, DaemonSet, StatefulSet (or a Job with manualSelector) whose selector does not
match its template's labels, or is empty or missing, is a 422 naming the field; on update the selector is
immutable, and a StatefulSet may change only some of its spec.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

from reconciler.sim.server import SimCluster

MISMATCH = "`selector` does not match template `labels`"


@pytest.fixture
def apps() -> Iterator[client.AppsV1Api]:
    with SimCluster() as cluster:
        cfg = client.Configuration(host=cluster.url)
        cfg.retries = 0
        api = client.ApiClient(cfg)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "w"}})
        yield client.AppsV1Api(api)
        api.close()


def workload(kind: str, selector: Any, labels: dict[str, str] | None) -> dict[str, Any]:
    template: dict[str, Any] = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    if labels is not None:
        template["metadata"] = {"labels": labels}
    spec: dict[str, Any] = {"template": template}
    if selector is not None:
        spec["selector"] = selector
    if kind == "StatefulSet":
        spec["serviceName"] = "web"
    return {"apiVersion": "apps/v1", "kind": kind, "metadata": {"name": "web"}, "spec": spec}


CREATE = {
    "Deployment": "create_namespaced_deployment",
    "ReplicaSet": "create_namespaced_replica_set",
    "DaemonSet": "create_namespaced_daemon_set",
    "StatefulSet": "create_namespaced_stateful_set",
}


def refused(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(ApiException) as exc:
        call(*args)
    assert exc.value.status == 422
    body: dict[str, Any] = json.loads(exc.value.body)
    assert body["reason"] == "Invalid"
    return body


@pytest.mark.parametrize("kind", list(CREATE))
def test_a_selector_that_does_not_match_the_template_labels_is_422(apps: client.AppsV1Api, kind: str) -> None:
    body = refused(
        getattr(apps, CREATE[kind]), "w", workload(kind, {"matchLabels": {"app": "web"}}, {"app": "api"})
    )
    assert body["message"] == (
        f'{kind}.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        f'map[string]string{{"app":"api"}}: {MISMATCH}'
    )
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": f'Invalid value: map[string]string{{"app":"api"}}: {MISMATCH}',
            "field": "spec.template.metadata.labels",
        }
    ]
    assert body["details"]["kind"] == kind and body["details"]["group"] == "apps"
    # matchExpressions count too
    ok = workload(
        kind,
        {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "api"]}]},
        {"app": "api"},
    )
    getattr(apps, CREATE[kind])("w", ok)


@pytest.mark.parametrize(
    ("kind", "word"),
    [
        ("Deployment", "deployment"),
        ("ReplicaSet", "deployment"),
        ("DaemonSet", "daemonset"),
        ("StatefulSet", "statefulset"),
    ],
)
def test_an_empty_selector_is_422(apps: client.AppsV1Api, kind: str, word: str) -> None:
    body = refused(getattr(apps, CREATE[kind]), "w", workload(kind, {}, {"app": "web"}))
    empty = "v1.LabelSelector{MatchLabels:map[string]string(nil), MatchExpressions:[]v1.LabelSelectorRequirement(nil)}"
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {empty}: empty selector is invalid for {word}",
        "field": "spec.selector",
    }


def test_a_missing_selector_is_required_and_matches_nothing(apps: client.AppsV1Api) -> None:
    # the typed client refuses a Deployment without a selector itself: send it as it is
    dyn = DynamicClient(apps.api_client)
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    with pytest.raises(DynamicApiError) as exc:
        deployments.create(body=workload("Deployment", None, None), namespace="w")
    assert exc.value.status == 422
    assert json.loads(exc.value.body)["message"] == (
        'Deployment.apps "web" is invalid: [spec.selector: Required value, spec.template.metadata.labels: '
        f"Invalid value: map[string]string(nil): {MISMATCH}]"
    )


def test_a_bad_selector_operator_is_422(apps: client.AppsV1Api) -> None:
    sel = {"matchExpressions": [{"key": "app", "operator": "Is", "values": ["web"]}]}
    body = refused(apps.create_namespaced_deployment, "w", workload("Deployment", sel, {"app": "web"}))
    fields = [(c["field"], c["message"].rsplit(": ", 1)[-1]) for c in body["details"]["causes"]]
    assert fields == [
        ("spec.selector.matchExpressions[0].operator", "not a valid selector operator"),
        ("spec.selector", "invalid label selector"),
    ]


@pytest.mark.parametrize("kind", ["Deployment", "ReplicaSet", "DaemonSet"])
def test_the_selector_is_immutable(apps: client.AppsV1Api, kind: str) -> None:
    getattr(apps, CREATE[kind])(
        "w", workload(kind, {"matchLabels": {"app": "web"}}, {"app": "web", "tier": "a"})
    )
    patch = getattr(apps, CREATE[kind].replace("create_", "patch_"))
    changed = {"spec": {"selector": {"matchLabels": {"app": "web", "tier": "a"}}}}
    body = refused(patch, "web", "w", changed)
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "tier":"a"}, '
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
            "field": "spec.selector",
        }
    ]
    # the same selector re-sent, with the template changed, is fine
    patch("web", "w", {"spec": {"template": {"metadata": {"labels": {"app": "web", "tier": "b"}}}}})


def test_a_statefulset_may_change_only_some_of_its_spec(apps: client.AppsV1Api) -> None:
    apps.create_namespaced_stateful_set(
        "w", workload("StatefulSet", {"matchLabels": {"app": "web"}}, {"app": "web"})
    )
    apps.patch_namespaced_stateful_set("web", "w", {"spec": {"replicas": 3, "minReadySeconds": 5}})
    body = refused(apps.patch_namespaced_stateful_set, "web", "w", {"spec": {"serviceName": "other"}})
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueForbidden",
            "message": "Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', "
            "'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are "
            "forbidden",
            "field": "spec",
        }
    ]


def test_a_job_with_a_manual_selector_must_match_its_template(apps: client.AppsV1Api) -> None:
    batch = client.BatchV1Api(apps.api_client)
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "once"},
        "spec": {
            "manualSelector": True,
            "selector": {"matchLabels": {"job": "once"}},
            "template": {
                "metadata": {"labels": {"job": "other"}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]},
            },
        },
    }
    body = refused(batch.create_namespaced_job, "w", job)
    assert body["details"]["causes"][0]["field"] == "spec.template.metadata.labels"
    job["spec"]["template"]["metadata"]["labels"] = {"job": "once"}
    batch.create_namespaced_job("w", job)
