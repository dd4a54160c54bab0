"""`dra-gitops check PATH` end to end, in a real subprocess: exit codes, stdout formats, clear errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

TEMPLATE_MISSING_CLASS = {
    "v1alpha2": """apiVersion: resource.k8s.io/v1alpha2
kind: ResourceClaimTemplate
metadata: {name: tpl, namespace: ml}
spec:
  spec:
    resourceClassName: missing-class
""",
    "v1alpha3": """apiVersion: resource.k8s.io/v1alpha3
kind: ResourceClaimTemplate
metadata: {name: tpl, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: missing-class
""",
    "v1beta1": """apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaimTemplate
metadata: {name: tpl, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        deviceClassName: missing-class
""",
    "v1beta2": """apiVersion: resource.k8s.io/v1beta2
kind: ResourceClaimTemplate
metadata: {name: tpl, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: missing-class}
""",
    "v1": """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: tpl, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        firstAvailable:
        - {name: big, deviceClassName: missing-class}
""",
}

POD_WITH_UNMATCHED_CLAIM = """apiVersion: v1
kind: Namespace
metadata: {name: ml}
---
# a pod whose container names a claim the pod does not declare
apiVersion: v1
kind: Pod
metadata: {name: worker, namespace: ml}
spec:
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: tpl
  containers:
  - name: main
    image: busybox
    resources:
      claims:
      - name: gpus
"""


def dra_gitops(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        capture_output=True,
        text=True,
        cwd=cwd or REPO,
        timeout=120,
    )


def test_example_repository_passes() -> None:
    done = dra_gitops("check", "manifests-example/")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 denied" in done.stdout


@pytest.mark.parametrize("version", sorted(TEMPLATE_MISSING_CLASS))
def test_missing_class_and_unmatched_container_claim(tmp_path: Path, version: str) -> None:
    (tmp_path / "template.yaml").write_text(TEMPLATE_MISSING_CLASS[version])
    (tmp_path / "pod.yaml").write_text(POD_WITH_UNMATCHED_CLAIM)
    done = dra_gitops("check", str(tmp_path), "-o", "json", "-q")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    denied = {
        (f["rule"], f["path"].rsplit("/", 1)[-1], f["line"])
        for f in report["findings"]
        if f["severity"] == "deny"
    }
    assert ("class-before-template", "template.yaml", 1) in denied
    assert ("claim-refs", "pod.yaml", 6) in denied
    messages = " ".join(f["msg"] for f in report["findings"])
    assert "missing-class" in messages and "gpus" in messages
    # The pod claim `gpu` that no container uses is reported too (a warning: the devices would idle).
    warned = {(f["rule"], f["line"]) for f in report["findings"] if f["severity"] == "warn"}
    assert ("claim-refs", 6) in warned

    sarif = json.loads(dra_gitops("check", str(tmp_path), "-o", "sarif", "-q").stdout)
    assert sarif["version"] == "2.1.0"
    results = sarif["runs"][0]["results"]
    rule_ids = [rule["id"] for rule in sarif["runs"][0]["tool"]["driver"]["rules"]]
    assert {"class-before-template", "claim-refs"} <= {r["ruleId"] for r in results}
    for result in results:
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"].endswith((".yaml",))
        assert location["region"]["startLine"] >= 1
        assert rule_ids[result["ruleIndex"]] == result["ruleId"]


def _one_clear_error(done: subprocess.CompletedProcess[str], needle: str) -> str:
    assert done.returncode in (1, 4), (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr
    assert needle in lines[0], lines[0]
    return lines[0]


def test_broken_yaml_is_one_clear_error(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    (tmp_path / "broken.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: [x\n  data: 1\n"
    )
    line = _one_clear_error(dra_gitops("check", str(tmp_path)), "broken.yaml:")
    assert "invalid YAML" in line


def test_alias_bomb_is_refused(tmp_path: Path) -> None:
    levels = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for index, name in enumerate("bcdefghi"):
        previous = "abcdefghi"[index]
        levels.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
    (tmp_path / "bomb.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bomb}\ndata:\n"
        + "\n".join("  " + x for x in levels)
        + "\n"
    )
    line = _one_clear_error(dra_gitops("check", str(tmp_path)), "bomb.yaml:1")
    assert "alias" in line


def test_fifty_megabyte_document_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    with big.open("w") as handle:
        handle.write("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata:\n  blob: ")
        handle.write("x" * (50 * 1024 * 1024))
        handle.write("\n")
    line = _one_clear_error(dra_gitops("check", str(tmp_path)), "big.yaml:1")
    assert "limit" in line


def test_unreachable_cluster_is_an_environment_problem(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    done = dra_gitops("check", "manifests-example/", "--cluster", "--kubeconfig", str(missing))
    _one_clear_error(done, "cannot load cluster configuration")
    assert done.returncode == 4


def test_usage_errors_exit_2() -> None:
    assert dra_gitops("check").returncode == 2
    assert dra_gitops("check", "--repo", ".", "manifests-example").returncode == 2
