"""examples/ci/: every pipeline parses, its actions are pinned, its jobs least-privilege, and its shape is
what examples/ci/README.md describes; the extraction of `dra-gitops` commands that test_ci_examples uses."""

from __future__ import annotations

import re

import pytest
from ci_runner import GITHUB, GITLAB, GITLAB_PROMOTE, load, on, scripts
from ci_text import dra_commands, expand, matches


@pytest.mark.parametrize("name", sorted(GITHUB))
def test_github_workflow_is_pinned_and_least_privilege(name: str) -> None:
    path = GITHUB[name]
    text = path.read_text()
    workflow = load(path)
    assert workflow["permissions"] == {}, "top-level permissions: {} so each job asks for its own"
    for line in text.splitlines():
        if "uses:" in line:
            assert re.search(r"uses: [\w.-]+/[\w./-]+@[0-9a-f]{40} # v\d+\.\d+\.\d+$", line), line
    for job_id, job in workflow["jobs"].items():
        permissions = job["permissions"]
        uses = [s.get("uses", "") for s in job["steps"]]
        runs = " ".join(s.get("run", "") for s in job["steps"])
        writes = {k for k, v in permissions.items() if v == "write"}
        expected = set()
        if any(u.startswith("github/codeql-action/upload-sarif@") for u in uses):
            expected.add("security-events")
        if any(u.startswith("actions/github-script@") for u in uses):
            expected.add("pull-requests")
        if "git push" in runs:
            expected.add("contents")
        assert writes == expected, f"{name}/{job_id}: write permissions {writes}, needs {expected}"
        assert set(permissions.values()) <= {"read", "write"}
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@") and "git push" not in runs:
                assert step["with"]["persist-credentials"] is False, f"{job_id}: no token left in .git"


def test_github_deploy_pipeline_shape() -> None:
    jobs = load(GITHUB["deploy"])["jobs"]
    assert set(jobs) == {"plan", "deploy", "verify", "rollback"}
    assert jobs["deploy"]["needs"] == "plan" and jobs["deploy"]["environment"] == "production"
    assert "--exit-code" in " ".join(s.get("run", "") for s in jobs["plan"]["steps"])
    assert jobs["verify"]["needs"] == ["plan", "deploy"]
    assert jobs["rollback"]["needs"] == ["plan", "deploy"]
    assert (
        "failure()" in jobs["rollback"]["if"] and "needs.deploy.result == 'failure'" in jobs["rollback"]["if"]
    )
    # The unattended jobs hold the deployer credentials in an environment without reviewers.
    assert jobs["plan"]["environment"] == jobs["rollback"]["environment"] == "production-automation"
    assert on(load(GITHUB["deploy"]))["push"]["branches"] == ["main"]


def test_github_policy_report_and_inventory_shape() -> None:
    report = load(GITHUB["policy-report"])
    assert "pull_request" in on(report)
    assert report["jobs"]["comment"]["needs"] == report["jobs"]["code-scanning"]["needs"] == "check"
    script = next(s for s in report["jobs"]["comment"]["steps"] if "script" in s.get("with", {}))
    assert "updateComment" in script["with"]["script"] and "createComment" in script["with"]["script"]
    inventory = load(GITHUB["inventory"])
    assert inventory["jobs"]["inventory"]["permissions"] == {}
    assert "secrets.DRA_READER_KUBECONFIG" in GITHUB["inventory"].read_text()
    assert "schedule" in on(inventory) and "workflow_dispatch" in on(inventory)


def test_gitlab_pipeline_shape() -> None:
    config = load(GITLAB)
    assert config["stages"] == ["check", "plan", "approve", "deploy", "verify", "rollback"]
    report = config["policy-report"]["artifacts"]
    assert report["when"] == "always"
    assert report["reports"] == {
        "codequality": "gl-code-quality-report.json",
        "junit": "dra-gitops-junit.xml",
    }
    assert config["approve"]["rules"][0]["when"] == "manual" and config["approve"]["allow_failure"] is False
    assert config["deploy"]["needs"] == ["plan", "approve"]
    assert config["deploy"]["environment"]["name"] == "production"
    assert config["rollback"]["rules"][0]["when"] == "on_failure"
    assert config["rollback"]["needs"] == ["plan", "deploy"]
    assert config["inventory"]["variables"]["KUBECONFIG"] == "$DRA_READER_KUBECONFIG"
    assert config["verify"]["variables"]["KUBECONFIG"] == "$DRA_READER_KUBECONFIG"


