"""Every command reads a time the same way (`cli/options.py`'s `Duration`): `5`, `5s`, `2m`, `1h30m`,
`500ms`; a bad one is a usage error naming the option. Against the simulated cluster: `apply`, `plan`,
`run --once` and `status` with durations."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import click
import pytest
from click.testing import CliRunner, Result
from helpers import GitRemote

from reconciler.cli import cli
from reconciler.cli.options import DURATION, Duration
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[1] / "manifests-example"
# Option names that say "a time" (a float option named so would read "5s" as an error).
TIME_WORDS = ("timeout", "grace", "interval", "duration", "debounce", "period")


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def commands(group: click.Group = cli, prefix: str = "") -> Iterator[tuple[str, click.Command]]:
    for name, command in sorted(group.commands.items()):
        if isinstance(command, click.Group):
            yield from commands(command, f"{prefix}{name} ")
        else:
            yield f"{prefix}{name}", command


def time_options() -> list[tuple[str, click.Option]]:
    return [
        (name, param)
        for name, command in commands()
        for param in command.params
        if isinstance(param, click.Option) and any(word in param.opts[0] for word in TIME_WORDS)
    ]


def test_every_time_option_of_every_command_takes_a_duration() -> None:
    found = time_options()
    assert {(name, param.opts[0]) for name, param in found} >= {
        ("apply", "--grace"),
        ("apply", "--stage-timeout"),
        ("apply", "--verify-timeout"),
        ("run", "--grace"),
        ("run", "--poll-interval"),
        ("run", "--lease-duration"),
        ("rollback", "--grace"),
        ("demo", "--grace"),
        ("watch", "--debounce"),
        ("sim serve", "--node-monitor-grace-period"),
    }
    assert [(name, param.opts[0]) for name, param in found if not isinstance(param.type, Duration)] == []


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("5", 5.0),
        ("2.5", 2.5),
        ("5s", 5.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("1m30s", 90.0),
    ],
)
def test_a_duration_is_read_as_run_always_read_it(text: str, seconds: float) -> None:
    assert DURATION.convert(text, None, None) == pytest.approx(seconds)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["apply", "--grace", "5x", "."], "Invalid value for '--grace': invalid duration '5x'"),
        (
            ["apply", "--stage-timeout", "soon", "."],
            "Invalid value for '--stage-timeout': invalid duration 'soon'",
        ),
        (
            ["run", "--repo", "/r", "--poll-interval", "fast"],
            "Invalid value for '--poll-interval': invalid duration",
        ),
        (["run", "--repo", "/r", "--grace", "-1"], "Invalid value for '--grace': duration must be a finite"),
        (["rollback", "--repo", "/r", "--grace", "1d"], "Invalid value for '--grace': invalid duration '1d'"),
        (["demo", "--grace", "nan"], "Invalid value for '--grace': duration must be a finite"),
    ],
)
def test_a_bad_duration_is_a_usage_error_naming_the_option(args: list[str], message: str) -> None:
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr
    assert "use e.g. 30s, 1m30s, 500ms, 2h or plain seconds" in result.stderr or "finite" in message


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[Path]:
    """Two nodes with two gpu.example.com devices each, the first a canary node; its kubeconfig."""
    with SimCluster() as cluster:
        plane = install(
            cluster, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
        )
        try:
            yield cluster.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def test_apply_and_plan_take_durations(sim: Path, tmp_path: Path) -> None:
    applied = run(
        "apply", str(EXAMPLE), "--kubeconfig", str(sim), "-q",
        "--grace", "5s", "--stage-timeout", "2m", "--verify-timeout", "1m30s",
    )  # fmt: skip
    assert applied.exit_code == 0, applied.output
    planned = run("plan", str(EXAMPLE), "--kubeconfig", str(sim), "-q", "-o", "json", "--exit-code")
    assert planned.exit_code == 0, planned.output  # nothing left to change


def test_apply_waits_the_grace_it_was_given(sim: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    shutil.copytree(EXAMPLE, repo)
    trainer = repo / "40-workloads" / "trainer.yaml"
    trainer.write_text(trainer.read_text().replace("replicas: 2", "replicas: 4"))
    result = run("apply", str(repo), "--kubeconfig", str(sim), "-q", "--grace", "1500ms")
    assert result.exit_code == 1
    assert "FailedScheduling 'cannot allocate all claims'" in result.stdout
    assert "(grace 1.5s)" in result.stdout, result.stdout


def test_run_once_and_status_take_durations(sim: Path, tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    sha = remote.commit_and_push("example")
    once = run(
        "run", "--once", "--repo", remote.url, "--kubeconfig", str(sim), "-q",
        "--cache-dir", str(tmp_path / "cache"), "--listen", "127.0.0.1:0",
        "--grace", "5s", "--poll-interval", "1h30m", "--lease-duration", "15s",
        "--stage-timeout", "2m", "--verify-timeout", "90",
    )  # fmt: skip
    assert once.exit_code == 0, once.output
    assert once.stdout.startswith(f"default: applied {sha}")
    status = run("status", "--kubeconfig", str(sim), "-o", "json")
    assert status.exit_code == 0
    assert json.loads(status.stdout)["lastAttempted"]["sha"] == sha
