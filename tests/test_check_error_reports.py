"""`check -o FORMAT` when the check cannot run: stdout is still a valid report of that format that carries
the error (for the CI job that shows it), stderr the error line, and the exit code the error's."""

from __future__ import annotations

import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.errors import EnvironmentProblem, ManifestError, PolicyError, UserError
from reconciler.policy.report import FORMATS, render
from reconciler.policy.result import CheckError, error_result

REPO = Path(__file__).resolve().parents[1]
CM = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: default\n"
WHERE = "repo/helm/values.yaml"
MESSAGE = f"{WHERE}:2: not a Kubernetes object (no apiVersion, kind, metadata.name)"
GITLAB_SEVERITIES = {"info", "minor", "major", "critical", "blocker"}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "repo" / "helm").mkdir(parents=True)
    (tmp_path / "repo" / "a.yaml").write_text(CM)
    (tmp_path / "repo" / "helm" / "values.yaml").write_text("# values\nreplicaCount: 2\n")
    return tmp_path / "repo"


def check(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["check", "-q", *args])
    assert isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout, result.stderr


# --- what each format must hold ------------------------------------------------------------------------


def sarif_notifications(doc: dict[str, Any], exit_code: int) -> list[dict[str, Any]]:
    """The SARIF 2.1.0 properties a failed run needs (required ones checked by hand), its notifications."""
    assert doc["version"] == "2.1.0" and len(doc["runs"]) == 1
    run = doc["runs"][0]
    assert run["tool"]["driver"]["name"] == "dra-gitops"
    assert run["results"] == []
    (invocation,) = run["invocations"]
    assert invocation["executionSuccessful"] is False  # the invocation's one required property
    assert invocation["exitCode"] == exit_code
    notes = invocation["toolExecutionNotifications"]
    for note in notes:
        assert note["level"] == "error" and note["message"]["text"]
        for location in note.get("locations", []):
            physical = location["physicalLocation"]
            assert not physical["artifactLocation"]["uri"].startswith("/")
            assert physical.get("region", {"startLine": 1})["startLine"] >= 1
    return list(notes)


def junit_errors(text: str) -> list[ET.Element]:
    root = ET.fromstring(text)
    assert root.tag == "testsuites"
    cases = root.findall("testsuite/testcase")
    errors = root.findall("testsuite/testcase/error")
    assert root.get("errors") == str(len(errors)) and root.get("tests") == str(len(cases))
    for suite in root.findall("testsuite"):
        assert suite.get("errors") == str(len(suite.findall("testcase/error")))
    for error in errors:
        assert error.get("message") and error.get("type") and error.text
    return errors


def codeclimate_issues(text: str) -> list[dict[str, Any]]:
    issues = json.loads(text)
    assert isinstance(issues, list)
    for issue in issues:
        assert issue["type"] == "issue" and issue["check_name"] and issue["description"]
        assert issue["severity"] in GITLAB_SEVERITIES and issue["fingerprint"]
        assert issue["location"]["path"] and issue["location"]["lines"]["begin"] >= 1
    return list(issues)


# --- the check command ---------------------------------------------------------------------------------


def test_json_carries_an_errors_list(repo: Path) -> None:
    code, out, err = check("repo", "-o", "json")
    assert code == 1
    assert err.startswith(f"error: {MESSAGE}; ")
    doc = json.loads(out)
    assert doc["summary"]["verdict"] == "Error" and doc["summary"]["exit_code"] == 1
    (error,) = doc["errors"]
    assert error["message"].startswith(MESSAGE) and "add `helm/values.yaml` to `exclude`" in error["message"]
    assert (error["path"], error["line"], error["kind"]) == (WHERE, 2, "NotAnObject")
    assert doc["findings"] == []


def test_sarif_is_a_failed_invocation_with_the_error_located(repo: Path) -> None:
    code, out, _ = check("repo", "-o", "sarif")
    assert code == 1
    (note,) = sarif_notifications(json.loads(out), 1)
    assert note["message"]["text"].startswith(MESSAGE)
    physical = note["locations"][0]["physicalLocation"]
    assert physical == {"artifactLocation": {"uri": WHERE}, "region": {"startLine": 2}}


