"""The Code Climate renderer (GitLab's code quality report): the fields GitLab requires, on real values."""

from __future__ import annotations

import json
from typing import Any

from reconciler.policy.report import RenderOptions, render
from reconciler.policy.result import CheckResult, Finding, RuleInfo

RULES = {
    "claim-refs": RuleInfo("claim-refs", "Claim refs", "Pod claims resolve.", "deny", "p/claim-refs.rego"),
    "capacity": RuleInfo("capacity", "Capacity", "Claims fit.", "warn", "p/capacity.rego"),
}
DENY = Finding("claim-refs", "deny", "template gpu missing", "Pod/ml/trainer", "40-workloads/t.yaml", 7)
WARN = Finding("capacity", "warn", "ResourceClaim/ml/c: 3 of 2 devices", "ResourceClaim/ml/c", "a\\b.yaml", 0)
WAIVED = Finding("claim-refs", "deny", "old pod", "Pod/ml/old", "40-workloads/old.yaml", 2, waived="ticket 7")
NO_FILE = Finding("capacity", "warn", "cluster-wide shortage", "DeviceClass/gpu", "", 0)


def issues(*findings: Finding, fail_on_warn: bool = False) -> list[dict[str, Any]]:
    result = CheckResult(findings=list(findings), rules=RULES, objects_checked=4, files_checked=3)
    doc = json.loads(render(result, "codeclimate", RenderOptions(fail_on_warn=fail_on_warn)))
    assert isinstance(doc, list)
    return doc


def test_every_issue_has_the_fields_gitlab_requires() -> None:
    found = issues(WARN, DENY, NO_FILE)
    for issue in found:
        assert set(issue) >= {"description", "check_name", "fingerprint", "severity", "location"}
        assert issue["type"] == "issue" and issue["engine_name"] == "dra-gitops"
        assert issue["severity"] in {"info", "minor", "major", "critical", "blocker"}
        assert isinstance(issue["location"]["path"], str) and issue["location"]["path"]
        assert (
            isinstance(issue["location"]["lines"]["begin"], int) and issue["location"]["lines"]["begin"] >= 1
        )
    # Ordered by path, then line: the file-less finding (path "") first, then a/b, then 40-workloads.
    assert [i["location"]["path"] for i in found] == ["DeviceClass/gpu", "40-workloads/t.yaml", "a/b.yaml"]


def test_denials_are_critical_warnings_minor_and_major_with_fail_on_warn() -> None:
    by_rule = {i["check_name"]: i for i in issues(DENY, WARN)}
    assert by_rule["claim-refs"]["severity"] == "critical"
    assert by_rule["claim-refs"]["description"] == "Pod/ml/trainer: template gpu missing"
    assert by_rule["claim-refs"]["location"] == {"path": "40-workloads/t.yaml", "lines": {"begin": 7}}
    assert by_rule["capacity"]["severity"] == "minor"
    # A message already led by its ref is not prefixed twice; line 0 becomes line 1.
    assert by_rule["capacity"]["description"] == "ResourceClaim/ml/c: 3 of 2 devices"
    assert by_rule["capacity"]["location"]["lines"]["begin"] == 1
    strict = {i["check_name"]: i["severity"] for i in issues(DENY, WARN, fail_on_warn=True)}
    assert strict == {"claim-refs": "critical", "capacity": "major"}


def test_waived_findings_are_not_issues_and_fingerprints_are_stable_and_distinct() -> None:
    found = issues(DENY, WAIVED, WARN)
    assert [i["check_name"] for i in found] == ["claim-refs", "capacity"]
    again = issues(WARN, DENY)
    assert [i["fingerprint"] for i in found] == [i["fingerprint"] for i in again]
    assert len({i["fingerprint"] for i in found}) == 2


def test_nothing_found_is_an_empty_array() -> None:
    assert issues() == []
    assert issues(WAIVED) == []
