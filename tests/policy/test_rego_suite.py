"""The bundled policy pack: layout, metadata, and its Rego unit tests run through the embedded engine."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from reconciler.errors import PolicyError
from reconciler.policy.testing import run_policy_tests

POLICIES = Path(__file__).resolve().parents[2] / "policies"
RULE_DIRS = sorted(p for p in POLICIES.iterdir() if p.is_dir())
EXPECTED_RULES = {
    "capacity",
    "class-change",
    "admin-access",
    "claim-refs",
    "class-before-template",
    "driver-canary",
    "immutable-claim",
    "no-delete-in-use",
    "served-versions",
}


def metadata_block(text: str) -> dict[str, object]:
    lines = text.splitlines()
    start = lines.index("# METADATA")
    block = []
    for line in lines[start + 1 :]:
        if not line.startswith("#"):
            break
        block.append(line[2:] if line.startswith("# ") else line[1:])
    data = yaml.safe_load("\n".join(block))
    assert isinstance(data, dict)
    return data


def test_bundled_suite_passes() -> None:
    report = run_policy_tests([POLICIES])
    problems = [
        f"{r.test.where} {r.test.name}: {r.status}: {r.message}" for r in report.results if not r.passed
    ]
    assert problems == []
    assert len(report.results) >= 7 * 5
    assert report.ok
    assert report.summary() == f"{len(report.results)} passed, 0 failed"


def test_every_rule_has_tests() -> None:
    report = run_policy_tests([POLICIES])
    packages = {r.test.package for r in report.results}
    assert packages == {f"dra.{rule.replace('-', '_')}_test" for rule in EXPECTED_RULES}


def test_bundled_rules_are_the_documented_ones() -> None:
    assert {p.name for p in RULE_DIRS} == EXPECTED_RULES
    readme = (POLICIES / "README.md").read_text(encoding="utf-8")
    for rule in EXPECTED_RULES:
        assert f"`{rule}`" in readme


@pytest.mark.parametrize("rule_dir", RULE_DIRS, ids=lambda p: p.name)
def test_rule_layout_and_metadata(rule_dir: Path) -> None:
    stem = rule_dir.name.replace("-", "_")
    rule_file = rule_dir / f"{stem}.rego"
    test_file = rule_dir / f"{stem}_test.rego"
    assert rule_file.is_file() and test_file.is_file()

    text = rule_file.read_text(encoding="utf-8")
    assert text.startswith("# METADATA\n"), "the package-level METADATA block comes first"
    meta = metadata_block(text)
    assert meta.get("title") and meta.get("description")
    custom = meta.get("custom")
    assert isinstance(custom, dict)
    assert custom.get("id") == rule_dir.name
    assert custom.get("severity") in {"deny", "warn"}
    assert re.search(rf"^package dra\.{stem}$", text, re.MULTILINE)
    assert f'rule_id := "{rule_dir.name}"' in text
    assert "import rego.v1" not in text

    test_text = test_file.read_text(encoding="utf-8")
    assert re.search(rf"^package dra\.{stem}_test$", test_text, re.MULTILINE)
    assert f"import data.dra.{stem}\n" in test_text


def test_filter_on_bundled_suite() -> None:
    report = run_policy_tests([POLICIES], filter="dra.admin_access_test.")
    assert report.ok
    assert all(r.test.package == "dra.admin_access_test" for r in report.results)


# --- the runner itself ------------------------------------------------------------------------------


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


RULE = """package dra.sample