def test_junit_has_an_error_case(repo: Path) -> None:
    code, out, _ = check("repo", "-o", "junit")
    assert code == 1
    (error,) = junit_errors(out)
    assert error.get("type") == "NotAnObject" and (error.text or "").startswith(MESSAGE)
    case = ET.fromstring(out).find("testsuite/testcase")
    assert case is not None and (case.get("file"), case.get("line")) == (WHERE, "2")


def test_github_annotates_the_file(repo: Path) -> None:
    code, out, _ = check("repo", "-o", "github")
    assert code == 1
    first, summary = out.splitlines()
    assert first.startswith(f"::error file={WHERE},line=2,title=dra-gitops could not check::{MESSAGE}")
    assert summary == "::notice title=dra-gitops policy check::Error: the check did not run: 1 error"


def test_codeclimate_has_a_blocker_issue(repo: Path) -> None:
    code, out, _ = check("repo", "-o", "codeclimate")
    assert code == 1
    (issue,) = codeclimate_issues(out)
    assert issue["severity"] == "blocker" and issue["description"].startswith(MESSAGE)
    assert issue["location"] == {"path": WHERE, "lines": {"begin": 2}}


def test_markdown_shows_an_error_section_and_no_pass(repo: Path) -> None:
    code, out, _ = check("repo", "-o", "markdown")
    assert code == 1
    assert "**Error** — the check did not run: 1 error." in out
    assert f"### Errors\n\n- {MESSAGE}" in out
    assert "No violations" not in out and "Passed" not in out


def test_text_keeps_the_error_on_stderr_alone(repo: Path) -> None:
    code, out, err = check("repo")
    assert (code, out) == (1, "")
    assert err.startswith(f"error: {MESSAGE}; ") and err.count("\n") == 1


def test_an_error_without_a_file_and_an_environment_problem(repo: Path, tmp_path: Path) -> None:
    # An unknown revision (no commit yet) names the repository, not a file: no location, still reported.
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    code, out, _ = check("--repo", str(repo), "--base", "nope", "-o", "sarif")
    assert code == 1
    (note,) = sarif_notifications(json.loads(out), 1)
    assert "unknown revision 'HEAD'" in note["message"]["text"] and "locations" not in note
    # The cluster cannot be reached: exit 4, and the reports say 4 too.
    missing = str(tmp_path / "no-kubeconfig")
    code, out, _ = check("repo", "--cluster", "--kubeconfig", missing, "-o", "sarif")
    assert code == 4
    (note,) = sarif_notifications(json.loads(out), 4)
    assert note["descriptor"]["id"] == "EnvironmentProblem"
    code, out, _ = check("repo", "--cluster", "--kubeconfig", missing, "-o", "json")
    assert code == 4 and json.loads(out)["summary"]["exit_code"] == 4


def test_a_real_process_writes_the_report_to_stdout(repo: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "check", "-q", str(repo), "-o", "junit"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=120,
    )
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert len(junit_errors(done.stdout)) == 1
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1


# --- the renderers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exc", "path", "line"),
    [
        (ManifestError("invalid YAML", where="a/b.yaml:3:7"), "a/b.yaml", 3),
        (
            UserError("`paths` entry x leaves the repository", where="r/dra-gitops.yaml"),
            "r/dra-gitops.yaml",
            0,
        ),
        (PolicyError("rego_parse_error", where="p/rule.rego:4:1"), "p/rule.rego", 4),
        (EnvironmentProblem("connection refused", where="http://127.0.0.1:8181"), "", 0),
        (UserError("not a Git repository", where="/tmp/x"), "", 0),
        (  # a rendered object: reports point at the file it came from
            ManifestError("bad stage", where="overlays/prod/kustomization.yaml from base/trainer.yaml:3"),
            "base/trainer.yaml",
            3,
        ),
    ],
)
def test_an_error_is_located_only_at_a_file(exc: UserError, path: str, line: int) -> None:
    error = CheckError.of(exc)
    assert (error.path, error.line, error.message, error.exit_code) == (path, line, str(exc), exc.exit_code)


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_renders_an_error_result(fmt: str) -> None:
    text = render(
        error_result(ManifestError("file is 9 bytes, over the 1-byte limit", where="x.yaml:1")), fmt
    )
    assert "x.yaml:1: file is 9 bytes" in text
    if fmt in ("json", "sarif", "codeclimate"):
        json.loads(text)
    if fmt == "junit":
        junit_errors(text)
