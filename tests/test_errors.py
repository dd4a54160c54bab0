"""One error hierarchy: every exception class of the package derives from `DraGitopsError` and has the exit
code of its branch; the CLI exits with that code and prints one line; a translated error keeps its cause."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import kubernetes.client
import pytest
import urllib3
import yaml
from kubernetes.client.exceptions import ApiException

from reconciler.cluster.client import ClusterClient
from reconciler.errors import (
    DraGitopsError,
    EnvironmentProblem,
    ManifestError,
    TemporaryError,
    UserError,
)
from reconciler.model.yamldocs import parse_documents
from reconciler.sim.server import SimCluster
from reconciler.source.gitcmd import GitCredentials, GitFailed, GitRunner
from reconciler.source.remote import GitSource

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "reconciler"

# Control flow, not an error: `HookReply` ends a request to the controller's HTTP server with a status (a 200
# "ignored" as well as a 400); raised in loop/webhooks.py, caught in loop/httpserver.py, never further.
# `Stopped` ends a driver rollout in waves where it is (an abort, a Lease lost): raised and caught in
# cluster/waverollout.py, which turns it into the stage's failure.
CONTROL_FLOW = {"reconciler.loop.webhooks.HookReply", "reconciler.cluster.wavecontrol.Stopped"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _class_definitions(path: Path) -> list[tuple[str, bool]]:
    """(qualified name, defined inside a function) of every `class` statement in `path`."""
    found: list[tuple[str, bool]] = []

    def visit(node: ast.AST, trail: list[str], in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                found.append((".".join([*trail, child.name]), in_function))
                visit(child, [*trail, child.name], in_function)
            elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                visit(child, trail, True)
            else:
                visit(child, trail, in_function)

    visit(ast.parse(path.read_text(), str(path)), [], False)
    return found


def _exception_classes() -> dict[str, type[BaseException]]:
    """Every exception class defined anywhere in reconciler/, found from the source (nested ones too)."""
    found: dict[str, type[BaseException]] = {}
    unreachable = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module_name = _module_name(path)
        for qualname, in_function in _class_definitions(path):
            if in_function:  # the walk cannot check what only exists while a function runs
                unreachable.append(f"{module_name}.{qualname}")
                continue
            value: object = importlib.import_module(module_name)
            for part in qualname.split("."):
                value = getattr(value, part)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found[f"{module_name}.{qualname}"] = value
    assert unreachable == [], "define classes at module or class level, where this test sees them"
    return found


def test_every_exception_class_of_the_package_derives_from_the_hierarchy() -> None:
    classes = _exception_classes()
    assert len(classes) > 20  # the walk did reach the package's modules
    assert {"reconciler.sim.storebase.Gone", "reconciler.loop.store.state.StateConflict"} <= set(classes)
    outside = sorted(name for name, cls in classes.items() if not issubclass(cls, DraGitopsError))
    assert outside == sorted(CONTROL_FLOW)


def test_each_class_has_the_exit_code_of_its_branch() -> None:
    ours = {name: cls for name, cls in _exception_classes().items() if issubclass(cls, DraGitopsError)}
    codes = {name: cls.exit_code for name, cls in ours.items()}
    wrong = {
        name: code
        for name, code in codes.items()
        if code != (4 if issubclass(ours[name], EnvironmentProblem) else 1)
    }
    assert wrong == {}
    assert codes["reconciler.cluster.client.errors.Forbidden"] == 4  # ApiError first, EnvironmentProblem wins
    assert codes["reconciler.source.gitcmd.GitFailed"] == 4
    # the simulated cluster's answers are neither bad input nor our environment; a bad template file is input
    for name in ("sim.apibase.ApiError", "sim.storebase.StoreError", "sim.patch.PatchError"):
        assert ours[f"reconciler.{name}"].__bases__ == (DraGitopsError,), name
    assert issubclass(ours["reconciler.sim.devicetemplate.TemplateError"], UserError)


def _raises_in_handlers(path: Path) -> list[tuple[int, ast.Raise]]:
    """Every `raise NewError(...)` inside an `except` block of `path` (a bare re-raise excluded)."""
    found = []
    for handler in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(handler, ast.ExceptHandler):
            continue
        for node in ast.walk(handler):
            reraise = (
                isinstance(node, ast.Raise) and isinstance(node.exc, ast.Name) and node.exc.id == handler.name
            )
            if isinstance(node, ast.Raise) and node.exc is not None and not reraise:
                found.append((node.lineno, node))
    return found


def test_a_translated_error_names_its_cause_or_says_why_not() -> None:
    """`raise X from exc`; `from None` only with a comment saying why the cause is hidden."""
    unexplained = []
    for path in sorted(PACKAGE.rglob("*.py")):
        lines = path.read_text().splitlines()
        for lineno, node in _raises_in_handlers(path):
            hidden = isinstance(node.cause, ast.Constant) and node.cause.value is None
            text = "\n".join(lines[lineno - 2 : (node.end_lineno or lineno)])
            if node.cause is None or (hidden and "cause hidden" not in text):
                unexplained.append(f"{path.relative_to(REPO)}:{lineno}")
    assert unexplained == []


# -- causes kept ---------------------------------------------------------------------------------------------


def test_a_yaml_error_is_the_cause_of_the_manifest_error() -> None:
    with pytest.raises(ManifestError) as caught:
        parse_documents("kind: ConfigMap\nmetadata: {name: a\n", "bad.yaml")
    assert str(caught.value).startswith("bad.yaml:3:1: invalid YAML: ")
    assert isinstance(caught.value.__cause__, yaml.YAMLError)


def test_the_kubernetes_clients_api_exception_is_the_cause_of_the_temporary_error() -> None:
    """The client raises ApiException(status=0) for a TLS failure when urllib3 does not retry."""
    with SimCluster() as cluster:
        configuration = kubernetes.client.Configuration(host=cluster.url.replace("http://", "https://"))
        configuration.retries = False
        api = kubernetes.client.ApiClient(configuration)
        with ClusterClient(api, retries=0) as client, pytest.raises(TemporaryError) as caught:
            client.server_version()
    assert "cannot reach the API server" in str(caught.value)
    assert isinstance(caught.value.__cause__, ApiException)
    assert caught.value.__cause__.status == 0


def test_a_refused_connection_is_the_cause_of_the_temporary_error() -> None:
    with SimCluster() as cluster:
        url = cluster.url
    with ClusterClient.for_url(url, retries=0) as client, pytest.raises(TemporaryError) as caught:
        client.server_version()
    assert isinstance(caught.value.__cause__, urllib3.exceptions.HTTPError)


def test_a_failing_git_command_is_git_failed_an_environment_problem(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)
    runner = GitRunner(tmp_path.as_uri(), GitCredentials(), timeout=60)
    with pytest.raises(GitFailed) as caught:
        runner.run(["rev-parse", "--verify", "--quiet", "no-such-ref^{commit}"], cwd=tmp_path)
    assert isinstance(caught.value, EnvironmentProblem) and caught.value.exit_code == 4
    assert str(caught.value).startswith("git rev-parse exited with 1")


def test_git_failed_is_the_cause_of_the_clone_error(tmp_path: Path) -> None:
    source = GitSource((tmp_path / "missing.git").as_uri(), tmp_path / "cache")
    with source, pytest.raises(EnvironmentProblem, match="cannot clone") as caught:
        source.fetch()
    assert isinstance(caught.value.__cause__, GitFailed)
    assert "does not appear to be a git repository" in caught.value.__cause__.stderr


# -- the CLI: the class's exit code and one line, whatever the cause --------------------------------------------


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "reconciler", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=REPO, timeout=120)


def _one_line(stderr: str) -> str:
    assert "Traceback" not in stderr and "direct cause" not in stderr, stderr
    assert stderr.startswith("error: ") and stderr.count("\n") == 1, stderr
    return stderr


def test_a_bad_manifest_exits_1_with_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a\n")
    done = _cli("check", "-q", str(bad))
    assert done.returncode == 1
    assert _one_line(done.stderr).startswith(f"error: {bad}:4:1: invalid YAML: ")


def test_an_unreachable_cluster_exits_4_with_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with SimCluster() as cluster:
        cluster.write_kubeconfig(kubeconfig)
    done = _cli("inventory", "-q", "--kubeconfig", str(kubeconfig))  # the server is gone now
    assert done.returncode == 4
    assert "cannot reach the API server" in _one_line(done.stderr)


def test_an_unreachable_git_remote_exits_4_with_one_line(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    missing = (tmp_path / "missing.git").as_uri()
    with SimCluster() as cluster:
        cluster.write_kubeconfig(kubeconfig)
        done = _cli("rollback", "-q", "--repo", missing, "--kubeconfig", str(kubeconfig))
    assert done.returncode == 4
    assert f"error: {missing}: cannot clone: " in _one_line(done.stderr)
