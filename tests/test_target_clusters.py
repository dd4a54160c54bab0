"""A target's own cluster in the `run --config` file: `kubeconfig` and `context`, checked against the files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.errors import UserError
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.config.targets import ClusterRef, Target
from reconciler.loop.run.clusters import check_clusters, connect_target, select_target

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "two-clusters" / "targets.yaml"


def kubeconfig(path: Path, *contexts: str, current: str | None = None) -> Path:
    """A kubeconfig with one context per name, each on its own (unreachable) server."""
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": name, "cluster": {"server": f"http://127.0.0.1:{9 + i}"}}
            for i, name in enumerate(contexts)
        ],
        "users": [{"name": "me", "user": {"token": "t"}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": "me"}} for name in contexts],
    }
    if current:
        document["current-context"] = current
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(document))
    return path


def config(tmp_path: Path, text: str) -> tuple[Path, list[Target]]:
    path = tmp_path / "targets.yaml"
    path.write_text(textwrap.dedent(text))
    return path, load_targets(path.read_text(), str(path))


def check_error(tmp_path: Path, text: str, controller_kubeconfig: str | None = None) -> str:
    _, targets = config(tmp_path, text)
    with pytest.raises(UserError) as caught:
        check_clusters(targets, controller_kubeconfig)
    return str(caught.value)


def test_the_keys_name_a_cluster_and_defaults_share_one(tmp_path: Path) -> None:
    staging = kubeconfig(tmp_path / "staging", "staging", current="staging")
    path, targets = config(
        tmp_path,
        f"""\
        defaults:
          repo: /r
          kubeconfig: {staging}
        targets:
          - name: staging
          - name: production
            kubeconfig: {tmp_path}/production
            context: prod
          - name: home
            kubeconfig: null
        """,
    )
    by_name = {t.name: t for t in targets}
    assert by_name["staging"].cluster == ClusterRef(str(staging), None)
    assert by_name["staging"].cluster.kubeconfig_where == f"{path}:3"  # the key's line, in defaults
    production = by_name["production"].cluster
    assert production == ClusterRef(f"{tmp_path}/production", "prod")
    assert (production.kubeconfig_where, production.context_where) == (f"{path}:7", f"{path}:8")
    assert by_name["home"].cluster is None  # the controller's own cluster


def test_a_missing_kubeconfig_file_is_a_config_error_at_its_line(tmp_path: Path) -> None:
    message = check_error(
        tmp_path,
        f"""\
        targets:
          - name: production
            repo: /r
            kubeconfig: {tmp_path}/nowhere/kubeconfig
        """,
    )
    assert message == (
        f"{tmp_path}/targets.yaml:4: kubeconfig '{tmp_path}/nowhere/kubeconfig' does not exist or is not a file"
    )


def test_an_unknown_context_is_a_config_error_at_its_line(tmp_path: Path) -> None:
    file = kubeconfig(tmp_path / "kc", "staging", "production")
    message = check_error(
        tmp_path,
        f"""\
        targets:
          - name: production
            repo: /r
            kubeconfig: {file}
            context: prod
        """,
    )
    assert message == (
        f"{tmp_path}/targets.yaml:5: context 'prod' is not in {file} (its contexts: production, staging)"
    )


def test_a_kubeconfig_without_a_current_context_needs_one_named(tmp_path: Path) -> None:
    file = kubeconfig(tmp_path / "kc", "staging")
    message = check_error(tmp_path, f"targets:\n  - name: a\n    repo: /r\n    kubeconfig: {file}\n")
    assert message.startswith(f"{tmp_path}/targets.yaml:4: kubeconfig '{file}' has no current-context")


def test_a_file_that_is_no_kubeconfig_is_refused(tmp_path: Path) -> None:
    file = tmp_path / "kc"
    file.write_text("- just a list\n")
    message = check_error(tmp_path, f"targets:\n  - name: a\n    repo: /r\n    kubeconfig: {file}\n")
    assert message == f"{tmp_path}/targets.yaml:4: kubeconfig '{file}' is not a kubeconfig (no mapping)"


def test_a_context_alone_picks_one_of_the_controllers_kubeconfig(tmp_path: Path) -> None:
    own = kubeconfig(tmp_path / "own", "home", "staging", current="home")
    text = "targets:\n  - name: a\n    repo: /r\n    context: {}\n"
    _, targets = config(tmp_path, text.format("staging"))
    check_clusters(targets, str(own))
    message = check_error(tmp_path, text.format("elsewhere"), str(own))
    assert (
        message
        == f"{tmp_path}/targets.yaml:4: context 'elsewhere' is not in {own} (its contexts: home, staging)"
    )


def test_the_two_cluster_example_loads_and_checks_its_files(tmp_path: Path) -> None:
    targets = load_targets(EXAMPLE.read_text(), str(EXAMPLE))
    assert [(t.name, t.cluster and t.cluster.context) for t in targets] == [
        ("staging", "staging"),
        ("production", "production"),
    ]
    # Where it is deployed the kubeconfigs are mounted Secrets; here they are not, and the error says where.
    with pytest.raises(UserError) as caught:
        check_clusters(targets, None)
    assert str(caught.value).startswith(
        f"{EXAMPLE}:20: kubeconfig '/etc/dra-gitops/clusters/staging/kubeconfig'"
    )


def test_a_verb_names_an_unknown_target_of_the_config(tmp_path: Path) -> None:
    path, targets = config(tmp_path, "targets:\n  - name: a\n    repo: /r\n  - name: b\n    repo: /r\n")
    assert select_target(targets, "b", str(path)).name == "b"
    with pytest.raises(UserError) as caught:
        select_target(targets, "c", str(path))
    assert str(caught.value) == f"{path}: no target 'c' (its targets: a, b): give --target NAME"
    with pytest.raises(UserError), connect_target(targets, "default", "dra-gitops", None, None, str(path)):
        pass
    result = CliRunner().invoke(cli, ["status", "--config", str(path), "--target", "c"])
    assert result.exit_code == 1
    assert f"error: {path}: no target 'c' (its targets: a, b)" in result.output


def test_a_verb_given_the_config_refuses_a_missing_kubeconfig(tmp_path: Path) -> None:
    path, _ = config(tmp_path, f"targets:\n  - name: a\n    repo: /r\n    kubeconfig: {tmp_path}/gone\n")
    target = ["--config", str(path), "--target", "a"]
    for args in (["status", *target], ["history", *target], ["retry", *target], ["suspend", *target]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 1, (args, result.output)
        assert f"error: {path}:4: kubeconfig '{tmp_path}/gone' does not exist" in result.output, args
    result = CliRunner().invoke(cli, ["get", "--config", str(path)])
    assert f"error: {path}:4: kubeconfig '{tmp_path}/gone' does not exist" in result.output


def test_a_context_naming_no_cluster_is_a_config_error_at_its_line(tmp_path: Path) -> None:
    file = tmp_path / "kc"
    broken = {"name": "broken", "context": {"cluster": "nowhere", "user": "me"}}
    file.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "Config", "contexts": [broken]}))
    path, targets = config(
        tmp_path, f"targets:\n  - name: a\n    repo: /r\n    kubeconfig: {file}\n    context: broken\n"
    )
    check_clusters(targets, None)  # the names are right; the client library finds the rest wrong
    with pytest.raises(UserError) as caught, connect_target(targets, "a", "dra-gitops", None, None):
        pass
    assert str(caught.value).startswith(f"{path}:5: cannot load cluster configuration: ")
    assert "nowhere" in str(caught.value)


def test_run_refuses_a_missing_kubeconfig_before_connecting_anywhere(tmp_path: Path) -> None:
    path, _ = config(
        tmp_path,
        f"targets:\n  - name: a\n    repo: /r\n  - name: b\n    repo: /r\n    kubeconfig: {tmp_path}/gone\n",
    )
    result = CliRunner().invoke(
        cli, ["run", "--config", str(path), "--kubeconfig", str(tmp_path / "no-home"), "--once"]
    )
    assert result.exit_code == 1, result.output
    assert f"error: {path}:6: kubeconfig '{tmp_path}/gone' does not exist or is not a file" in result.output