deny contains msg if {
\tsome obj in input.objects
\tobj.kind == "Bad"
\tmsg := "bad"
}
"""


def test_failing_and_erroring_tests_are_reported(tmp_path: Path) -> None:
    write(tmp_path / "sample" / "sample.rego", RULE)
    test_file = write(
        tmp_path / "sample" / "sample_test.rego",
        "package dra.sample_test\n"
        "\n"
        "import data.dra.sample\n"
        "\n"
        "test_good_passes if {\n"
        '\tcount(sample.deny) == 0 with input as {"objects": [{"kind": "Good"}]}\n'
        "}\n"
        "\n"
        "test_deliberately_wrong if {\n"
        '\tcount(sample.deny) == 0 with input as {"objects": [{"kind": "Bad"}]}\n'
        "}\n"
        "\n"
        "test_type_error if {\n"
        '\tobject.get(null, "x", 1) == 1\n'
        "}\n"
        "\n"
        "test_not_boolean := 5\n",
    )
    report = run_policy_tests([tmp_path])
    by_name = {r.test.name: r for r in report.results}
    assert set(by_name) == {
        "test_good_passes",
        "test_deliberately_wrong",
        "test_type_error",
        "test_not_boolean",
    }
    assert by_name["test_good_passes"].status == "pass"
    wrong = by_name["test_deliberately_wrong"]
    assert wrong.status == "fail"
    assert wrong.test.line == 9
    assert wrong.test.where.endswith("sample_test.rego:9")
    assert by_name["test_type_error"].status == "error"
    assert "object.get" in by_name["test_type_error"].message
    assert by_name["test_not_boolean"].status == "fail"
    assert not report.ok
    assert (report.passed, report.failed, report.errors) == (1, 2, 1)
    assert report.summary() == "1 passed, 3 failed"
    text = report.render()
    assert "test_good_passes" not in text
    assert f"{wrong.test.where}: FAIL data.dra.sample_test.test_deliberately_wrong" in text
    assert "ERROR data.dra.sample_test.test_type_error" in text
    assert text.endswith("1 passed, 3 failed\n")
    assert "PASS data.dra.sample_test.test_good_passes" in report.render(verbose=True)
    as_json = report.to_json()
    assert as_json["summary"] == {"passed": 1, "failed": 2, "errors": 1, "total": 4}
    assert {t["name"]: t["status"] for t in as_json["tests"]}["test_type_error"] == "error"
    assert any(f.endswith("sample.rego") for f in report.files)
    assert str(test_file).endswith(wrong.test.path) or wrong.test.path.endswith("sample_test.rego")


def test_filter_selects_tests(tmp_path: Path) -> None:
    write(tmp_path / "t_test.rego", "package t_test\n\ntest_alpha if true\n\ntest_beta if true\n")
    assert [r.test.name for r in run_policy_tests([tmp_path], filter="beta").results] == ["test_beta"]
    assert run_policy_tests([tmp_path], filter="t_test.test_").summary() == "2 passed, 0 failed"


def test_no_tests_is_not_ok(tmp_path: Path) -> None:
    write(tmp_path / "p.rego", "package p\n\nallow if true\n")
    report = run_policy_tests([tmp_path])
    assert not report.ok
    assert report.render() == "no tests found\n0 passed, 0 failed\n"


def test_data_json_is_loaded(tmp_path: Path) -> None:
    write(tmp_path / "data.json", '{"params": {"limit": 3}}')
    write(tmp_path / "p_test.rego", "package p_test\n\ntest_param if data.params.limit == 3\n")
    assert run_policy_tests([tmp_path]).ok


def test_syntax_error_names_file_line_col(tmp_path: Path) -> None:
    bad = write(tmp_path / "bad" / "bad.rego", "package dra.bad\n\ndeny contains v if {\n\tv := \n}\n")
    with pytest.raises(PolicyError) as caught:
        run_policy_tests([tmp_path])
    message = str(caught.value)
    assert re.match(r"^(?P<file>.+):(?P<line>\d+):(?P<col>\d+): \S", message), message
    assert message.split(":")[0].endswith("bad.rego")
    assert Path(message.split(":")[0]).name == bad.name
    assert ":4:" in message  # the line of the incomplete assignment


def test_v0_syntax_is_a_syntax_error(tmp_path: Path) -> None:
    write(tmp_path / "old.rego", "package old\n\ndeny[msg] {\n\tmsg := 1\n}\n")
    with pytest.raises(PolicyError, match=r"old\.rego:3:\d+: "):
        run_policy_tests([tmp_path])


def test_invalid_data_json(tmp_path: Path) -> None:
    write(tmp_path / "data.json", "{broken")
    with pytest.raises(PolicyError, match=r"data\.json:1:2"):
        run_policy_tests([tmp_path])
