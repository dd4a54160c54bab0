"""YAML files that are no Kubernetes objects among the manifests: the error says how to `exclude` them,
and `exclude` leaves them out, from a directory and from Git trees alike."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.model.loader import is_excluded

CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n"
VALUES = "# chart values\nreplicaCount: 2\nimage:\n  tag: v1\n"
TREE = {"deploy/apps/a.yaml": CM, "deploy/helm/values.yaml": VALUES}
ADVICE = "if it is another tool's file, leave it out: add `helm/values.yaml` to `exclude` in "


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit(root: Path) -> str:
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "ci@example.com")
        git(root, "config", "user.name", "CI")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "change")
    return git(root, "rev-parse", "HEAD")


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", "-q", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_tree(tmp_path / "repo", TREE)


def git_args(repo: Path) -> list[str]:
    """`check --repo` of the deploy/ folder, its base an empty commit."""
    if not (repo / ".git").exists():
        base = commit(repo)  # everything at once: the base has the same files
        git(repo, "commit", "-q", "--allow-empty", "-m", "head")
    else:
        base = git(repo, "rev-parse", "HEAD")
        commit(repo)
    return ["--repo", str(repo), "--base", base, "--head", "HEAD", "--path", "deploy"]


def test_directory_error_names_the_file_and_the_exclude_to_add(repo: Path) -> None:
    code, out, err = check("repo/deploy")
    assert (code, out) == (1, "")
    assert err == (
        "error: repo/deploy/helm/values.yaml:2: not a Kubernetes object (no apiVersion, kind, metadata.name); "
        f"{ADVICE}repo/deploy/dra-gitops.yaml\n"
    )


def test_error_under_selected_paths_gives_the_pattern_from_the_root(repo: Path) -> None:
    write_tree(repo, {"deploy/dra-gitops.yaml": "paths: [helm, apps]\n"})
    _, _, err = check("repo/deploy")
    assert err.startswith("error: repo/deploy/helm/values.yaml:2: not a Kubernetes object"), err
    assert err.endswith(f"{ADVICE}repo/deploy/dra-gitops.yaml\n"), err


def test_git_error_names_the_file_and_the_exclude_to_add(repo: Path) -> None:
    code, out, err = check(*git_args(repo))
    assert (code, out) == (1, "")
    assert err == (
        "error: deploy/helm/values.yaml:2: not a Kubernetes object (no apiVersion, kind, metadata.name); "
        f"{ADVICE}deploy/dra-gitops.yaml\n"
    )


@pytest.mark.parametrize("source", ["disk", "git"])
def test_the_advised_exclude_leaves_the_file_out(repo: Path, source: str) -> None:
    # The repository config's own name, when it has one, is the one the advice names.
    write_tree(repo, {"deploy/.dra-gitops.yaml": "params: {}\n"})
    args = ["repo/deploy"] if source == "disk" else git_args(repo)
    _, _, err = check(*args)
    assert err.endswith(f"{ADVICE}{'repo/' if source == 'disk' else ''}deploy/.dra-gitops.yaml\n"), err
    write_tree(repo, {"deploy/.dra-gitops.yaml": "exclude: [helm/values.yaml]\n"})
    if source == "git":
        args = git_args(repo)
    code, out, err = check(*args)
    assert code == 0, err
    assert out.endswith("1 object, 1 file: 0 denied, 0 warnings, 0 waived (passed)\n"), out


@pytest.mark.parametrize(
    ("relative", "pattern", "excluded"),
    [
        ("helm/values.yaml", "helm/values.yaml", True),
        ("helm/values.yaml", "./helm/values.yaml", True),
        ("helm/values.yaml", "helm", True),
        ("helm/values.yaml", "helm/", True),
        ("helm/values.yaml", "*values.yaml", True),
        ("values.yaml", "**/values.yaml", True),  # as in .gitignore: at the root too
        ("a/b/values.yaml", "**/values.yaml", True),
        ("a/b/values.yaml", "*/values.yaml", True),  # `*` crosses `/`
        ("values.yaml", "*/values.yaml", False),
        ("helm/values.yaml", "values.yaml", False),  # patterns start at the root
        ("x[1].yaml", "x[[]1].yaml", True),
        ("x1.yaml", "x[[]1].yaml", False),
    ],
)
def test_exclude_patterns(relative: str, pattern: str, excluded: bool) -> None:
    assert is_excluded(relative, [pattern]) is excluded


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiversion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
            "key `apiversion` must be spelled `apiVersion`",
        ),
        ("apiVersion: v1\nKind: ConfigMap\nmetadata: {name: a}\n", "key `Kind` must be spelled `kind`"),
    ],
)
def test_a_mis_cased_key_is_named_by_check(repo: Path, text: str, message: str) -> None:
    write_tree(
        repo, {"deploy/helm/values.yaml": CM.replace("name: a", "name: b"), "deploy/apps/b.yaml": text}
    )
    code, out, err = check("repo/deploy")
    assert (code, out) == (1, "")
    assert err == f"error: repo/deploy/apps/b.yaml:1: {message} (Kubernetes keys are case-sensitive)\n"
