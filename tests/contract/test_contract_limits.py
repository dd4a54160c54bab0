"""Contract: the size limits and the workload selector checks of a real kube-apiserver (default flags).

What every release from 1.27 on answers, in the parts that do not change between releases: a request body
over `--max-request-body-bytes` (3 MiB) is 413 `RequestEntityTooLarge`; ConfigMap data over 1 MiB is a 422
whose cause is `Too long` on the field `[]` (the detail's wording changed in 1.32: "must have at most" then
"may not be more than"); an apps/v1 Deployment whose selector does not match its template's labels, or
is empty, is a 422 naming the field; its selector is immutable.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import DynamicApiError

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning:kubernetes")

MIB = 1024 * 1024


def refused(call: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(DynamicApiError) as exc:
        call(**kwargs)
    return exc.value.status, json.loads(exc.value.body)


def configmap(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": {"x": "y" * size}}


def deployment(selector: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 0,
            "selector": selector,
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]},
            },
        },
    }


def test_request_body_over_3_mib_is_413(dyn: DynamicClient, ns: str) -> None:
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    status, body = refused(cms.create, body=configmap("huge", 3 * MIB + 1), namespace=ns)
    assert status == 413
    assert body["reason"] == "RequestEntityTooLarge"
    assert body["message"] == "Request entity too large: limit is 3145728"
    assert cms.get(namespace=ns, field_selector="metadata.name=huge").items == []


def test_configmap_data_over_1_mib_is_invalid(dyn: DynamicClient, ns: str) -> None:
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body=configmap("at-limit", MIB), namespace=ns)
    status, body = refused(cms.create, body=configmap("over", MIB + 1), namespace=ns)
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"].startswith('ConfigMap "over" is invalid: []: Too long: ')
    [cause] = body["details"]["causes"]
    assert cause["reason"] == "FieldValueTooLong" and cause["field"] == "[]"
    assert "1048576 bytes" in cause["message"]


def test_deployment_selector_must_match_template_labels(dyn: DynamicClient, ns: str) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    status, body = refused(
        deployments.create, body=deployment({"matchLabels": {"app": "web"}}, {"app": "api"}), namespace=ns
    )
    assert status == 422
    assert body["reason"] == "Invalid"
    assert body["message"] == (
        'Deployment.apps "web" is invalid: spec.template.metadata.labels: Invalid value: '
        'map[string]string{"app":"api"}: `selector` does not match template `labels`'
    )
    assert [c["field"] for c in body["details"]["causes"]] == ["spec.template.metadata.labels"]


def test_deployment_empty_selector_is_invalid(dyn: DynamicClient, ns: str) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    status, body = refused(deployments.create, body=deployment({}, {"app": "web"}), namespace=ns)
    assert status == 422
    causes = body["details"]["causes"]
    assert causes[0]["field"] == "spec.selector"
    assert causes[0]["message"].endswith(": empty selector is invalid for deployment")


def test_deployment_selector_is_immutable(dyn: DynamicClient, ns: str) -> None:
    deployments = dyn.resources.get(api_version="apps/v1", kind="Deployment")
    deployments.create(
        body=deployment({"matchLabels": {"app": "web"}}, {"app": "web", "tier": "a"}), namespace=ns
    )
    status, body = refused(
        deployments.patch,
        name="web",
        namespace=ns,
        body={"spec": {"selector": {"matchLabels": {"app": "web", "tier": "a"}}}},
        content_type="application/merge-patch+json",
    )
    assert status == 422
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": 'Invalid value: v1.LabelSelector{MatchLabels:map[string]string{"app":"web", "tier":"a"}, '
            "MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
            "field": "spec.selector",
        }
    ]
    assert deployments.get(name="web", namespace=ns).spec.selector.matchLabels.to_dict() == {"app": "web"}
