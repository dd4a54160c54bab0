"""Report renderers: concrete output for every format, on hand-built results."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import pytest

import reconciler
from reconciler.model.loader import SkippedFile
from reconciler.policy.report import FORMATS, RENDERERS, RenderOptions, render, summary_line, verdict
from reconciler.policy.result import ChangeSummary, CheckResult, Finding, RuleInfo

ANSI = re.compile(r"\x1b\[[0-9;]*m")
NASTY = "class gpu | a, b\nnext <&> 100%"

RULES = {
    "class-before-template": RuleInfo(
        id="class-before-template",
        title="Classes exist before use",
        description="Every class a claim needs exists first.",
        severity="deny",
        source="policies/class-before-template/class-before-template.rego",
    ),
    "served-versions": RuleInfo(
        id="served-versions",
        title="Served versions",
        description="Use resource.k8s.io versions the cluster serves.",
        severity="warn",
        source="policies/served-versions/served-versions.rego",
    ),
    "admin-access": RuleInfo(
        id="admin-access",
        title="Admin access",
        description="adminAccess only in labelled namespaces.",
        severity="deny",
        source="policies/admin-access/admin-access.rego",
    ),
}

DENY = Finding(
    rule="class-before-template",
    severity="deny",
    msg=NASTY,
    ref="ResourceClaimTemplate/ml/gpu-tpl",
    path="manifests/b.yaml",
    line=12,
)
WARN = Finding(
    rule="served-versions",
    severity="warn",
    msg="resource.k8s.io/v1beta1 is deprecated",
    ref="ResourceClaim/ml/c1",
    path="manifests/a.yaml",
    line=4,
)
WAIVED = Finding(
    rule="admin-access",
    severity="deny",
    msg="adminAccess in namespace ml",
    ref="ResourceClaim/ml/admin",
    path="manifests/b.yaml",
    line=3,
    waived="approved by SRE, ticket 42",
)


def make_result(*findings: Finding, rules: dict[str, RuleInfo] | None = None) -> CheckResult:
    # Findings are deliberately passed out of order: every renderer must sort them.
    return CheckResult(
        findings=list(findings),
        rules=RULES if rules is None else rules,
        objects_checked=3,
        files_checked=2,
        changes=ChangeSummary(create=1, update=2, delete=0),
    )


@pytest.fixture
def result() -> CheckResult:
    return make_result(DENY, WARN, WAIVED)


@pytest.fixture
def empty() -> CheckResult:
    return CheckResult(findings=[], rules={}, objects_checked=0, files_checked=0)


# ---------------------------------------------------------------------------------------------- registry


def test_registry_covers_every_format() -> None:
    assert FORMATS == ("text", "json", "markdown", "sarif", "junit", "github", "codeclimate")
    assert set(RENDERERS) == set(FORMATS)


def test_unknown_format_is_rejected(result: CheckResult) -> None:
    with pytest.raises(ValueError, match="yaml"):
        render(result, "yaml")


def test_default_options() -> None:
    o = RenderOptions()
    assert (o.color, o.fail_on_warn, o.tool_version) == (False, False, reconciler.__version__)
    assert o.title == "dra-gitops policy check"


@pytest.mark.parametrize("fmt", FORMATS)
def test_rendering_is_deterministic_regardless_of_input_order(fmt: str) -> None:
    a = render(make_result(DENY, WARN, WAIVED), fmt)
    b = render(make_result(WAIVED, WARN, DENY), fmt)
    assert a == b


@pytest.mark.parametrize("fmt", FORMATS)
def test_empty_result_renders_in_every_format(fmt: str, empty: CheckResult) -> None:
    out = render(empty, fmt)
    assert out.endswith("\n")
    assert out.strip()


def test_verdict_and_summary_line(result: CheckResult) -> None:
    assert verdict(result) == "Denied"
    assert verdict(make_result(WARN)) == "Passed with warnings"
    assert verdict(make_result(WARN), fail_on_warn=True) == "Denied"
    assert verdict(make_result(WAIVED)) == "Passed"
    assert summary_line(result) == "3 objects, 2 files: 1 denied, 1 warning, 1 waived"
    single = CheckResult(findings=[WARN, WARN], rules=RULES, objects_checked=1, files_checked=1)
    assert summary_line(single) == "1 object, 1 file: 0 denied, 2 warnings, 0 waived"


# ---------------------------------------------------------------------------------------------- text


def test_text_groups_by_file_sorted_and_lists_waivers(result: CheckResult) -> None:
    out = render(result, "text")
    assert not ANSI.search(out)
    lines = out.splitlines()
    assert lines[0] == "manifests/a.yaml"
    assert lines[1] == "  WARN manifests/a.yaml:4  served-versions  ResourceClaim/ml/c1: " + WARN.msg
    assert lines[3] == "manifests/b.yaml"
    # The waived finding of b.yaml (line 3) is not in the file group, only in "Waived".
    assert (
        lines[4] == "  FAIL manifests/b.yaml:12  class-before-template  "
        "ResourceClaimTemplate/ml/gpu-tpl: class gpu | a, b"
    )
    assert lines[5] == "      next <&> 100%"
    waived_at = lines.index("Waived")
    assert lines[waived_at + 1] == (
        "  WAIVED manifests/b.yaml:3  admin-access  ResourceClaim/ml/admin: adminAccess in namespace ml"
        "  (waived: approved by SRE, ticket 42)"
    )
    assert sum("admin-access" in line for line in lines) == 1
    assert lines[-1] == "3 objects, 2 files: 1 denied, 1 warning, 1 waived (denied)"


def test_text_colour_only_when_asked(result: CheckResult) -> None:
    out = render(result, "text", RenderOptions(color=True))
    assert "\x1b[31m  FAIL manifests/b.yaml:12" in out
    assert "\x1b[33m  WARN manifests/a.yaml:4" in out
    assert "\x1b[2m  WAIVED manifests/b.yaml:3" in out
    assert ANSI.sub("", out) == render(result, "text")


def test_text_finding_without_file_uses_ref() -> None:
    f = Finding(rule="served-versions", severity="warn", msg="m", ref="DeviceClass/gpu", path="", line=0)
    out = render(make_result(f), "text")
    assert "(no file)\n  WARN DeviceClass/gpu  served-versions  DeviceClass/gpu: m\n" in out


def test_text_empty(empty: CheckResult) -> None:
    assert render(empty, "text") == "0 objects, 0 files: 0 denied, 0 warnings, 0 waived (passed)\n"


# ---------------------------------------------------------------------------------------------- json


def test_json_round_trip_and_ordering(result: CheckResult) -> None:
    doc = json.loads(render(result, "json"))
    assert list(doc) == [
        "summary",
        "errors",
        "findings",
        "waivers",
        "skipped",
        "not_inspected",
        "not_validated",
        "settings_changes",
        "rules",
    ]
    assert (doc["summary"]["skipped"], doc["skipped"]) == (0, [])
    assert (doc["summary"]["errors"], doc["errors"]) == (0, [])
    s = doc["summary"]
    assert (s["objects"], s["files"], s["denied"], s["warnings"], s["waived"]) == (3, 2, 1, 1, 1)
    assert s["changes"] == {"create": 1, "update": 2, "delete": 0}
    assert s["engine"] == "embedded"
    assert s["exit_code"] == 1
    assert s["verdict"] == "Denied"
    assert [(f["path"], f["line"]) for f in doc["findings"]] == [
        ("manifests/a.yaml", 4),
        ("manifests/b.yaml", 3),
        ("manifests/b.yaml", 12),
    ]
    rebuilt = [Finding(**f) for f in doc["findings"]]
    assert rebuilt == [WARN, WAIVED, DENY]
    assert doc["findings"][2]["msg"] == NASTY
    assert doc["waivers"] == [
        {
            "rule": "admin-access",
            "severity": "deny",
            "ref": "ResourceClaim/ml/admin",
            "path": "manifests/b.yaml",
            "line": 3,
            "reason": "approved by SRE, ticket 42",
            "msg": "adminAccess in namespace ml",
        }
    ]
    assert list(doc["rules"]) == ["admin-access", "class-before-template", "served-versions"]
    assert doc["rules"]["served-versions"] == {
        "title": "Served versions",
        "description": "Use resource.k8s.io versions the cluster serves.",
        "severity": "warn",
        "source": "policies/served-versions/served-versions.rego",
    }


def test_json_exit_code_follows_fail_on_warn() -> None:
    warn_only = make_result(WARN)
    assert json.loads(render(warn_only, "json"))["summary"]["exit_code"] == 0
    doc = json.loads(render(warn_only, "json", RenderOptions(fail_on_warn=True)))
    assert doc["summary"]["exit_code"] == 1
    assert doc["summary"]["fail_on_warn"] is True


def test_json_rule_without_metadata_is_still_listed() -> None:
    doc = json.loads(render(make_result(WARN, rules={}), "json"))
    assert doc["rules"]["served-versions"]["severity"] == "warn"


def test_json_empty(empty: CheckResult) -> None:
    doc = json.loads(render(empty, "json"))
    assert doc["findings"] == [] and doc["waivers"] == [] and doc["rules"] == {}
    assert doc["summary"]["exit_code"] == 0


# ---------------------------------------------------------------------------------------------- markdown


def _table_rows(md: str, header: str) -> list[str]:
    lines = md.splitlines()
    start = lines.index(header)
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def test_markdown_verdict_and_summary_table(result: CheckResult) -> None:
    md = render(result, "markdown")
    assert md.startswith("## dra-gitops policy check\n")
    assert "**Denied**" in md
    rows = _table_rows(md, "| Rule | Title | Denied | Warnings | Waived |")
    assert rows == [
        "| `admin-access` | Admin access | 0 | 0 | 1 |",
        "| `class-before-template` | Classes exist before use | 1 | 0 | 0 |",
        "| `served-versions` | Served versions | 0 | 1 | 0 |",
    ]


def test_markdown_violations_escape_pipes_and_newlines(result: CheckResult) -> None:
    md = render(result, "markdown")
    rows = _table_rows(md, "| Severity | Location | Rule | Object | Message |")
    assert len(rows) == 2
    assert rows[0].startswith("| warn | `manifests/a.yaml:4` | `served-versions` |")
    deny = rows[1]
    assert deny == (
        "| deny | `manifests/b.yaml:12` | `class-before-template` | `ResourceClaimTemplate/ml/gpu-tpl` | "
        "class gpu \\| a, b<br>next \\<&amp;\\> 100% |"
    )
    # Exactly the 6 column separators: the message's own pipe is escaped.
    assert len(re.findall(r"(?<!\\)\|", deny)) == 6


def test_markdown_waivers_with_reasons(result: CheckResult) -> None:
    md = render(result, "markdown")
    assert "### Waivers" in md
    rows = _table_rows(md, "| Location | Rule | Object | Reason | Message |")
    assert rows == [
        "| `manifests/b.yaml:3` | `admin-access` | `ResourceClaim/ml/admin` | approved by SRE, ticket 42 | "
        "adminAccess in namespace ml |"
    ]


def test_markdown_code_cells_escape_pipes_and_backticks() -> None:
    f = Finding(rule="served-versions", severity="warn", msg="m", ref="Pod/a|b`c", path="x.yaml", line=1)
    md = render(make_result(f), "markdown")
    assert "| `served-versions` | `` Pod/a\\|b`c `` | m |" in md


def test_markdown_verdicts() -> None:
    assert "**Passed with warnings**" in render(make_result(WARN), "markdown")
    assert "**Passed**" in render(make_result(WAIVED), "markdown")


def test_markdown_empty(empty: CheckResult) -> None:
    md = render(empty, "markdown")
    assert "**Passed**" in md
    assert "No violations." in md
    assert "### Waivers" not in md


# ---------------------------------------------------------------------------------------------- sarif


def _check_sarif_shape(doc: dict[str, Any]) -> None:
    """The required properties of SARIF 2.1.0 that this tool emits, checked by hand."""
    assert doc["version"] == "2.1.0"
    assert doc["$schema"] == "https://json.schemastore.org/sarif-2.1.0.json"
    assert isinstance(doc["runs"], list) and len(doc["runs"]) == 1
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert isinstance(driver["name"], str) and driver["name"]
    rule_ids = [r["id"] for r in driver["rules"]]
    assert len(set(rule_ids)) == len(rule_ids)
    for r in driver["rules"]:
        assert isinstance(r["id"], str)
        assert isinstance(r["shortDescription"]["text"], str)
        assert isinstance(r["fullDescription"]["text"], str)
        assert r["defaultConfiguration"]["level"] in {"none", "note", "warning", "error"}
    for res in run["results"]:
        assert isinstance(res["message"]["text"], str) and res["message"]["text"]
        assert res["level"] in {"none", "note", "warning", "error"}
        assert 0 <= res["ruleIndex"] < len(driver["rules"])
        assert driver["rules"][res["ruleIndex"]]["id"] == res["ruleId"]
        for loc in res["locations"]:
            phys = loc.get("physicalLocation")
            if phys is not None:
                uri = phys["artifactLocation"]["uri"]
                assert "\\" not in uri and not uri.startswith("/")
                assert phys["region"]["startLine"] >= 1
                idx = phys["artifactLocation"]["index"]
                assert run["artifacts"][idx]["location"]["uri"] == uri
        for s in res["suppressions"]:
            assert s["kind"] in {"inSource", "external"}


def test_sarif_structure_and_results(result: CheckResult) -> None:
    doc = json.loads(render(result, "sarif", RenderOptions(tool_version="9.9.9")))
    _check_sarif_shape(doc)
    run = doc["runs"][0]
    driver = run["tool"]["driver"]
    assert (driver["name"], driver["version"]) == ("dra-gitops", "9.9.9")
    assert [r["id"] for r in driver["rules"]] == ["admin-access", "class-before-template", "served-versions"]
    cbt = driver["rules"][1]
    assert cbt["name"] == "ClassBeforeTemplate"
    assert cbt["shortDescription"]["text"] == "Classes exist before use"
    assert cbt["fullDescription"]["text"] == "Every class a claim needs exists first."
    assert cbt["defaultConfiguration"]["level"] == "error"
    assert driver["rules"][2]["defaultConfiguration"]["level"] == "warning"

    results = run["results"]
    assert len(results) == 3
    assert [(r["ruleId"], r["ruleIndex"], r["level"]) for r in results] == [
        ("served-versions", 2, "warning"),
        ("admin-access", 0, "error"),
        ("class-before-template", 1, "error"),
    ]
    deny = results[2]
    assert deny["message"]["text"] == f"ResourceClaimTemplate/ml/gpu-tpl: {NASTY}"
    loc = deny["locations"][0]
    assert loc["physicalLocation"]["artifactLocation"]["uri"] == "manifests/b.yaml"
    assert loc["physicalLocation"]["region"]["startLine"] == 12
    assert loc["logicalLocations"][0]["fullyQualifiedName"] == "ResourceClaimTemplate/ml/gpu-tpl"
    assert [a["location"]["uri"] for a in run["artifacts"]] == ["manifests/a.yaml", "manifests/b.yaml"]


def test_sarif_suppressions_only_on_waived(result: CheckResult) -> None:
    results = json.loads(render(result, "sarif"))["runs"][0]["results"]
    by_rule = {r["ruleId"]: r for r in results}
    assert by_rule["admin-access"]["suppressions"] == [
        {"kind": "inSource", "justification": "approved by SRE, ticket 42"}
    ]
    assert by_rule["class-before-template"]["suppressions"] == []
    assert by_rule["served-versions"]["suppressions"] == []


def test_sarif_line_zero_windows_path_and_missing_path() -> None:
    at_zero = Finding(
        rule="served-versions", severity="warn", msg="m", ref="R/a", path=".\\dir\\x.yaml", line=0
    )
    no_file = Finding(
        rule="served-versions", severity="warn", msg="m", ref="DeviceClass/gpu", path="", line=0
    )
    doc = json.loads(render(make_result(at_zero, no_file), "sarif"))
    _check_sarif_shape(doc)
    results = doc["runs"][0]["results"]
    assert "physicalLocation" not in results[0]["locations"][0]
    assert results[0]["locations"][0]["logicalLocations"][0]["fullyQualifiedName"] == "DeviceClass/gpu"
    phys = results[1]["locations"][0]["physicalLocation"]
    assert phys["artifactLocation"]["uri"] == "dir/x.yaml"
    assert phys["region"]["startLine"] == 1


def test_sarif_information_uri_and_unknown_rule() -> None:
    options = RenderOptions(information_uri="https://example.org/dra-gitops")
    doc = json.loads(render(make_result(WARN, rules={}), "sarif", options))
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["informationUri"] == "https://example.org/dra-gitops"
    assert driver["rules"][0]["id"] == "served-versions"
    assert "informationUri" not in json.loads(render(make_result(WARN), "sarif"))["runs"][0]["tool"]["driver"]


def test_sarif_empty(empty: CheckResult) -> None:
    doc = json.loads(render(empty, "sarif"))
    _check_sarif_shape(doc)
    assert doc["runs"][0]["results"] == []
    assert doc["runs"][0]["tool"]["driver"]["rules"] == []


# ---------------------------------------------------------------------------------------------- junit


def _suites(xml: str) -> tuple[ET.Element, dict[str, ET.Element]]:
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(xml.split("\n", 1)[1])
    return root, {s.get("name", ""): s for s in root.findall("testsuite")}


def test_junit_failures_and_skips(result: CheckResult) -> None:
    root, suites = _suites(render(result, "junit"))
    assert root.tag == "testsuites"
    assert (root.get("tests"), root.get("failures"), root.get("skipped"), root.get("errors")) == (
        "3",
        "1",
        "1",
        "0",
    )
    assert list(suites) == ["admin-access", "class-before-template", "served-versions"]
    assert len(root.findall(".//failure")) == 1
    assert len(root.findall(".//skipped")) == 1

    fail = suites["class-before-template"].find("testcase/failure")
    assert fail is not None
    assert fail.get("message") == NASTY  # newline, <&>, | and , survive the round trip
    assert fail.get("type") == "deny"
    case = suites["class-before-template"].find("testcase")
    assert case is not None
    assert (case.get("file"), case.get("line")) == ("manifests/b.yaml", "12")

    skipped = suites["admin-access"].find("testcase/skipped")
    assert skipped is not None
    assert skipped.get("message") == "waived: approved by SRE, ticket 42"
    assert suites["served-versions"].get("failures") == "0"
    assert suites["served-versions"].find("testcase/failure") is None


def test_junit_fail_on_warn_turns_warnings_into_failures(result: CheckResult) -> None:
    root, suites = _suites(render(result, "junit", RenderOptions(fail_on_warn=True)))
    assert root.get("failures") == "2"
    assert suites["served-versions"].get("failures") == "1"


def test_junit_clean_rule_gets_a_passed_case() -> None:
    root, suites = _suites(render(make_result(DENY), "junit"))
    cases = suites["served-versions"].findall("testcase")
    assert [c.get("name") for c in cases] == ["passed"]
    assert suites["served-versions"].get("tests") == "1"
    assert root.get("tests") == "3"


def test_junit_strips_characters_xml_cannot_carry() -> None:
    f = Finding(rule="served-versions", severity="warn", msg="bell\x07here", ref="R/a", path="a.yaml", line=1)
    _, suites = _suites(render(make_result(f), "junit", RenderOptions(fail_on_warn=True)))
    fail = suites["served-versions"].find("testcase/failure")
    assert fail is not None and fail.get("message") == "bell\ufffdhere"


def test_junit_empty(empty: CheckResult) -> None:
    root, suites = _suites(render(empty, "junit"))
    assert suites == {}
    assert (root.get("tests"), root.get("failures")) == ("0", "0")


# ---------------------------------------------------------------------------------------------- github


def test_github_commands_and_escaping(result: CheckResult) -> None:
    lines = render(result, "github").splitlines()
    assert lines == [
        "::warning file=manifests/a.yaml,line=4,title=served-versions::"
        "ResourceClaim/ml/c1: resource.k8s.io/v1beta1 is deprecated",
        "::notice file=manifests/b.yaml,line=3,title=admin-access (waived)::"
        "ResourceClaim/ml/admin: adminAccess in namespace ml (waived: approved by SRE, ticket 42)",
        "::error file=manifests/b.yaml,line=12,title=class-before-template::"
        "ResourceClaimTemplate/ml/gpu-tpl: class gpu | a, b%0Anext <&> 100%25",
        "::notice title=dra-gitops policy check::Denied: 3 objects, 2 files: 1 denied, 1 warning, 1 waived",
    ]


def test_github_property_escaping() -> None:
    f = Finding(rule="r:1,x", severity="deny", msg="a\r\nb", ref="R/a", path="we,ird:dir/x%.yaml", line=0)
    first = render(make_result(f), "github").splitlines()[0]
    assert first == "::error file=we%2Cird%3Adir/x%25.yaml,line=1,title=r%3A1%2Cx::R/a: a%0D%0Ab"


def test_github_empty(empty: CheckResult) -> None:
    assert render(empty, "github") == (
        "::notice title=dra-gitops policy check::Passed: 0 objects, 0 files: 0 denied, 0 warnings, 0 waived\n"
    )


def test_message_already_led_by_its_ref_is_not_prefixed_twice() -> None:
    f = Finding(
        rule="claim-refs", severity="deny", msg="Pod/ml/w: bad claim", ref="Pod/ml/w", path="p.yaml", line=3
    )
    for fmt in ("text", "github", "junit"):
        assert "Pod/ml/w: Pod/ml/w" not in render(make_result(f), fmt)
    sarif = json.loads(render(make_result(f), "sarif"))
    assert sarif["runs"][0]["results"][0]["message"]["text"] == "Pod/ml/w: bad claim"


# ----------------------------------------------------------------------------------- skipped files

SKIPPED = [
    SkippedFile("repo/.hidden/a.yaml", "in hidden directory .hidden"),
    SkippedFile("repo/zz, stray|.yaml", "outside the `paths` of repo/dra-gitops.yaml"),
]


@pytest.fixture
def with_skipped() -> CheckResult:
    result = make_result(WARN)
    result.skipped = list(SKIPPED)
    return result


def test_skipped_files_leave_the_verdict_and_exit_code_alone(with_skipped: CheckResult) -> None:
    assert (with_skipped.exit_code(), verdict(with_skipped)) == (0, "Passed with warnings")
    assert summary_line(with_skipped).startswith("3 objects, 2 files (2 skipped): ")


def test_text_lists_skipped_files_before_the_summary(with_skipped: CheckResult) -> None:
    out = render(with_skipped, "text")
    assert out.endswith(
        "Skipped (not checked, not applied)\n"
        "  SKIP repo/.hidden/a.yaml  in hidden directory .hidden\n"
        "  SKIP repo/zz, stray|.yaml  outside the `paths` of repo/dra-gitops.yaml\n"
        "\n"
        "3 objects, 2 files (2 skipped): 0 denied, 1 warning, 0 waived (passed with warnings)\n"
    )


def test_json_lists_skipped_files(with_skipped: CheckResult) -> None:
    doc = json.loads(render(with_skipped, "json"))
    assert doc["summary"]["skipped"] == 2
    assert doc["skipped"] == [{"path": s.path, "reason": s.reason} for s in SKIPPED]


def test_markdown_has_a_skipped_files_table(with_skipped: CheckResult) -> None:
    out = render(with_skipped, "markdown")
    assert "### Skipped files" in out
    assert "| `repo/.hidden/a.yaml` | in hidden directory .hidden |" in out
    assert "| `repo/zz, stray\\|.yaml` | outside the \\`paths\\` of repo/dra-gitops.yaml |" in out
    assert "### Skipped files" not in render(make_result(WARN), "markdown")


def test_sarif_notes_skipped_files_as_tool_notifications(with_skipped: CheckResult) -> None:
    run = json.loads(render(with_skipped, "sarif"))["runs"][0]
    assert len(run["results"]) == 1  # a skipped file is no finding
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert [n["level"] for n in notes] == ["note", "note"]
    assert (
        notes[1]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        == "repo/zz%2C%20stray%7C.yaml"
    )
    assert notes[0]["message"]["text"] == (
        "repo/.hidden/a.yaml: not checked and not applied (in hidden directory .hidden)"
    )
    assert run["properties"]["skippedFiles"][0] == {
        "path": "repo/.hidden/a.yaml",
        "reason": "in hidden directory .hidden",
    }
    assert "invocations" not in json.loads(render(make_result(WARN), "sarif"))["runs"][0]


def test_junit_has_a_skipped_case_per_skipped_file(with_skipped: CheckResult) -> None:
    root = ET.fromstring(render(with_skipped, "junit"))
    suite = root.find("testsuite[@name='skipped-files']")
    assert suite is not None
    assert (suite.get("tests"), suite.get("skipped"), suite.get("failures")) == ("2", "2", "0")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == [s.path for s in SKIPPED]
    assert [c.find("skipped").get("message") for c in cases] == [s.reason for s in SKIPPED]  # type: ignore[union-attr]
    assert root.get("skipped") == "2"


def test_github_annotates_each_skipped_file_with_a_notice(with_skipped: CheckResult) -> None:
    lines = render(with_skipped, "github").splitlines()
    assert lines[1] == (
        "::notice file=repo/.hidden/a.yaml,title=manifest file skipped::"
        "repo/.hidden/a.yaml: not checked and not applied (in hidden directory .hidden)"
    )
    assert lines[2].startswith("::notice file=repo/zz%2C stray|.yaml,title=manifest file skipped::")
    assert "(2 skipped)" in lines[-1]
