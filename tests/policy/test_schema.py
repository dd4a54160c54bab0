"""The `schema` rule: what kube-apiserver would reject, caught offline at `path:line` with the field path."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.model.loader import load_paths
from reconciler.model.openapi import MAX_VIOLATIONS, minor_of, releases, schemas_for
from reconciler.policy.schema import check_schemas

REPO = Path(__file__).resolve().parents[2]
DRA_EXAMPLES = REPO / "tests" / "data" / "dra-examples"

CLASS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com"
"""

# The v1beta1 → v1 migration mistake: `deviceClassName` left beside the request instead of under `exactly:`.
FLAT_V1_TEMPLATE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: one-gpu
  namespace: ml
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: gpu.example.com
"""

# `resourceClaims[].source` was removed in Kubernetes 1.31.
POD_WITH_SOURCE = """\
apiVersion: v1
kind: Pod
metadata:
  name: trainer
  namespace: ml
spec:
  resourceClaims:
  - name: gpu
    source:
      resourceClaimTemplateName: one-gpu
  containers:
  - name: main
    image: registry.example.com/trainer:1
    resources:
      claims:
      - name: gpu
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(textwrap.dedent(text))
    return root


def _check(root: Path, *args: str) -> tuple[int, dict]:
    result = CliRunner().invoke(cli, ["check", "-q", "-o", "json", *args, str(root)])
    return result.exit_code, json.loads(result.stdout)


def _schema_findings(doc: dict) -> list[dict]:
    return [f for f in doc["findings"] if f["rule"] == "schema"]


def test_a_v1_request_with_device_class_name_outside_exactly_is_denied_at_its_line(tmp_path: Path) -> None:
    _write(tmp_path, {"class.yaml": CLASS, "template.yaml": "# the template\n" + FLAT_V1_TEMPLATE})
    code, doc = _check(tmp_path)
    assert code == 1
    [finding] = _schema_findings(doc)
    assert finding["severity"] == "deny"
    assert finding["ref"] == "ResourceClaimTemplate/ml/one-gpu"
    assert finding["path"].endswith("/template.yaml") and finding["line"] == 2
    assert "spec.spec.devices.requests[0].deviceClassName: unknown field" in finding["msg"]
    assert doc["rules"]["schema"]["severity"] == "deny"


def test_a_pod_with_resource_claims_source_is_denied_from_1_31_and_passes_on_1_30(tmp_path: Path) -> None:
    _write(tmp_path, {"pod.yaml": POD_WITH_SOURCE})
    code, doc = _check(tmp_path, "--kubernetes-version", "1.31")
    assert code == 1
    [finding] = _schema_findings(doc)
    assert "spec.resourceClaims[0].source: unknown field (v1 Pod, Kubernetes 1.31)" in finding["msg"]
    assert finding["path"].endswith("/pod.yaml") and finding["line"] == 1
    code, doc = _check(tmp_path, "--kubernetes-version", "v1.30.4")
    assert _schema_findings(doc) == []


def test_the_repository_configs_kubernetes_version_is_the_release_judged(tmp_path: Path) -> None:
    config = 'paths: ["."]\nparams:\n  kubernetes_version: "1.30"\n'
    _write(tmp_path, {"dra-gitops.yaml": config, "pod.yaml": POD_WITH_SOURCE})
    code, doc = _check(tmp_path)
    assert _schema_findings(doc) == []
    config = 'paths: ["."]\nparams:\n  kubernetes_version: "1.34"\n'
    _write(tmp_path, {"dra-gitops.yaml": config})
    code, doc = _check(tmp_path)
    assert [f["ref"] for f in _schema_findings(doc)] == ["Pod/ml/trainer"]


