"""`check --cluster` counts the change's own DeviceTaintRules, added, changed and removed, as the scheduler
will see them once the change is applied."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import yaml
from test_apply_command import copy_example, run

from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

RULE = """\
apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: gpu-maintenance}
spec:
  deviceSelector: {driver: gpu.example.com}
  taint: {key: example.com/maintenance, value: "true", effect: NoSchedule}
"""


def _capacity(repo: Path, kubeconfig: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = run("check", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json", *args)
    report = json.loads(result.stdout)
    return result.exit_code, [f for f in report["findings"] if f["rule"] == "capacity"]


def test_a_taint_rule_in_the_change_turns_fits_into_does_not_fit(tmp_path: Path) -> None:
    with SimCluster(served_versions=("v1", "v1beta2")) as cluster:
        plane = install(
            cluster, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        try:
            kubeconfig = cluster.write_kubeconfig(tmp_path / "kubeconfig")
            repo = copy_example(tmp_path)
            applied = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
            assert applied.exit_code == 0, applied.output
            # One device is free: a third trainer fits.
            trainer = repo / "40-workloads" / "trainer.yaml"
            trainer.write_text(trainer.read_text().replace("replicas: 2", "replicas: 3"))
            assert _capacity(repo, kubeconfig) == (0, [])
            # The same change with a rule tainting every gpu.example.com device: it does not.
            (repo / "20-classes" / "maintenance.yaml").write_text(RULE)
            code, [finding] = _capacity(repo, kubeconfig)
            assert finding["severity"] == "warn" and finding["ref"] == "Deployment/ml-team/trainer"
            assert "0 of 2 matching devices free (1 allocated, 1 tainted)" in finding["msg"]
            assert (
                "DeviceTaintRule/gpu-maintenance: example.com/maintenance=true:NoSchedule" in finding["msg"]
            )
            # Live and left alone by the change, it still counts.
            with ClusterClient.for_url(cluster.url) as client:
                client.apply(yaml.safe_load(RULE))
            (repo / "20-classes" / "maintenance.yaml").unlink()
            assert len(_capacity(repo, kubeconfig)[1]) == 1
            # Live and removed by the change (a pull request deleting it): the third trainer fits again.
            git = _commit_two_revisions(tmp_path / "git", repo)
            result = run(
                "check",
                "--repo",
                str(git),
                "--base",
                "HEAD~1",
                "--head",
                "HEAD",
                "--kubeconfig",
                str(kubeconfig),
                "-q",
                "-o",
                "json",
            )
            findings = json.loads(result.stdout)["findings"]
            assert [f for f in findings if f["rule"] == "capacity"] == []
        finally:
            plane.stop()


def _commit_two_revisions(git: Path, repo: Path) -> Path:
    """A repository whose base has the trainer at 3 replicas and the rule, and whose head drops the rule."""
    shutil.copytree(repo, git)
    (git / "20-classes" / "maintenance.yaml").write_text(RULE)
    commands = [
        ["git", "init", "-q", "-b", "main"],
        ["git", "add", "-A"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "base"],
        ["git", "rm", "-q", "20-classes/maintenance.yaml"],
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "head"],
    ]
    for command in commands:
        subprocess.run(command, cwd=git, check=True)
    return git
