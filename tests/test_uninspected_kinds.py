"""Objects that embed pod specs the policies do not read (MPIJob, other custom resources): `check -v` says
so per object, `-o json` lists them, instead of passing them silently."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.model.dra_workloads import POD_TEMPLATE_KINDS, uninspected_pod_specs

# A worker pod claims from a template that exists nowhere: no policy sees it, so nothing is denied.
MPIJOB = """apiVersion: kubeflow.org/v2beta1
kind: MPIJob
metadata:
  name: train
  namespace: ml
spec:
  mpiReplicaSpecs:
    Launcher:
      replicas: 1
      template:
        spec:
          containers:
          - {name: launcher, image: mpi:1}
    Worker:
      replicas: 2
      template:
        spec:
          resourceClaims:
          - {name: gpu, resourceClaimTemplateName: missing}
          containers:
          - name: worker
            image: mpi:1
            resources: {claims: [{name: gpu}]}
"""
DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: ml}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: web:1}]
"""
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: ml}\ndata: {containers: '[]'}\n"
MPI_SPECS = ["spec.mpiReplicaSpecs.Launcher.template.spec", "spec.mpiReplicaSpecs.Worker.template.spec"]
MPI_LINE = (
    "dra-gitops: repo/jobs.yaml:3: MPIJob/ml/train not inspected: the policies do not read the pod specs of "
    f"kubeflow.org/v2beta1 MPIJob ({', '.join(MPI_SPECS)}), so their claims are not checked\n"
)


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "jobs.yaml").write_text("# training\n---\n" + MPIJOB)
    (tmp_path / "repo" / "web.yaml").write_text(DEPLOYMENT + "---\n" + CM)
    return tmp_path / "repo"


def test_verbose_names_each_uninspected_object(repo: Path) -> None:
    code, _, err = check("repo", "-v")
    assert code == 0
    assert [line for line in err.splitlines(keepends=True) if "not inspected" in line] == [MPI_LINE]
    _, _, quiet = check("repo")
    assert "not inspected" not in quiet


def test_json_lists_uninspected_objects(repo: Path) -> None:
    _, out, _ = check("repo", "-q", "-o", "json")
    assert json.loads(out)["not_inspected"] == [
        {
            "ref": "MPIJob/ml/train",
            "path": "repo/jobs.yaml",
            "line": 3,
            "apiVersion": "kubeflow.org/v2beta1",
            "kind": "MPIJob",
            "pod_specs": MPI_SPECS,
        }
    ]


def test_against_a_base_only_changed_objects_are_listed(repo: Path) -> None:
    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    git("init", "-q", "-b", "main")
    git("config", "user.email", "ci@example.com")
    git("config", "user.name", "CI")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    base = git("rev-parse", "HEAD")
    (repo / "web.yaml").write_text(DEPLOYMENT.replace("web:1", "web:2"))
    git("commit", "-q", "-am", "web 2")
    _, _, err = check("--repo", str(repo), "--base", base, "-v")
    assert "not inspected" not in err
    (repo / "jobs.yaml").write_text(MPIJOB.replace("replicas: 2", "replicas: 4"))
    git("commit", "-q", "-am", "more workers")
    _, _, err = check("--repo", str(repo), "--base", base, "-v")
    assert "jobs.yaml:1: MPIJob/ml/train not inspected" in err


def body(text: str) -> dict[str, Any]:
    loaded = yaml.safe_load(text)
    assert isinstance(loaded, dict)
    return loaded


@pytest.mark.parametrize(
    ("text", "specs"),
    [
        (MPIJOB, MPI_SPECS),
        (DEPLOYMENT, []),  # inspected
        (CM, []),
        (DEPLOYMENT.replace("apps/v1", "example.com/v1"), ["spec.template.spec"]),  # a CRD named Deployment
        (
            DEPLOYMENT.replace("Deployment", "ReplicationController").replace("apps/v1", "v1"),
            ["spec.template.spec"],
        ),
        (
            "apiVersion: x.io/v1\nkind: Runner\nmetadata:\n  name: r\n  annotations: {containers: []}\n"
            "spec:\n  pods:\n  - containers: [{name: a}]\nstatus:\n  last: {containers: []}\n",
            ["spec.pods[0]"],  # metadata and status are not the desired pods
        ),
        ("apiVersion: x.io/v1\nkind: Plain\nmetadata: {name: p}\nspec: {size: 3}\n", []),
        (
            "apiVersion: jobset.x-k8s.io/v1alpha2\nkind: JobSet\nmetadata: {name: j}\nspec:\n  replicatedJobs:\n"
            "  - name: w\n    template: {spec: {template: {spec: {containers: [{name: a}]}}}}\n",
            ["spec.replicatedJobs[0].template.spec.template.spec"],  # x-k8s.io: SIG projects' CRDs
        ),
        # Kubernetes' own groups other than apps and batch hold no pod templates: not searched.
        (
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: g}\nspec: {containers: []}\n",
            [],
        ),
    ],
)
def test_uninspected_pod_specs(text: str, specs: list[str]) -> None:
    assert uninspected_pod_specs(body(text)) == specs


def test_every_inspected_kind_is_passed_over() -> None:
    for kind, path in POD_TEMPLATE_KINDS.items():
        version = {"Job": "batch/v1", "CronJob": "batch/v1", "Pod": "v1", "PodTemplate": "v1"}.get(
            kind, "apps/v1"
        )
        obj: dict[str, Any] = {"apiVersion": version, "kind": kind, "metadata": {"name": "x"}}
        node = obj
        for key in path:
            node = node.setdefault(key, {})
        node["containers"] = [{"name": "c"}]
        assert uninspected_pod_specs(obj) == [], kind