def test_extraction_joins_continuations_and_cuts_redirections() -> None:
    script = (
        'dra-gitops check --repo . --base "$BASE" -q \\\n  -o markdown > r.md || [ $? -eq 1 ]\n'
        "echo dra-gitops is not a command here\n"
        "  dra-gitops inventory -o json | tee x  # comment\n"
    )
    assert dra_commands(script) == [
        'dra-gitops check --repo . --base "$BASE" -q -o markdown',
        "dra-gitops inventory -o json",
    ]
    assert expand('a ${X:+--base "$X"} ${Y:-d} $Z', {"X": "1", "Y": ""}) == ["a", "--base", "1", "d", "\x00"]
    assert expand("a ${X:+--base $X}", {"X": ""}) == ["a"]
    assert matches(["check", "\x00"], ["check", "abc"]) and not matches(["check"], ["plan"])


def test_every_pipeline_calls_the_commands_it_documents() -> None:
    subcommands = {
        path.name if path == GITLAB else path.stem: [
            c.split()[1] for s in scripts(path) for c in dra_commands(s)
        ]
        for path in [*GITHUB.values(), GITLAB]
    }
    assert subcommands["policy-report"] == ["check"] * 4
    assert subcommands["inventory"] == ["inventory"] * 2
    assert subcommands["deploy"] == [
        "check",
        "check",
        "plan",
        "apply",
        "diagnose",
        "inventory",
        "rollback",
        "status",
    ]
    assert subcommands[".gitlab-ci.yml"] == ["check"] * 4 + ["inventory"] * 3 + [
        "check",
        "check",
        "plan",
        "apply",
        "diagnose",
        "inventory",
        "rollback",
        "status",
    ]


def test_github_promote_shape() -> None:
    workflow = load(GITHUB["promote"])
    text = GITHUB["promote"].read_text()
    assert set(on(workflow)) == {"status"}
    jobs = workflow["jobs"]
    # One approval at a time; only jobs that run take part (other statuses start runs that skip it).
    assert "concurrency" not in workflow
    assert jobs["approve"]["concurrency"]["cancel-in-progress"] is False
    assert set(jobs) == {"approve", "outcome"}
    approve, outcome = jobs["approve"], jobs["outcome"]
    # Only a success of staging's status starts it; the reviewers of `production` are the human gate.
    assert "github.event.context == 'dra-gitops/staging'" in approve["if"]
    assert "github.event.state == 'success'" in approve["if"]
    assert approve["environment"] == "production" and "environment" not in outcome
    assert workflow["env"]["SHA"] == "${{ github.event.sha }}"
    # The operator's credentials only where the approval is written; the outcome is read-only.
    assert "secrets.DRA_OPERATOR_KUBECONFIG" in str(approve["steps"])
    assert "secrets.DRA_OPERATOR_KUBECONFIG" not in str(outcome["steps"])
    assert "secrets.DRA_READER_KUBECONFIG" in str(outcome["steps"])
    assert outcome["needs"] == "approve"
    approve_step = next(s for s in approve["steps"] if "dra-gitops approve" in s.get("run", ""))
    assert approve_step["if"] == "${{ steps.gate.outputs.verdict == 'awaiting' }}"
    assert text.count('--config "$TARGETS_CONFIG" --target "$TARGET"') == 4


def test_gitlab_promote_shape() -> None:
    config = load(GITLAB_PROMOTE)
    assert config["stages"] == ["staging", "production"]
    job = config["approve-production"]
    assert job["rules"][0]["when"] == "manual" and job["allow_failure"] is False
    assert job["environment"]["name"] == "production" and job["resource_group"] == "production"
    assert job["needs"] == ["staging-verified"]
    assert job["variables"]["KUBECONFIG"] == "$DRA_OPERATOR_KUBECONFIG"
    assert config["staging-verified"]["variables"]["KUBECONFIG"] == "$DRA_READER_KUBECONFIG"
    assert config["staging-verified"]["extends"] == ".promotion"
    assert "when" not in config[".promotion"]["rules"][0]  # waits for staging unattended


def test_promote_pipelines_call_the_commands_they_document() -> None:
    subcommands = {
        path.name: [c.split()[1] for s in scripts(path) for c in dra_commands(s)]
        for path in (GITHUB["promote"], GITLAB_PROMOTE)
    }
    assert subcommands == {
        "promote.yml": ["status", "status", "approve", "status", "status"],
        "promote.gitlab-ci.yml": ["status", "status", "status", "approve", "status", "status"],
    }
