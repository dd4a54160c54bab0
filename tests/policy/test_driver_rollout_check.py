"""`driver-rollout` through the whole check (issue 32): the `rollout` of dra-gitops.yaml reaches the driver's
DaemonSet, and `drainDevices` is judged against what the cluster's discovery serves."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from reconciler.delivery.check import CheckOptions, run_check
from reconciler.errors import ManifestError
from reconciler.model.loader import load_paths
from reconciler.model.repoconfig import drivers_of
from reconciler.policy.inputdoc import ClusterFacts

PLUGIN = """\
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: gpu-kubelet-plugin
  namespace: gpu-driver
  labels: {app.kubernetes.io/component: kubelet-plugin}
  annotations: {dra-gitops.io/driver: gpu.example.com}
spec:
  selector: {matchLabels: {app: gpu-kubelet-plugin}}
  template:
    metadata: {labels: {app: gpu-kubelet-plugin}}
    spec:
      containers: [{name: plugin, image: registry.example.com/gpu-kubelet-plugin:2}]
"""

CONFIG = """\
drivers:
  - name: gpu.example.com
    rollout: {waves: ["1", "100%"], drainDevices: true}
"""


def cluster(taint_rules: bool) -> ClusterFacts:
    dra_kinds = {"DeviceClass": ["v1"], "ResourceSlice": ["v1"]}
    if taint_rules:
        dra_kinds["DeviceTaintRule"] = ["v1beta2"]
    return ClusterFacts(
        version="v1.36.2",
        served={"resource.k8s.io": ["v1", "v1beta2"] if taint_rules else ["v1"]},
        kinds={"apps": {"DaemonSet": ["v1"]}, "resource.k8s.io": dra_kinds},
    )


def findings(
    tmp_path: Path, plugin: str, config: str, facts: ClusterFacts | None
) -> list[tuple[str, str, str]]:
    (tmp_path / "plugin.yaml").write_text(plugin)
    head = load_paths([tmp_path / "plugin.yaml"], display_root=tmp_path)
    run = run_check(head, None, CheckOptions(), cluster=facts, drivers=drivers_of(yaml.safe_load(config)))
    return [(f.rule, f.ref, f"{f.path}:{f.line}") for f in run.result.findings if f.rule == "driver-rollout"]


def test_drain_devices_on_a_cluster_without_device_taint_rules_is_a_finding(tmp_path: Path) -> None:
    assert findings(tmp_path, PLUGIN, CONFIG, cluster(False)) == [
        ("driver-rollout", "DaemonSet/gpu-driver/gpu-kubelet-plugin", "plugin.yaml:1")
    ]
    assert findings(tmp_path, PLUGIN, CONFIG, cluster(True)) == []
    assert findings(tmp_path, PLUGIN, CONFIG, None) == []  # offline: not judged
    assert findings(tmp_path, PLUGIN, CONFIG.replace("true", "false"), cluster(False)) == []


def test_a_strategy_other_than_ondelete_is_a_finding_only_with_a_rollout(tmp_path: Path) -> None:
    rolling = PLUGIN.replace(
        "spec:\n  selector", "spec:\n  updateStrategy: {type: RollingUpdate}\n  selector"
    )
    ondelete = rolling.replace("RollingUpdate", "OnDelete")
    no_drain = CONFIG.replace("true", "false")
    assert [f[0] for f in findings(tmp_path, rolling, no_drain, cluster(True))] == ["driver-rollout"]
    assert findings(tmp_path, ondelete, no_drain, cluster(True)) == []
    assert findings(tmp_path, rolling, "drivers: [{name: gpu.example.com}]\n", cluster(True)) == []


def test_a_bad_annotation_stops_the_check_at_the_manifest(tmp_path: Path) -> None:
    bad = PLUGIN.replace(
        "annotations: {dra-gitops.io/driver: gpu.example.com}",
        'annotations: {dra-gitops.io/driver: gpu.example.com, dra-gitops.io/rollout: \'{waves: ["50%", "10%"]}\'}',
    )
    with pytest.raises(ManifestError, match=r"^plugin.yaml:1: `dra-gitops.io/rollout.waves\[1\]`"):
        findings(tmp_path, bad, "{}\n", None)


def test_a_live_daemonset_with_an_unreadable_annotation_does_not_stop_the_check(tmp_path: Path) -> None:
    live_dir = tmp_path / "live"
    live_dir.mkdir()
    (live_dir / "plugin.yaml").write_text(
        PLUGIN.replace("gpu.example.com}", "gpu.example.com, dra-gitops.io/rollout: 'waves: ['}")
    )
    facts = cluster(True)
    facts.objects = load_paths([live_dir], display_root=tmp_path).manifests
    (tmp_path / "head").mkdir()
    assert findings(tmp_path / "head", PLUGIN, CONFIG, facts) == []


def test_a_base_with_an_unreadable_annotation_does_not_stop_the_check_of_a_head_that_fixes_it(
    tmp_path: Path,
) -> None:
    base_dir, head_dir = tmp_path / "base", tmp_path / "head"
    base_dir.mkdir()
    head_dir.mkdir()
    (base_dir / "plugin.yaml").write_text(
        PLUGIN.replace("gpu.example.com}", "gpu.example.com, dra-gitops.io/rollout: 'waves: ['}")
    )
    (head_dir / "plugin.yaml").write_text(PLUGIN)
    base = load_paths([base_dir / "plugin.yaml"], display_root=base_dir)
    head = load_paths([head_dir / "plugin.yaml"], display_root=head_dir)
    run = run_check(head, base, CheckOptions(), drivers=drivers_of(yaml.safe_load(CONFIG)))
    assert [f.rule for f in run.result.findings if f.rule == "driver-rollout"] == []
