"""`dra-gitops check` without a cluster: API versions judged by kind against a release's table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from reconciler.cli import cli

TAINT_RULE = """apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: gpu-maintenance}
spec:
  taint: {key: example.com/maintenance, effect: NoSchedule}
"""


def check(directory: Path) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["check", str(directory), "-o", "json", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)["findings"]


def test_v1beta2_device_taint_rule_on_1_36_is_not_told_to_use_v1(tmp_path: Path) -> None:
    (tmp_path / "rule.yaml").write_text(TAINT_RULE)
    code, findings = check(tmp_path)
    [finding] = findings
    assert (code, finding["rule"], finding["severity"]) == (0, "served-versions", "warn")
    assert "Kubernetes 1.36 serves only when enabled" in finding["msg"]
    assert "no version of DeviceTaintRule is served by default on 1.36" in finding["msg"]
    assert "use v1" not in finding["msg"] and "use resource.k8s.io/v1" not in finding["msg"]


def test_the_release_is_a_param_of_the_repository(tmp_path: Path) -> None:
    (tmp_path / "rule.yaml").write_text(TAINT_RULE.replace("v1beta2", "v1"))
    (tmp_path / "dra-gitops.yaml").write_text('params:\n  kubernetes_version: "1.37"\n')
    assert check(tmp_path) == (0, [])
    (tmp_path / "dra-gitops.yaml").write_text('params:\n  kubernetes_version: "1.36"\n')
    code, [finding] = check(tmp_path)
    assert (
        "which Kubernetes 1.36 does not have for DeviceTaintRule (resource.k8s.io/v1: 1.37)" in finding["msg"]
    )


def test_a_release_written_as_a_number_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rule.yaml").write_text(TAINT_RULE)
    (tmp_path / "dra-gitops.yaml").write_text("params:\n  kubernetes_version: 1.30\n")
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "-q"])
    assert result.exit_code == 1
    assert "params.kubernetes_version: 1.3 is not a Kubernetes release" in result.stderr
