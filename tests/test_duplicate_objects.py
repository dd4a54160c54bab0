"""An object declared in two places: identical copies are one object everywhere, different ones an error.

Everywhere the desired state is loaded: `check` of a directory and of Git trees, `plan`, `apply` and a
reconcile pass (the state inventory), all against the simulated cluster over real HTTP.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import GitRemote

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions, check_paths
from reconciler.delivery.desired import load_git_revisions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.loop.store.state import StateStore
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.sim.server import SimCluster
from reconciler.source.remote import GitSource

NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: shared-ns\n"
# The same object as parsed: another comment, flow style, key order.
NAMESPACE_AGAIN = "# team b needs it too\nmetadata: {name: shared-ns}\nkind: Namespace\napiVersion: v1\n"
CLASS = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata:\n  name: gpu\nspec: {}\n"


def cm(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: shared-ns\n"


TREE = {
    "team-a/ns.yaml": NAMESPACE + "---\n" + CLASS,
    "team-a/cm.yaml": cm("a"),
    "team-b/ns.yaml": NAMESPACE_AGAIN + "---\n" + CLASS,
    "team-b/cm.yaml": cm("b"),
}
REPEATS = {
    ("Namespace/shared-ns", "team-b/ns.yaml", 2, "team-a/ns.yaml:1"),
    ("DeviceClass/gpu", "team-b/ns.yaml", 6, "team-a/ns.yaml:6"),
}


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def commit(root: Path, message: str) -> str:
    if not (root / ".git").exists():
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.email", "ci@example.com")
        git(root, "config", "user.name", "CI")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", "-q", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


def repeats_of(doc: dict[str, object], prefix: str = "") -> set[tuple[str, str, int, str]]:
    found = set()
    for f in doc["findings"]:  # type: ignore[attr-defined]
        if f["rule"] == "duplicate-object":
            first = f["msg"].split("(first at ")[1].split(")")[0]
            found.add((f["ref"], f["path"], f["line"], first))
            assert f["severity"] == "warn"
            assert f["msg"].startswith(f"{f['ref']} is defined twice with the same content (first at ")
    return {
        (ref, path.removeprefix(prefix), line, first.removeprefix(prefix)) for ref, path, line, first in found
    }


# --- check -------------------------------------------------------------------------------------------


def test_identical_copies_are_checked_once_with_a_warning_naming_both_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path / "repo", TREE)
    code, out, _ = check("repo", "-o", "json")
    assert code == 0, out
    doc = json.loads(out)
    assert doc["summary"]["objects"] == 4 and doc["summary"]["verdict"] == "Passed with warnings"
    assert repeats_of(doc, "repo/") == REPEATS
    assert doc["rules"]["duplicate-object"]["severity"] == "warn"
    assert check("repo", "--fail-on-warn")[0] == 1

    # What the policies see: each object once, in the objects list, the index and the plan.
    run = check_paths([Path("repo")], CheckOptions())
    refs = [o["_dra"]["ref"] for o in run.input_doc["objects"]]
    assert sorted(refs) == sorted(set(refs)) and len(refs) == 4
    assert list(run.input_doc["index"]["device_classes"]) == ["gpu"]
    assert [str(c.ref) for c in run.plan.changes].count("Namespace/shared-ns") == 1


def test_different_copies_are_an_error_naming_both_places(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    labelled = NAMESPACE_AGAIN.replace("{name: shared-ns}", "{name: shared-ns, labels: {team: b}}")
    write_tree(tmp_path / "repo", {**TREE, "team-b/ns.yaml": labelled})
    code, out, err = check("repo")
    assert code == 1 and out == ""
    assert err == (
        "error: repo/team-b/ns.yaml:2: Namespace/shared-ns is defined twice with different content "
        "(first at repo/team-a/ns.yaml:1): they differ at metadata.labels\n"
    )


def test_git_trees_load_identical_copies_once_and_judge_only_new_repeats(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", {"team-a/ns.yaml": NAMESPACE, "team-a/cm.yaml": cm("a")})
    base = commit(root, "team a")
    write_tree(root, {"team-b/ns.yaml": NAMESPACE_AGAIN, "team-b/cm.yaml": cm("b")})
    head = commit(root, "team b")
    head_state, base_state = load_git_revisions(root, [head, base], "", DEFAULT_LIMITS)
    assert [str(m.ref) for m in head_state.manifests.manifests].count("Namespace/shared-ns") == 1
    assert [(d.where, d.first) for d in head_state.duplicates] == [("team-b/ns.yaml:2", "team-a/ns.yaml:1")]
    assert base_state.duplicates == []

    code, out, _ = check("--repo", str(root), "--base", base, "--head", head, "-o", "json")
    assert code == 0, out
    assert repeats_of(json.loads(out)) == {("Namespace/shared-ns", "team-b/ns.yaml", 2, "team-a/ns.yaml:1")}
    # A repeat the base already had is not the change's doing.
    later = commit(root, "nothing new")
    code, out, _ = check("--repo", str(root), "--base", head, "--head", later, "-o", "json")
    assert code == 0 and repeats_of(json.loads(out)) == set()


# --- plan, apply, a reconcile pass --------------------------------------------------------------------


def test_apply_and_plan_apply_identical_copies_once(sim_cluster: SimCluster, tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "repo", {k: v for k, v in TREE.items() if "cm" in k or k == "team-a/ns.yaml"}
    )
    write_tree(root, {"team-b/ns.yaml": NAMESPACE_AGAIN})
    kubeconfig = str(sim_cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    runner = CliRunner()
    plan = runner.invoke(cli, ["plan", str(root), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    assert plan.exit_code == 0, plan.output
    assert f"warning: {root}/team-b/ns.yaml:2: Namespace/shared-ns is defined twice" in plan.stderr
    refs = [r["ref"] for r in json.loads(plan.stdout)["objects"]]
    assert refs.count("Namespace/shared-ns") == 1, refs

    applied = runner.invoke(cli, ["apply", str(root), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    assert applied.exit_code == 0, applied.output
    report = json.loads(applied.stdout)
    assert report["outcome"] == "applied"
    assert report["counts"]["create"] == 4  # Namespace, DeviceClass, two ConfigMaps: nothing twice
    assert repeats_of(report, f"{root}/") == {
        ("Namespace/shared-ns", "team-b/ns.yaml", 2, "team-a/ns.yaml:1")
    }
    with ClusterClient.for_url(sim_cluster.url) as client:
        assert [n["metadata"]["name"] for n in client.list_kind("", "Namespace")].count("shared-ns") == 1


def test_a_reconcile_pass_records_identical_copies_once_in_the_inventory(
    sim_cluster: SimCluster, tmp_path: Path
) -> None:
    remote = GitRemote(tmp_path / "git")
    write_tree(remote.work, TREE)
    sha = remote.commit_and_push("two teams")
    with ClusterClient.for_url(sim_cluster.url) as client:
        source = GitSource(remote.url, tmp_path / "cache", branch="main")
        options = ReconcileOptions(DeliverOptions(target="teams", stage_timeout=30, verify_timeout=30))
        result = Reconciler(client, GitRevisions(source), options, CheckOptions()).reconcile()
        assert result.outcome == "applied", (result.message, result.records)
        state = StateStore(client, "teams").load()
    assert state.last_good == sha
    assert sorted(state.inventory) == [
        "resource.k8s.io/v1 DeviceClass/gpu",
        "v1 ConfigMap/shared-ns/a",
        "v1 ConfigMap/shared-ns/b",
        "v1 Namespace/shared-ns",
    ]
