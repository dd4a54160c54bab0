"""examples/ci/: the pipelines' dra-gitops commands work, run the way CI runs them.

The pipelines run locally through `ci_runner` (jobs ordered by needs and stages, conditions evaluated, shell
steps under `bash -eo pipefail`) in a real Git repository made from manifests-example/ (a bare remote and a
work tree, base and head commits), against the simulated cluster served over HTTP, with the real dra-gitops
on PATH. Each scenario checks the exit code of every dra-gitops invocation, the result of every job and the
files the pipeline uploads (SARIF, JUnit, Markdown, code quality JSON, inventory, apply evidence).
"""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_runner import (
    GITHUB,
    GITLAB,
    ROOT,
    Invocation,
    JobRun,
    Workspace,
    load,
    run_github,
    run_gitlab,
    unmatched,
)
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = ROOT / "manifests-example"
TARGET = "production"
TAG = "dra-gitops/deployed/production"
GRACE = "2"  # seconds; the examples say 60 (a knob teams tune; the test has no minute to spare)
# A template naming a class that does not exist: denied twice (the class is missing, and a template's spec
# is immutable).
DENIED_RULES = {"class-before-template", "immutable-claim"}

# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    """Two nodes with two gpu.example.com devices each, the first a canary node; nothing deployed yet."""
    with SimCluster(audit=True) as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            yield sim, sim.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    """The manifests repository: a bare `origin` and a work tree on main with the example as first commit."""
    repo = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, repo.work, dirs_exist_ok=True)
    repo.commit_and_push("the example GPU stack")
    return repo


def edit(repo: GitRemote, relative: str, change: Any) -> None:
    path = repo.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def missing_class(docs: list[dict[str, Any]]) -> None:
    for request in docs[0]["spec"]["spec"]["devices"]["requests"]:
        request["exactly"]["deviceClassName"] = "gpu-that-does-not-exist.example.com"


def more_notebook_memory(docs: list[dict[str, Any]]) -> None:
    docs[0]["metadata"].setdefault("annotations", {})["example.com/owner"] = "ml-platform"


def four_trainers(docs: list[dict[str, Any]]) -> None:
    docs[0]["spec"]["replicas"] = 4


def logged(ws: Workspace, job: str) -> list[Invocation]:
    return [i for i in ws.invocations() if i.job == job]


def codes(ws: Workspace, job: str) -> list[tuple[str, int]]:
    return [(i.argv[0], i.code) for i in logged(ws, job)]


def assert_every_command_ran(runs: dict[str, JobRun], ws: Workspace) -> None:
    """Each invocation is one of its step's dra-gitops commands, and each such step ran some."""
    assert unmatched(runs, ws) == []
    assert ws.invocations(), "no dra-gitops command ran"


def failure_detail(runs: dict[str, JobRun]) -> str:
    return "\n".join(
        f"--- {j.id} {j.result}\n" + "\n".join(s.output[-3000:] for s in j.steps) for j in runs.values()
    )


def assert_sarif(path: Path, rules: set[str]) -> None:
    doc = json.loads(path.read_text())
    assert doc["version"] == "2.1.0" and doc["$schema"].endswith("sarif-2.1.0.json")
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "dra-gitops" and run["tool"]["driver"]["rules"]
    assert {r["ruleId"] for r in run["results"]} == rules
    for result in run["results"]:
        assert result["message"]["text"] and result["level"] in ("error", "warning")
        location = result["locations"][0]["physicalLocation"]
        assert (ROOT / "manifests-example" / location["artifactLocation"]["uri"]).exists()
        assert location["region"]["startLine"] >= 1


def assert_junit(path: Path, failures: int) -> None:
    root = ET.fromstring(path.read_text())
    assert root.tag == "testsuites" and int(root.get("tests", "0")) > 0
    assert int(root.get("failures", "-1")) == failures


# ---------------------------------------------------------------------------------------------- pull requests