def test_the_text_report_leads_with_path_line_and_the_field(tmp_path: Path) -> None:
    _write(tmp_path, {"pod.yaml": POD_WITH_SOURCE})
    result = CliRunner().invoke(cli, ["check", "-q", str(tmp_path)])
    assert result.exit_code == 1
    assert "pod.yaml:1  schema  Pod/ml/trainer: spec.resourceClaims[0].source: unknown field" in result.output


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("replicas", '"3"', 'spec.replicas: Invalid value: "string": must be integer'),
        (
            "revisionHistoryLimit",
            "true",
            'spec.revisionHistoryLimit: Invalid value: "boolean": must be integer',
        ),
        ("strategy", "{type: Recreate, rollingUpdat: {}}", "spec.strategy.rollingUpdat: unknown field"),
        ("selector", "null", "spec.selector: Required value"),
    ],
)
def test_types_enums_and_required_fields(tmp_path: Path, field: str, value: str, message: str) -> None:
    body = {
        "replicas": "1",
        "revisionHistoryLimit": "2",
        "strategy": "{type: Recreate}",
        "selector": "{matchLabels: {app: a}}",
    }
    body[field] = value
    spec = "\n".join(f"  {k}: {v}" for k, v in body.items())
    deployment = f"""\
apiVersion: apps/v1
kind: Deployment
metadata: {{name: a, namespace: ml}}
spec:
{spec}
  template:
    metadata: {{labels: {{app: a}}}}
    spec:
      containers:
      - name: main
        image: registry.example.com/a:1
        ports:
        - containerPort: 8080
          name: http
        resources:
          limits: {{cpu: 500m, memory: 1Gi, nvidia.com/gpu: 1}}
        livenessProbe: {{httpGet: {{port: http}}}}
"""
    _write(tmp_path, {"a.yaml": deployment})
    code, doc = _check(tmp_path)
    messages = [f["msg"] for f in _schema_findings(doc)]
    assert len(messages) == 1, messages
    assert message in messages[0]
    assert code == 1


def test_int_or_string_quantities_and_maps_are_accepted(tmp_path: Path) -> None:
    service = """\
apiVersion: v1
kind: Service
metadata: {name: s, namespace: ml, labels: {a: b}, annotations: {c: d}}
spec:
  selector: {app: a}
  ports:
  - {port: 80, targetPort: http}
  - {port: 81, targetPort: 8081}
"""
    _write(tmp_path, {"s.yaml": service})
    code, doc = _check(tmp_path)
    assert (code, _schema_findings(doc)) == (0, [])


def test_at_most_twenty_violations_an_object_then_a_count(tmp_path: Path) -> None:
    extra = "\n".join(f"extra{i}: x" for i in range(MAX_VIOLATIONS + 5))
    _write(
        tmp_path,
        {"cm.yaml": f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: c, namespace: ml}}\n{extra}\n"},
    )
    _, doc = _check(tmp_path)
    messages = [f["msg"] for f in _schema_findings(doc)]
    assert len(messages) == MAX_VIOLATIONS + 1
    assert sum("and 5 more" in m for m in messages) == 1


CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: computedomains.resource.example.com}
spec:
  group: resource.example.com
  scope: Namespaced
  names: {kind: ComputeDomain, plural: computedomains, singular: computedomain}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        required: [spec]
        properties:
          spec:
            type: object
            required: [numNodes]
            properties:
              numNodes: {type: integer, minimum: 0}
              mode: {type: string, enum: [Shared, Exclusive]}
              channel:
                type: object
                properties:
                  resourceClaimTemplate:
                    type: object
                    properties:
                      name: {type: string}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""


def _domain(spec: str) -> str:
    return f"apiVersion: resource.example.com/v1beta1\nkind: ComputeDomain\nmetadata: {{name: d, namespace: ml}}\n{spec}"


def test_a_custom_object_is_checked_against_its_crd_in_the_same_desired_state(tmp_path: Path) -> None:
    bad = "spec:\n  numNodes: -1\n  chanel: {}\n  mode: Open\n  extra: {anything: [1, 2]}\n"
    _write(tmp_path, {"crd.yaml": CRD, "domain.yaml": _domain(bad)})
    code, doc = _check(tmp_path)
    messages = sorted(f["msg"] for f in _schema_findings(doc))
    assert code == 1
    assert len(messages) == 3, messages
    assert "spec.chanel: unknown field" in messages[0]
    assert 'spec.mode: Unsupported value: "Open": supported values: "Shared", "Exclusive"' in messages[1]
    assert "spec.numNodes: Invalid value: -1: must be greater than or equal to 0" in messages[2]
    assert "its CRD in this change" in messages[0]
    good = "spec:\n  numNodes: 2\n  mode: Shared\n  channel: {resourceClaimTemplate: {name: t}}\n"
    _write(tmp_path, {"domain.yaml": _domain(good)})
    code, doc = _check(tmp_path)
    assert (code, _schema_findings(doc)) == (0, [])


