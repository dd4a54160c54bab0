"""`dra-gitops check --repo --base --head` on real Git repositories made in a temp dir (no mocks)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli

DRIVER = """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {name}
  namespace: gpu-system
  labels: {{app.kubernetes.io/component: kubelet-plugin}}
  annotations:
    dra-gitops.io/driver: gpu.example.com
{extra_annotations}spec:
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
{node_selector}      containers:
      - name: plugin
        image: registry.example.com/gpu-driver:{version}
        args: ["--driver-name=gpu.example.com"]
"""

BASE_FILES = {
    "00-ns.yaml": """apiVersion: v1
kind: Namespace
metadata: {name: gpu-system}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
""",
    "20-class.yaml": """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: gpu.example.com}
spec:
  selectors:
  - cel: {expression: 'device.driver == "gpu.example.com"'}
""",
    "30-template.yaml": """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly: {deviceClassName: gpu.example.com}
""",
    "40-app.yaml": """apiVersion: apps/v1
kind: Deployment
metadata: {name: trainer, namespace: ml}
spec:
  selector: {matchLabels: {app: trainer}}
  template:
    metadata: {labels: {app: trainer}}
    spec:
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: one-gpu
      containers:
      - name: main
        image: trainer:1
        resources: {claims: [{name: gpu}]}
""",
}


def driver(version: str) -> str:
    return DRIVER.format(name="gpu-plugin", version=version, extra_annotations="", node_selector="")


def canary(version: str) -> str:
    return DRIVER.format(
        name="gpu-plugin-canary",
        version=version,
        extra_annotations="    dra-gitops.io/canary-for: gpu-plugin\n",
        node_selector="      nodeSelector: {dra-gitops.io/canary: 'true'}\n",
    )


class Repo:
    def __init__(self, path: Path) -> None:
        self.path = path
        path.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        self.git("config", "user.email", "ci@example.com")
        self.git("config", "user.name", "CI")

    def git(self, *args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=self.path, check=True, capture_output=True, text=True
        ).stdout.strip()

    def commit(self, message: str, files: dict[str, str | None]) -> str:
        for name, text in files.items():
            target = self.path / "manifests" / name
            if text is None:
                target.unlink()
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path) -> Repo:
    return Repo(tmp_path / "repo")


def run_check(repo: Repo, base: str, head: str, *extra: str) -> tuple[int, dict]:
    result = CliRunner().invoke(
        cli,
        [
            "check",
            "--repo",
            str(repo.path),
            "--base",
            base,
            "--head",
            head,
            "--path",
            "manifests",
            "-o",
            "json",
            "-q",
        ]
        + list(extra),
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, json.loads(result.stdout)


def rules_of(report: dict) -> set[str]:
    return {f["rule"] for f in report["findings"] if f["severity"] == "deny" and f["waived"] is None}


def test_canary_then_promotion_pass_and_direct_driver_change_is_denied(repo: Repo) -> None:
    base = repo.commit("base", {**BASE_FILES, "10-driver.yaml": driver("v1"), "11-canary.yaml": canary("v1")})
    canary_commit = repo.commit("canary v2", {"11-canary.yaml": canary("v2")})
    promotion = repo.commit("promote v2", {"10-driver.yaml": driver("v2")})

    code, report = run_check(repo, base, canary_commit)
    assert (code, rules_of(report)) == (0, set())
    assert report["summary"]["changes"] == {"create": 0, "update": 1, "delete": 0}

    code, report = run_check(repo, canary_commit, promotion)
    assert (code, rules_of(report)) == (0, set())

    repo.git("checkout", "-q", "-b", "direct", base)
    direct = repo.commit("driver v2 without canary", {"10-driver.yaml": driver("v2")})
    code, report = run_check(repo, base, direct)
    assert code == 1
    assert rules_of(report) == {"driver-canary"}
    [finding] = [f for f in report["findings"] if f["rule"] == "driver-canary" and f["severity"] == "deny"]
    assert finding["ref"] == "DaemonSet/gpu-system/gpu-plugin"
    assert finding["path"] == "manifests/10-driver.yaml" and finding["line"] == 1


def test_deleting_a_class_still_used_by_a_template_is_denied(repo: Repo) -> None:
    base = repo.commit("base", dict(BASE_FILES))
    head = repo.commit("drop class", {"20-class.yaml": None})
    code, report = run_check(repo, base, head)
    assert code == 1
    assert "no-delete-in-use" in rules_of(report)
    refs = {f["ref"] for f in report["findings"] if f["rule"] == "no-delete-in-use"}
    assert refs == {"DeviceClass/gpu.example.com"}


def test_only_what_changed_is_reported(repo: Repo) -> None:
    broken_pod = """apiVersion: v1
