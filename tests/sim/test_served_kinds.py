"""Which kinds each group version of the simulated API server serves, as a kube-apiserver v1.36 does.

DeviceTaintRule is in resource.k8s.io v1beta2 and v1alpha3 but not in v1 (v1 gains it in 1.37);
ValidatingAdmissionPolicy and its binding are GA in admissionregistration.k8s.io/v1, cluster-scoped.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3

from reconciler.sim.server import SimCluster

ALL_DRA_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")

TAINT_RULE = {
    "kind": "DeviceTaintRule",
    "metadata": {"name": "maintenance"},
    "spec": {
        "deviceSelector": {"driver": "gpu.example.com", "pool": "node-1"},
        "taint": {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"},
    },
}

POLICY = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicy",
    "metadata": {"name": "claims-need-a-team"},
    "spec": {
        "matchConstraints": {
            "resourceRules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "apiVersions": ["*"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["resourceclaims"],
                }
            ]
        },
        "validations": [{"expression": "'team' in object.metadata.labels", "message": "claims need a team"}],
    },
}

BINDING = {
    "apiVersion": "admissionregistration.k8s.io/v1",
    "kind": "ValidatingAdmissionPolicyBinding",
    "metadata": {"name": "claims-need-a-team"},
    "spec": {"policyName": "claims-need-a-team", "validationActions": ["Deny"]},
}


def raw(cluster: SimCluster, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    http = urllib3.PoolManager()
    data = None if body is None else json.dumps(body)
    r = http.request(method, cluster.url + path, body=data, headers={"Content-Type": "application/json"})
    return r.status, json.loads(r.data.decode() or "null"), dict(r.headers)


def kinds_in(cluster: SimCluster, path: str) -> dict[str, dict[str, Any]]:
    status, listing, _ = raw(cluster, "GET", path)
    assert status == 200, listing
    return {r["kind"]: r for r in listing["resources"] if "/" not in r["name"]}


def test_device_taint_rule_is_served_in_v1beta2_and_v1alpha3_not_v1() -> None:
    with SimCluster(served_versions=ALL_DRA_VERSIONS) as cluster:
        assert "DeviceTaintRule" not in kinds_in(cluster, "/apis/resource.k8s.io/v1")
        assert "DeviceTaintRule" not in kinds_in(cluster, "/apis/resource.k8s.io/v1beta1")
        for version in ("v1beta2", "v1alpha3"):
            entry = kinds_in(cluster, f"/apis/resource.k8s.io/{version}")["DeviceTaintRule"]
            assert (entry["name"], entry["namespaced"]) == ("devicetaintrules", False)
        assert raw(cluster, "GET", "/apis/resource.k8s.io/v1/devicetaintrules")[0] == 404

        # One object, readable in both versions; v1beta2 DeviceTaintRule is not deprecated on 1.36.
        status, created, headers = raw(
            cluster,
            "POST",
            "/apis/resource.k8s.io/v1beta2/devicetaintrules",
            dict(TAINT_RULE, apiVersion="resource.k8s.io/v1beta2"),
        )
        assert status == 201, created
        assert created["apiVersion"] == "resource.k8s.io/v1beta2"
        assert "Warning" not in headers
        status, alpha, _ = raw(cluster, "GET", "/apis/resource.k8s.io/v1alpha3/devicetaintrules/maintenance")
        assert status == 200 and alpha["apiVersion"] == "resource.k8s.io/v1alpha3"
        assert alpha["spec"]["taint"] == TAINT_RULE["spec"]["taint"]


def test_default_flags_serve_no_device_taint_rule() -> None:
    with SimCluster() as cluster:
        assert "DeviceTaintRule" not in kinds_in(cluster, "/apis/resource.k8s.io/v1")


def test_validating_admission_policy_and_binding_are_served_cluster_scoped() -> None:
    with SimCluster() as cluster:
        status, group, _ = raw(cluster, "GET", "/apis/admissionregistration.k8s.io")
        assert status == 200 and [v["version"] for v in group["versions"]] == ["v1"]
        kinds = kinds_in(cluster, "/apis/admissionregistration.k8s.io/v1")
        assert kinds["ValidatingAdmissionPolicy"]["name"] == "validatingadmissionpolicies"
        assert kinds["ValidatingAdmissionPolicyBinding"]["name"] == "validatingadmissionpolicybindings"
        assert not any(k["namespaced"] for k in kinds.values())
        status, listing, _ = raw(cluster, "GET", "/apis/admissionregistration.k8s.io/v1")
        assert "validatingadmissionpolicies/status" in {r["name"] for r in listing["resources"]}
        assert raw(cluster, "GET", "/apis/admissionregistration.k8s.io/v1beta1")[0] == 404

        status, policy, _ = raw(
            cluster, "POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", POLICY
        )
        assert status == 201, policy
        # The defaults a real server writes.
        assert policy["spec"]["failurePolicy"] == "Fail"
        constraints = policy["spec"]["matchConstraints"]
        assert constraints["matchPolicy"] == "Equivalent"
        assert constraints["namespaceSelector"] == {} and constraints["objectSelector"] == {}
        assert constraints["resourceRules"][0]["scope"] == "*"
        status, binding, _ = raw(
            cluster,
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            BINDING,
        )
        assert status == 201, binding


def test_validating_admission_policy_validation_messages() -> None:
    with SimCluster() as cluster:
        bad = {**POLICY, "spec": {"failurePolicy": "Sometimes"}}
        status, body, _ = raw(
            cluster, "POST", "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", bad
        )
        assert status == 422
        fields = {c["field"]: c["message"] for c in body["details"]["causes"]}
        assert (
            fields["spec.failurePolicy"]
            == 'Unsupported value: "Sometimes": supported values: "Fail", "Ignore"'
        )
        assert fields["spec.matchConstraints"] == "Required value"
        assert fields["spec.validations"] == (
            "Required value: validations or auditAnnotations must contain at least one item"
        )
        assert body["message"].startswith(
            'ValidatingAdmissionPolicy.admissionregistration.k8s.io "claims-need-a-team" is invalid: ['
        )
        bad_binding = {**BINDING, "spec": {"validationActions": ["Block"]}}
        status, body, _ = raw(
            cluster,
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings",
            bad_binding,
        )
        assert status == 422
        fields = {c["field"]: c["message"] for c in body["details"]["causes"]}
        assert fields["spec.policyName"] == "Required value"
        assert fields["spec.validationActions[0]"] == (
            'Unsupported value: "Block": supported values: "Audit", "Deny", "Warn"'
        )
        # Unknown fields are refused with strict field validation, as by a real server.
        typo = {**BINDING, "spec": {**BINDING["spec"], "policy": "x"}}
        status, body, _ = raw(
            cluster,
            "POST",
            "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings?fieldValidation=Strict",
            typo,
        )
        assert status == 400 and 'unknown field "spec.policy"' in body["message"]