def test_a_custom_object_whose_crd_is_elsewhere_is_skipped_with_a_notice(tmp_path: Path) -> None:
    _write(tmp_path, {"domain.yaml": _domain("spec:\n  anything: goes\n")})
    code, doc = _check(tmp_path)
    assert (code, _schema_findings(doc)) == (0, [])
    [notice] = doc["not_validated"]
    assert notice["ref"] == "ComputeDomain/ml/d"
    assert "CustomResourceDefinition is not in the desired state" in notice["reason"]
    result = CliRunner().invoke(cli, ["check", "-v", str(tmp_path)])
    assert "domain.yaml:1: ComputeDomain/ml/d not validated offline" in result.output


def test_against_a_base_only_the_change_is_validated(tmp_path: Path) -> None:
    head = load_paths([_write(tmp_path, {"pod.yaml": POD_WITH_SOURCE})])
    assert len(check_schemas(head.manifests, 36, None).findings) == 1
    assert check_schemas(head.manifests, 36, set()).findings == []
    assert len(check_schemas(head.manifests, 36, {"Pod/ml/trainer"}).findings) == 1


# The DRA reference's examples, each checked by kubernetes-validate --strict against these releases
# (tests/data/dra-examples/README.md): our schemas must agree, for every kind they cover.
VALID_ON = {
    "v1/01-deviceclasses.yaml": (34, 35, 36),
    "v1/02-claimtemplate-deployment.yaml": (34, 35, 36),
    "v1/03-shared-claim-prioritized.yaml": (34, 35, 36),
    "v1/04-nvidia-gpu.yaml": (34, 35, 36),
    "v1/06-admin-access.yaml": (34, 35, 36),
    "v1/07-resourceslice.yaml": (34, 35, 36),
    "v1/08-device-taint-rule.yaml": (33, 34, 35, 36),
    "v1beta2/claim.yaml": (33, 34),
    "v1beta1/claimtemplate-pod.yaml": (32, 33, 34, 35),
    "v1alpha3/claim-pod.yaml": (31, 32, 33),
    "v1alpha2/classic-dra.yaml": (27, 30),
    "v1alpha2/structured-1.30.yaml": (30,),
    "v1alpha1/classic-1.26.yaml": (26,),
    "driver/kubeletplugin-daemonset.yaml": (34,),
}
INVALID_ON = {"v1alpha2/classic-dra.yaml": 31, "v1alpha2/structured-1.30.yaml": 29}


@pytest.mark.parametrize("name", sorted(VALID_ON))
def test_the_dra_reference_examples_agree_with_kubernetes_validate(name: str) -> None:
    loaded = load_paths([DRA_EXAMPLES / name])
    for minor in VALID_ON[name]:
        found = check_schemas(loaded.manifests, minor, None)
        assert found.release == minor
        assert [f.msg for f in found.findings] == [], f"{name} on 1.{minor}"
    if name in INVALID_ON:
        found = check_schemas(loaded.manifests, INVALID_ON[name], None)
        assert found.findings or found.unvalidated, f"{name} on 1.{INVALID_ON[name]}"


def test_versions_are_clamped_to_the_bundled_releases() -> None:
    assert releases()[0] == 25 and releases()[-1] == 37
    assert schemas_for(20).release == 25
    assert schemas_for(40).release == 37
    assert schemas_for(None).release == 37
    assert [minor_of(v) for v in ("1.36", "v1.33.1-gke.100", "", None, "2.0")] == [36, 33, None, None, None]


def test_the_bundled_schemas_are_generated_from_kubernetes_validate() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO / "tools" / "openapi_schemas.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
