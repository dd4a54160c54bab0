"""`check --cluster` judges every object by kind and version, as the simulated 1.36 server's discovery lists them.

What `check --cluster` passes, `apply` must not then refuse for a version the cluster does not serve:
DeviceTaintRule is not in resource.k8s.io/v1 on 1.36, PodGroup is alpha, ValidatingAdmissionPolicy is
GA only in admissionregistration.k8s.io/v1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.sim.server import SimCluster

ALL_DRA_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")

TAINT_RULE = """apiVersion: resource.k8s.io/%s
kind: DeviceTaintRule
metadata: {name: gpu-maintenance}
spec:
  deviceSelector: {driver: gpu.example.com}
  taint: {key: example.com/maintenance, value: "true", effect: NoSchedule}
"""
POD_GROUP = """apiVersion: scheduling.k8s.io/v1alpha2
kind: PodGroup
metadata: {name: trainers, namespace: default}
spec: {}
"""
POLICY = """apiVersion: admissionregistration.k8s.io/%s
kind: ValidatingAdmissionPolicy
metadata: {name: claims-need-a-team}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [resource.k8s.io]
      apiVersions: ["*"]
      operations: [CREATE, UPDATE]
      resources: [resourceclaims]
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: claims need a team label
---
apiVersion: admissionregistration.k8s.io/%s
kind: ValidatingAdmissionPolicyBinding
metadata: {name: claims-need-a-team}
spec:
  policyName: claims-need-a-team
  validationActions: [Deny]
"""
CRD_AND_WIDGET = """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: default}
"""


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def check(sim: SimCluster, tmp_path: Path, text: str) -> tuple[int, list[dict[str, Any]]]:
    directory = tmp_path / "m"
    directory.mkdir(exist_ok=True)
    (directory / "objects.yaml").write_text(text)
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    result = run("check", str(directory), "--kubeconfig", str(kubeconfig), "-o", "json", "-q")
    return result.exit_code, json.loads(result.stdout)["findings"]


def denial(findings: list[dict[str, Any]], ref: str) -> str:
    [found] = [f for f in findings if f["rule"] == "served-versions" and f["ref"] == ref]
    assert found["severity"] == "deny" and found["line"] >= 1, found
    return str(found["msg"])


def test_v1_device_taint_rule_is_denied_naming_the_versions_that_serve_it(tmp_path: Path) -> None:
    with SimCluster(served_versions=ALL_DRA_VERSIONS) as sim:
        code, findings = check(sim, tmp_path, TAINT_RULE % "v1")
        assert code == 1
        assert denial(findings, "DeviceTaintRule/gpu-maintenance") == (
            "DeviceTaintRule/gpu-maintenance uses resource.k8s.io/v1, which the cluster (v1.36.2) does not "
            "serve for DeviceTaintRule; use resource.k8s.io/v1beta2 for DeviceTaintRule "
            "(served: resource.k8s.io/v1beta2, resource.k8s.io/v1alpha3)"
        )
        # The version it names passes, and applies.
        code, findings = check(sim, tmp_path, TAINT_RULE % "v1beta2")
        assert (code, findings) == (0, [])
        kubeconfig = tmp_path / "kubeconfig"
        applied = run("apply", str(tmp_path / "m"), "--kubeconfig", str(kubeconfig), "-q")
        assert applied.exit_code == 0, applied.output


def test_default_flags_serve_no_device_taint_rule(tmp_path: Path) -> None:
    with SimCluster() as sim:
        code, findings = check(sim, tmp_path, TAINT_RULE % "v1")
    assert code == 1
    message = denial(findings, "DeviceTaintRule/gpu-maintenance")
    assert message.endswith("no version the cluster serves has DeviceTaintRule (resource.k8s.io: v1)")
    assert "the cluster serves resource.k8s.io v1" not in message


def test_kinds_of_other_groups_the_cluster_does_not_serve_are_denied(tmp_path: Path) -> None:
    with SimCluster() as sim:
        code, findings = check(sim, tmp_path, POD_GROUP + "---\n" + POLICY % ("v1beta1", "v1beta1"))
    assert code == 1
    assert denial(findings, "PodGroup/default/trainers").endswith(
        "uses scheduling.k8s.io/v1alpha2, which the cluster (v1.36.2) does not serve for PodGroup; "
        "no version the cluster serves has PodGroup (scheduling.k8s.io: v1)"
    )
    assert denial(findings, "ValidatingAdmissionPolicy/claims-need-a-team").endswith(
        "use admissionregistration.k8s.io/v1 for ValidatingAdmissionPolicy (served: admissionregistration.k8s.io/v1)"
    )
    assert "use admissionregistration.k8s.io/v1 for ValidatingAdmissionPolicyBinding" in denial(
        findings, "ValidatingAdmissionPolicyBinding/claims-need-a-team"
    )


def test_admission_policy_v1_passes_and_applies(tmp_path: Path) -> None:
    with SimCluster() as sim:
        code, findings = check(sim, tmp_path, POLICY % ("v1", "v1"))
        assert (code, findings) == (0, [])
        kubeconfig = tmp_path / "kubeconfig"
        applied = run("apply", str(tmp_path / "m"), "--kubeconfig", str(kubeconfig), "-q")
        assert applied.exit_code == 0, applied.output
        with ClusterClient.for_url(sim.url) as client:
            [policy] = client.list_kind("admissionregistration.k8s.io", "ValidatingAdmissionPolicy")
            [binding] = client.list_kind("admissionregistration.k8s.io", "ValidatingAdmissionPolicyBinding")
    assert policy["spec"]["failurePolicy"] == "Fail"  # defaulted by the server
    assert binding["spec"]["policyName"] == "claims-need-a-team"


def test_a_kind_whose_crd_is_in_the_change_is_not_reported(tmp_path: Path) -> None:
    with SimCluster() as sim:
        code, findings = check(sim, tmp_path, CRD_AND_WIDGET)
        assert (code, findings) == (0, [])
        code, findings = check(sim, tmp_path, CRD_AND_WIDGET.replace("example.com/v1\n", "example.com/v2\n"))
    assert code == 1
    assert denial(findings, "Widget/default/w").endswith(
        "use example.com/v1 for Widget (served: example.com/v1)"
    )
