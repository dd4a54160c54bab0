"""`check --cluster` judges a changed DeviceClass against who uses it (the `class-change` rule)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from test_apply_command import copy_example, run, sim  # noqa: F401  (fixture)

from reconciler.sim.server import SimCluster

SELECTOR = 'device.driver == "gpu.example.com"'


def _check_with(repo: Path, kubeconfig: Path, expression: str) -> tuple[int, list[dict[str, Any]]]:
    class_file = repo / "20-classes" / "gpu-class.yaml"
    class_file.write_text(class_file.read_text().replace(SELECTOR, expression))
    result = run("check", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    class_file.write_text(class_file.read_text().replace(expression, SELECTOR))
    return result.exit_code, [f for f in json.loads(result.stdout)["findings"] if f["rule"] == "class-change"]


def test_a_broken_selector_over_live_users_is_denied_and_a_good_one_passes(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    _, kubeconfig = sim
    repo = copy_example(tmp_path)
    applied = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
    assert applied.exit_code == 0, applied.output

    # A CEL key typo: a run-time error on all 4 devices, no device matches.
    typo = f'{SELECTOR} && device.attributes["gpu.example.com"].modle == "LATEST-GPU-MODEL"'
    code, [finding] = _check_with(repo, kubeconfig, typo)
    assert code == 1 and finding["severity"] == "deny"
    assert finding["ref"] == "DeviceClass/gpu.example.com"
    assert "fail at run time on 4 of 4 published devices" in finding["msg"]
    assert "Deployment/ml-team/notebook" in finding["msg"] and "Deployment/ml-team/trainer" in finding["msg"]
    assert "ResourceClaim/ml-team/shared-gpu" in finding["msg"]
    assert '"modle" in device.attributes["gpu.example.com"]' in finding["msg"]

    # A selector that now matches nothing.
    code, [finding] = _check_with(repo, kubeconfig, 'device.driver == "gpu.example.org"')
    assert code == 1 and finding["severity"] == "deny"
    assert "match none of the 4 published devices (4 before this change)" in finding["msg"]

    # Fewer matching devices than the users hold (3: two trainers and the shared claim): a warning.
    code, [finding] = _check_with(
        repo, kubeconfig, f'{SELECTOR} && device.attributes["gpu.example.com"].index == 0'
    )
    assert finding["severity"] == "warn"
    assert "match 2 published device(s) (4 before this change) but its claims hold 3" in finding["msg"]

    # A selector that still matches every device passes.
    code, findings = _check_with(
        repo, kubeconfig, f'{SELECTOR} && device.attributes["gpu.example.com"].index >= 0'
    )
    assert (code, findings) == (0, [])
