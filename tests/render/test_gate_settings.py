"""The gate's own settings come from the protected side: a change is judged by its base's params and
waivers, and `gate-settings` names what it loosens (a denial in the pull-request check, a warning in the
loop). The loop, `apply --base` and `check --repo --base --head` give the same verdict for the same pair."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote
from render_support import follow

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.outcome import Outcome
from reconciler.policy.gate import GateSettings, setting_changes
from reconciler.sim.server import SimCluster

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests-example"
MAIN = "DaemonSet/gpu-system/gpu-example-kubelet-plugin"
WAIVER = "policy.dra-gitops.io/waive-driver-canary"


def _seeded(tmp_path: Path, params: dict[str, Any] | None = None) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    if params:
        _edit_config(remote, lambda config: config["params"].update(params))
    return remote


def _edit_config(remote: GitRemote, change: Callable[[dict[str, Any]], None]) -> None:
    path = remote.work / "dra-gitops.yaml"
    data = yaml.safe_load(path.read_text())
    change(data["config"])
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def _edit(remote: GitRemote, relative: str, old: str, new: str) -> None:
    path = remote.work / relative
    text = path.read_text()
    assert old in text, (relative, old)
    path.write_text(text.replace(old, new, 1))


def _upgrade_main_driver(remote: GitRemote) -> None:
    _edit(remote, "10-driver/kubelet-plugin.yaml", "gpu-example-driver:v0.3.0", "gpu-example-driver:v0.4.0")


def _waive_canary_on_main(remote: GitRemote) -> None:
    _upgrade_main_driver(remote)
    _edit(
        remote,
        "10-driver/kubelet-plugin.yaml",
        "    dra-gitops.io/driver: gpu.example.com\n",
        f'    dra-gitops.io/driver: gpu.example.com\n    {WAIVER}: "hotfix, canary later"\n',
    )


def _loosen_capacity_and_overallocate(remote: GitRemote) -> None:
    _edit_config(remote, lambda config: config["params"].update({"capacity_deny": False}))
    _edit(remote, "40-workloads/trainer.yaml", "replicas: 2", "replicas: 5")


def _bump_notebook(remote: GitRemote) -> None:
    _edit(remote, "40-workloads/notebook.yaml", "notebook:1.4.0", "notebook:1.4.1")


def _check(remote: GitRemote, base: str, head: str, *extra: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-q", "-o", "json", *extra]
    )
    return result.exit_code, json.loads(result.stdout)


def _apply(remote: GitRemote, base: str, head: str, kubeconfig: str) -> tuple[int, dict[str, Any]]:
    result = CliRunner().invoke(
        cli,
        ["apply", "--repo", str(remote.work), "--rev", head, "--base", base, "--kubeconfig", kubeconfig]
        + ["--target", "gpu-cluster", "-q", "-o", "json"],
    )
    return result.exit_code, json.loads(result.stdout)


CASES = {
    # name: (base params, the change, verdict, the denying rules)
    "driver upgrade without its canary": (None, _upgrade_main_driver, "denied", {"driver-canary"}),
    "a waiver added on the DaemonSet it upgrades": (None, _waive_canary_on_main, "denied", {"driver-canary"}),
    "capacity_deny turned off while over-allocating": (
        {"capacity_deny": True},
        _loosen_capacity_and_overallocate,
        "denied",
        {"capacity"},
    ),
    "a notebook image bump": (None, _bump_notebook, "passed", set()),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_loop_apply_and_the_pull_request_check_give_one_verdict(
    name: str, client: ClusterClient, cluster: SimCluster, tmp_path: Path
) -> None:
    params, change, verdict, rules = CASES[name]
    remote = _seeded(tmp_path, params)
    base = remote.commit_and_push("the last good commit")
    reconciler = follow(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    change(remote)
    head = remote.commit_and_push(name)
    kubeconfig = str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))

    code, report = _check(remote, base, head, "--kubeconfig", kubeconfig)
    denied_by = {f["rule"] for f in report["findings"] if f["severity"] == "deny" and not f.get("waived")}
    assert denied_by - {"gate-settings"} == rules, report["findings"]
    assert code == (1 if verdict == "denied" else 0) or (
        verdict == "passed" and denied_by == {"gate-settings"}
    )

    looped = reconciler.reconcile()
    assert (looped.outcome == Outcome.DENIED) == (verdict == "denied"), looped.message
    _, applied = _apply(remote, base, head, kubeconfig)
    assert (applied["outcome"] == "denied") == (verdict == "denied"), applied


def test_a_waiver_the_change_adds_is_flagged_and_not_honoured(tmp_path: Path) -> None:
    remote = _seeded(tmp_path)
    base = remote.commit_and_push("the last good commit")
    _waive_canary_on_main(remote)
    head = remote.commit_and_push("upgrade the main driver, waiving its canary")
    code, report = _check(remote, base, head)
    assert code == 1
    [canary] = [f for f in report["findings"] if f["rule"] == "driver-canary" and f["severity"] == "deny"]
    assert canary["ref"] == MAIN and canary not in report["waivers"]
    [gate] = [f for f in report["findings"] if f["rule"] == "gate-settings"]
    assert gate["severity"] == "deny" and gate["ref"] == MAIN
    assert f"waiver {WAIVER} added in this change (reason: hotfix, canary later)" in gate["msg"]
    assert "land the waiver first" in gate["msg"]
    # Once the waiver has landed on its own, the upgrade after it is waived.
    remote.git("checkout", "-q", base)
    remote.git("checkout", "-q", "-B", "main")
    _edit(
        remote,
        "10-driver/kubelet-plugin.yaml",
        "    dra-gitops.io/driver: gpu.example.com\n",
        f'    dra-gitops.io/driver: gpu.example.com\n    {WAIVER}: "hotfix, canary later"\n',
    )
    waiver_landed = remote.commit("the waiver, reviewed on its own")
    _upgrade_main_driver(remote)
    upgrade = remote.commit("the upgrade")
    code, report = _check(remote, waiver_landed, upgrade)
    assert code == 0, report["findings"]
    assert [w["rule"] for w in report["waivers"]] == ["driver-canary"]


def test_a_loosened_param_is_judged_by_the_base_and_shown_in_the_markdown_report(
    client: ClusterClient, cluster: SimCluster, tmp_path: Path
) -> None:
    remote = _seeded(tmp_path, {"capacity_deny": True})
    base = remote.commit_and_push("capacity denies")
    assert follow(client, remote, tmp_path).reconcile().outcome == Outcome.APPLIED
    _loosen_capacity_and_overallocate(remote)
    head = remote.commit_and_push("turn capacity_deny off and add three trainers")
    kubeconfig = str(cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    code, report = _check(remote, base, head, "--kubeconfig", kubeconfig)
    assert code == 1
    [gate] = [f for f in report["findings"] if f["rule"] == "gate-settings"]
    assert gate["msg"].startswith("params.capacity_deny: true → false loosens the gate")
    assert gate["severity"] == "deny" and gate["path"] == "dra-gitops.yaml"
    assert {f["rule"] for f in report["findings"] if f["severity"] == "deny"} == {"capacity", "gate-settings"}
    assert report["settings_changes"] == [
        {"setting": "params.capacity_deny", "old": "true", "new": "false", "loosens": True}
    ]
    markdown = (
        CliRunner()
        .invoke(
            cli,
            ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-q", "-o", "markdown"]
            + ["--kubeconfig", kubeconfig],
        )
        .stdout
    )
    assert "### Gate settings changed" in markdown
    assert "| `params.capacity_deny` | `true` | `false` | yes |" in markdown


def test_the_base_can_make_gate_findings_warnings(tmp_path: Path) -> None:
    remote = _seeded(tmp_path, {"gate_settings_deny": False})
    base = remote.commit_and_push("gate settings warn")
    _edit_config(remote, lambda config: config["params"].update({"canary_warn_unrestricted": False}))
    head = remote.commit_and_push("no warning for an unrestricted canary")
    code, report = _check(remote, base, head)
    [gate] = [f for f in report["findings"] if f["rule"] == "gate-settings"]
    assert (code, gate["severity"]) == (0, "warn")


def test_tightening_is_silent_and_every_kind_of_loosening_is_named() -> None:
    defaults = {"capacity_deny": False, "canary_warn_unrestricted": True}
    base = GateSettings(params={}, paths=("a", "b"), exclude=("x/*",), canary_for={"canary": "main"})
    tighter = GateSettings(
        params={"capacity_deny": True}, paths=("a", "b"), exclude=(), canary_for=base.canary_for
    )
    assert [c.loosens for c in setting_changes(base, tighter, defaults)] == [False, False]
    looser = GateSettings(
        params={"canary_warn_unrestricted": False, "admin_namespace_label": "x"},
        paths=("a",),
        exclude=("x/*", "drivers/*"),
        canary_for={"canary": "other"},
    )
    assert [c.setting for c in setting_changes(base, looser, defaults) if c.loosens] == [
        "params.admin_namespace_label",
        "params.canary_warn_unrestricted",
        "charts[canary].canaryFor",
    ], "paths and exclude that leave no file out only move what is judged"
    changes = {c.setting: c for c in setting_changes(base, looser, defaults, ["drivers/plugin.yaml"])}
    assert set(changes) == {
        "params.admin_namespace_label",
        "params.canary_warn_unrestricted",
        "exclude",
        "paths",
        "charts[canary].canaryFor",
    }
    assert all(c.loosens for c in changes.values())
    assert changes["params.canary_warn_unrestricted"].old == "true"


def test_paths_that_leave_a_checked_file_out_are_named(tmp_path: Path) -> None:
    remote = _seeded(tmp_path)
    base = remote.commit_and_push("every folder")
    _edit_config(remote, lambda config: config["paths"].remove("40-workloads"))
    head = remote.commit_and_push("workloads out of paths")
    _, report = _check(remote, base, head)
    [gate] = [f for f in report["findings"] if f["rule"] == "gate-settings"]
    assert gate["msg"].startswith("paths: ")
    assert "(leaves out 40-workloads/notebook.yaml, 40-workloads/trainer.yaml)" in gate["msg"]