@pytest.mark.parametrize(
    ("change", "verdict"),
    [
        (("40-workloads/notebook.yaml", more_notebook_memory), "Passed"),
        (("30-claims/single-gpu-template.yaml", missing_class), "Denied"),
    ],
    ids=["clean", "denied"],
)
def test_github_pull_request_report(remote: GitRemote, tmp_path: Path, change: Any, verdict: str) -> None:
    base = remote.git("rev-parse", "HEAD")
    remote.git("checkout", "-q", "-b", "topic")
    edit(remote, *change)
    head = remote.commit("the change under review")
    ws = Workspace(remote.work, tmp_path / "runner")
    github = {"base_ref": "main", "sha": head, "ref_name": "topic", "event_name": "pull_request"}
    runs = run_github(load(GITHUB["policy-report"]), ws, github, {})
    denied = verdict == "Denied"
    assert runs["check"].result == ("failure" if denied else "success"), failure_detail(runs)
    assert runs["check"].outputs["reported"] == "true"
    assert runs["comment"].result == runs["code-scanning"].result == "success"
    expected = 1 if denied else 0
    assert codes(ws, "check") == [("check", expected)] * 4
    assert_every_command_ran(runs, ws)
    assert all(i.argv[i.argv.index("--base") + 1] == "origin/main" for i in ws.invocations())

    work = remote.work
    markdown = (work / "dra-gitops-report.md").read_text()
    assert f"**{verdict}**" in markdown
    assert (tmp_path / "runner" / "check.summary.md").read_text() == markdown  # the step summary
    assert_sarif(work / "dra-gitops.sarif", DENIED_RULES if denied else set())
    assert_junit(
        work / "dra-gitops-junit.xml",
        failures=len(json.loads((work / "dra-gitops.sarif").read_text())["runs"][0]["results"]),
    )
    annotations = runs["check"].steps[-1].output
    assert ("::error file=30-claims/single-gpu-template.yaml" in annotations) == denied
    assert f"::notice title=dra-gitops policy check::{verdict}" in annotations
    # What the `uses:` steps are given exists: the uploaded reports, the SARIF, the comment's Markdown.
    for job in ("check", "comment", "code-scanning"):
        for step in runs[job].steps:
            for key in ("path", "sarif_file"):
                for name in step.with_.get(key, "").split():
                    assert (work / name).is_file(), f"{job}: {step.name} uploads {name}"
    assert (base, head) != (head, base)


@pytest.mark.parametrize("denied", [False, True], ids=["clean", "denied"])
def test_gitlab_merge_request_report(remote: GitRemote, tmp_path: Path, denied: bool) -> None:
    base = remote.git("rev-parse", "HEAD")
    remote.git("checkout", "-q", "-b", "topic")
    if denied:
        edit(remote, "30-claims/single-gpu-template.yaml", missing_class)
    else:
        edit(remote, "40-workloads/notebook.yaml", more_notebook_memory)
    head = remote.commit("the change under review")
    ws = Workspace(remote.work, tmp_path / "runner")
    predefined = {
        "CI_PIPELINE_SOURCE": "merge_request_event",
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": base,
        "CI_COMMIT_SHA": head,
        "CI_COMMIT_BRANCH": "",
        "CI_DEFAULT_BRANCH": "main",
    }
    runs = run_gitlab(load(GITLAB), ws, predefined, {})
    assert set(runs) == {"policy-report"}, "merge requests run only the report"
    assert runs["policy-report"].result == ("failure" if denied else "success"), failure_detail(runs)
    assert codes(ws, "policy-report") == [("check", 1 if denied else 0)] * 4
    assert_every_command_ran(runs, ws)

    quality = json.loads((remote.work / "gl-code-quality-report.json").read_text())
    assert isinstance(quality, list)
    assert {issue["check_name"] for issue in quality} == (DENIED_RULES if denied else set())
    for issue in quality:
        assert issue["severity"] == "critical" and issue["description"].startswith("ResourceClaimTemplate/")
        assert issue["location"]["path"] == "30-claims/single-gpu-template.yaml"
        assert issue["location"]["lines"]["begin"] >= 1 and re.fullmatch(
            r"[0-9a-f]{32}", issue["fingerprint"]
        )
    assert_junit(remote.work / "dra-gitops-junit.xml", failures=len(DENIED_RULES) if denied else 0)
    assert ("**Denied**" if denied else "**Passed**") in (remote.work / "dra-gitops-report.md").read_text()


# ---------------------------------------------------------------------------------------------- inventory


def deploy_example(kubeconfig: Path, ws: Workspace) -> None:
    env = ws.base_env("setup", "apply") | {"KUBECONFIG": str(kubeconfig)}
    code, output = ws.bash(f"dra-gitops apply {EXAMPLE} -q --target {TARGET}", env)
    assert code == 0, output