kind: Pod
metadata: {name: old-broken, namespace: ml}
spec:
  resourceClaims:
  - name: gpu
    resourceClaimTemplateName: one-gpu
  containers:
  - name: main
    image: x
    resources: {claims: [{name: not-declared}]}
"""
    base = repo.commit("base with a pre-existing problem", {**BASE_FILES, "50-pod.yaml": broken_pod})
    head = repo.commit(
        "unrelated change", {"40-app.yaml": BASE_FILES["40-app.yaml"].replace("trainer:1", "trainer:2")}
    )
    code, report = run_check(repo, base, head)
    assert code == 0, report
    assert report["findings"] == []
    assert report["summary"]["changes"] == {"create": 0, "update": 1, "delete": 0}

    # The same tree checked as a whole (no base) does report the old problem.
    result = CliRunner().invoke(cli, ["check", str(repo.path / "manifests"), "-o", "json", "-q"])
    assert result.exit_code == 1
    assert "claim-refs" in rules_of(json.loads(result.stdout))


def test_unknown_revision_is_a_clear_error(repo: Repo) -> None:
    repo.commit("base", dict(BASE_FILES))
    result = CliRunner().invoke(cli, ["check", "--repo", str(repo.path), "--base", "nope", "--head", "HEAD"])
    assert result.exit_code == 1
    assert "unknown revision 'nope'" in result.stderr
    assert "Traceback" not in result.output


def test_symlink_leaving_the_repository_is_refused(repo: Repo) -> None:
    base = repo.commit("base", dict(BASE_FILES))
    (repo.path / "manifests" / "escape.yaml").symlink_to("/etc/passwd")
    head = repo.commit("add a symlink out of the tree", {})
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(repo.path), "--base", base, "--head", head, "--path", "manifests"]
    )
    assert result.exit_code == 1
    assert "manifests/escape.yaml: symlink points outside the repository" in result.stderr


def test_symlink_inside_the_repository_is_followed(repo: Repo) -> None:
    base = repo.commit("base", dict(BASE_FILES))
    (repo.path / "shared").mkdir()
    (repo.path / "shared" / "extra-ns.yaml").write_text(
        "apiVersion: v1\nkind: Namespace\nmetadata: {name: extra}\n"
    )
    (repo.path / "manifests" / "extra.yaml").symlink_to("../shared/extra-ns.yaml")
    head = repo.commit("link a shared manifest", {})
    code, report = run_check(repo, base, head)
    assert code == 0
    assert report["summary"]["changes"] == {"create": 1, "update": 0, "delete": 0}


def test_repository_config_selects_paths_and_params(repo: Repo) -> None:
    config = (
        "apiVersion: v1\nkind: List\nitems: []\nconfig:\n  paths: [app]\n"
        "  params: {deprecated_versions_warn: true}\n"
    )
    broken = "apiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {name: t, namespace: ml}\nspec:\n  spec:\n    devices:\n      requests:\n      - name: g\n        exactly: {deviceClassName: nope}\n"
    base = repo.commit("base", {"dra-gitops.yaml": config, "app/ns.yaml": BASE_FILES["00-ns.yaml"]})
    head = repo.commit("outside the configured paths", {"scratch/broken.yaml": broken})
    code, report = run_check(repo, base, head)
    assert (code, report["findings"]) == (0, [])  # scratch/ is not a manifest path of this repository
    head2 = repo.commit("inside", {"app/broken.yaml": broken})
    code, report = run_check(repo, head, head2)
    assert code == 1 and "class-before-template" in rules_of(report)