def test_inventory_jobs_read_the_cluster_and_write_nothing(
    cluster: tuple[SimCluster, Path], remote: GitRemote, tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    ws = Workspace(remote.work, tmp_path / "runner")
    deploy_example(kubeconfig, ws)
    # What the jobs sent, from the audit log: the control plane's own writes (node heartbeats) go on.
    assert sim.api.audit is not None
    before = len(sim.api.audit.events)

    runs = run_github(
        load(GITHUB["inventory"]),
        ws,
        {"event_name": "schedule"},
        {"DRA_READER_KUBECONFIG": kubeconfig.read_text()},
    )
    assert runs["inventory"].result == "success", failure_detail(runs)
    assert codes(ws, "inventory") == [("inventory", 0), ("inventory", 0)]
    inventory = json.loads((remote.work / "dra-gitops-inventory.json").read_text())
    assert inventory["drivers"]["gpu.example.com"]["devices"] == 4
    assert inventory["drivers"]["gpu.example.com"]["allocated"] == 3
    assert "gpu.example.com" in (remote.work / "dra-gitops-inventory.md").read_text()

    predefined = {"CI_PIPELINE_SOURCE": "schedule", "CI_DEFAULT_BRANCH": "main", "CI_COMMIT_BRANCH": "main"}
    runs = run_gitlab(load(GITLAB), ws, predefined, {"DRA_READER_KUBECONFIG": str(kubeconfig)})
    assert set(runs) == {"inventory"} and runs["inventory"].result == "success", failure_detail(runs)
    assert codes(ws, "inventory") == [("inventory", 0)] * 5
    writes = [
        f"{e.request.verb} {e.request.path}"
        for e in sim.api.audit.events[before:]
        if e.request.verb in ("create", "update", "patch", "delete", "deletecollection")
    ]
    assert writes == [], f"an inventory job wrote to the cluster: {writes}"


# ---------------------------------------------------------------------------------------------- push mode


def trainer_replicas(sim: SimCluster) -> int:
    with ClusterClient.for_url(sim.url) as client:
        deployment = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
        assert deployment is not None
        return int(deployment["spec"]["replicas"])


def state(sim: SimCluster) -> Any:
    with ClusterClient.for_url(sim.url) as client:
        return StateStore(client, TARGET, "dra-gitops").load()


def test_github_push_mode_deploys_verifies_tags_and_rolls_back_a_failed_deploy(
    cluster: tuple[SimCluster, Path], remote: GitRemote, tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    workflow = load(GITHUB["deploy"])
    workflow["env"]["GRACE_SECONDS"] = GRACE
    secrets = {
        "DRA_DEPLOYER_KUBECONFIG": kubeconfig.read_text(),
        "DRA_READER_KUBECONFIG": kubeconfig.read_text(),
    }
    good = remote.git("rev-parse", "HEAD")

    # 1. The first deployment: no tag yet, so the whole tree is checked; then plan, apply, verify, tag.
    ws = Workspace(remote.work, tmp_path / "runner-1")
    runs = run_github(workflow, ws, {"sha": good, "ref_name": "main", "event_name": "push"}, secrets)
    assert {j: r.result for j, r in runs.items()} == {
        "plan": "success",
        "deploy": "success",
        "verify": "success",
        "rollback": "skipped",
    }, failure_detail(runs)
    assert runs["plan"].outputs == {"last-good": "", "changes": "true"}
    assert codes(ws, "plan") == [("check", 0), ("plan", 3)]
    assert logged(ws, "plan")[0].argv[:2] == ["check", "."]
    plan_summary = (ws.scratch / "plan.summary.md").read_text()  # the reviewers' view of the dry-run
    assert plan_summary.startswith(f"## dra-gitops plan of {good[:12]}\n")
    assert "**dry-run ok** — 12 to create" in plan_summary and "```diff" in plan_summary
    assert codes(ws, "deploy") == [("apply", 0)] and "--base" not in logged(ws, "deploy")[0].argv
    assert codes(ws, "verify") == [("diagnose", 0), ("inventory", 0)]
    assert json.loads((remote.work / "dra-gitops-apply.json").read_text())["outcome"] == "applied"
    assert remote.git("rev-parse", f"{TAG}^{{commit}}", cwd=remote.bare) == good  # pushed to origin
    assert_every_command_ran(runs, ws)

    # 2. More GPUs than exist: policies and dry-run pass, the apply fails verification, the rollback runs.
    edit(remote, "40-workloads/trainer.yaml", four_trainers)
    bad = remote.commit_and_push("4 trainers")
    ws = Workspace(remote.work, tmp_path / "runner-2")
    runs = run_github(workflow, ws, {"sha": bad, "ref_name": "main", "event_name": "push"}, secrets)
    assert {j: r.result for j, r in runs.items()} == {
        "plan": "success",
        "deploy": "failure",
        "verify": "skipped",
        "rollback": "success",
    }, failure_detail(runs)
    assert runs["plan"].outputs == {"last-good": good, "changes": "true"}
    assert codes(ws, "plan") == [("check", 0), ("plan", 3)]
    assert logged(ws, "plan")[0].argv[:5] == ["check", "--repo", ".", "--base", good]
    assert codes(ws, "deploy") == [("apply", 1)]
    assert logged(ws, "deploy")[0].argv[5:7] == ["--base", good]
    evidence = json.loads((remote.work / "dra-gitops-apply.json").read_text())
    assert evidence["outcome"] == "verify-failed"
    assert any(d["mode"] == "exhaustion" for d in evidence["diagnoses"])
    assert codes(ws, "rollback") == [("rollback", 0), ("status", 0)]
    assert logged(ws, "rollback")[0].argv[logged(ws, "rollback")[0].argv.index("--to") + 1] == good
    assert_every_command_ran(runs, ws)

    # Really rolled back: the trainer runs 2 replicas again, the state holds the good revision, the tag
    # still names it.
    assert trainer_replicas(sim) == 2
    after = state(sim)
    assert after.last_good == good and after.hold == bad
    assert remote.git("rev-parse", f"{TAG}^{{commit}}", cwd=remote.bare) == good


def test_gitlab_push_mode_waits_for_approval_then_deploys_and_rolls_back_a_failed_deploy(
    cluster: tuple[SimCluster, Path], remote: GitRemote, tmp_path: Path
) -> None:
    sim, kubeconfig = cluster
    config = load(GITLAB)
    config["variables"]["GRACE_SECONDS"] = GRACE
    project = {
        "DRA_DEPLOYER_KUBECONFIG": str(kubeconfig),
        "DRA_READER_KUBECONFIG": str(kubeconfig),
        "DEPLOYED_TAG_REMOTE": remote.url,  # instead of https://oauth2:<token>@host/project.git
    }
    good = remote.git("rev-parse", "HEAD")

    def predefined(sha: str) -> dict[str, str]:
        return {
            "CI_PIPELINE_SOURCE": "push",
            "CI_COMMIT_BRANCH": "main",
            "CI_DEFAULT_BRANCH": "main",
            "CI_COMMIT_SHA": sha,
            "CI_REPOSITORY_URL": remote.url,
            "GITLAB_USER_LOGIN": "reviewer",
        }

    # Nobody approved yet: plan ran, nothing was applied.
    ws = Workspace(remote.work, tmp_path / "runner-0")
    runs = run_gitlab(config, ws, predefined(good), project, play_manual=False)
    assert {j: r.result for j, r in runs.items()} == {
        "plan": "success",
        "approve": "manual",
        "deploy": "skipped",
        "verify": "skipped",
        "rollback": "skipped",
    }, failure_detail(runs)
    assert codes(ws, "plan") == [("check", 0), ("plan", 3)]
    assert state(sim).last_good is None

    # Approved: applied, verified, tagged.
    ws = Workspace(remote.work, tmp_path / "runner-1")
    runs = run_gitlab(config, ws, predefined(good), project)
    assert {j: r.result for j, r in runs.items()} == {
        "plan": "success",
        "approve": "success",
        "deploy": "success",
        "verify": "success",
        "rollback": "skipped",
    }, failure_detail(runs)
    assert codes(ws, "deploy") == [("apply", 0)]
    assert remote.git("rev-parse", f"{TAG}^{{commit}}", cwd=remote.bare) == good

    edit(remote, "40-workloads/trainer.yaml", four_trainers)
    bad = remote.commit_and_push("4 trainers")
    ws = Workspace(remote.work, tmp_path / "runner-2")
    runs = run_gitlab(config, ws, predefined(bad), project)
    assert {j: r.result for j, r in runs.items()} == {
        "plan": "success",
        "approve": "success",
        "deploy": "failure",
        "verify": "skipped",
        "rollback": "success",
    }, failure_detail(runs)
    assert logged(ws, "plan")[0].argv[:5] == ["check", "--repo", ".", "--base", good]
    assert codes(ws, "deploy") == [("apply", 1)]
    assert codes(ws, "rollback") == [("rollback", 0), ("status", 0)]
    assert_every_command_ran(runs, ws)
    assert trainer_replicas(sim) == 2
    assert state(sim).last_good == good
    assert remote.git("rev-parse", f"{TAG}^{{commit}}", cwd=remote.bare) == good
