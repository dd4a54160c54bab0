"""The known OPA-vs-regorus differences (docs/policy-guide.md, "OPA and the embedded engine"): each is
accepted by the embedded engine and reported by `policy test` with what OPA says; the bundled pack and the
example have none. Packages are read by the parser, whatever their spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.policy.bundle import entrypoint_module
from reconciler.policy.compat import check_compatibility
from reconciler.policy.engine import EmbeddedEngine, load_policy_set, rule_packages
from reconciler.policy.testing import run_policy_tests

REPO = Path(__file__).resolve().parents[2]

# code: (module text, the line reported). Each one regorus loads and evaluates without complaint.
DIFFERENCES = {
    "object-comprehension-over-literal": (
        'package dra.t\n\nkinds(v) := {k: v | some k in ["a", "b"]}\n\nx := kinds(1)\n',
        3,
    ),
    "unused-import": ("package dra.t\n\nimport data.dra.other\n\nx := 1\n", 3),
    "unused-assignment": ("package dra.t\n\nx if {\n\tunused := 1\n\tinput.a == 2\n}\n", 4),
    "removed-builtin": ("package dra.t\n\nx if {\n\tinput.never\n\tany([true])\n}\n", 5),
    "undefined-function": ("package dra.t\n\nx if {\n\tinput.never\n\tnosuch(1)\n}\n", 5),
    "function-arity": ("package dra.t\n\nf(a) := a\n\nx if {\n\tinput.never\n\tf(1, 2)\n}\n", 7),
    "outside-bundle-root": ("package lib.t\n\nx := 1\n", 1),
    "shadowed-input-data": ("package dra.t\n\nf(data) := data\n\nx := f(1)\n", 3),
}


@pytest.mark.parametrize("code", sorted(DIFFERENCES))
def test_each_known_difference_is_reported_where_it_is(code: str, tmp_path: Path) -> None:
    text, line = DIFFERENCES[code]
    (tmp_path / "t.rego").write_text(text)
    policy_set = load_policy_set([tmp_path], include_bundled=False)
    engine = EmbeddedEngine(policy_set)  # the embedded engine accepts it...
    engine.evaluate({"objects": [], "base_objects": []})
    found = check_compatibility([tmp_path])  # ...OPA would not
    assert [(d.code, d.where) for d in found] == [(code, f"{policy_set.modules[0].path}:{line}")], found
    assert found[0].opa_says


def test_the_bundled_pack_and_the_example_have_none() -> None:
    assert check_compatibility([REPO / "policies", REPO / "examples" / "policies"]) == []


def test_policy_test_reports_them_and_fails(tmp_path: Path) -> None:
    (tmp_path / "t.rego").write_text(DIFFERENCES["unused-import"][0])
    (tmp_path / "t_test.rego").write_text("package dra.t_test\n\nimport data.dra.t\n\ntest_x if t.x == 1\n")
    assert run_policy_tests([tmp_path]).ok
    result = CliRunner().invoke(cli, ["policy", "test", str(tmp_path)])
    assert result.exit_code == 1, result.output
    assert "1 passed, 0 failed" in result.output
    assert "t.rego:3: OPA would refuse this (unused-import)" in result.output
    as_json = CliRunner().invoke(cli, ["policy", "test", str(tmp_path), "-o", "json"])
    document = json.loads(as_json.output)  # one document
    assert document["ok"] is False and document["opa_differences"][0]["code"] == "unused-import"


SPELLINGS = {
    "comment": "package dra.limits # the limits\n\ndeny contains 1 if input.big\n",
    "string": 'package dra["limits"]\n\ndeny contains 1 if input.big\n',
    "rule ref": "package dra\n\nlimits.deny contains 1 if input.big\n",
}


@pytest.mark.parametrize("spelling", sorted(SPELLINGS))
def test_every_package_spelling_is_one_rule_package(spelling: str, tmp_path: Path) -> None:
    (tmp_path / "limits.rego").write_text(SPELLINGS[spelling])
    policy_set = load_policy_set([tmp_path], include_bundled=False)
    assert rule_packages(policy_set) == [("dra", "limits")]
    found = EmbeddedEngine(policy_set).evaluate({"big": True, "objects": [], "base_objects": []})
    assert found == {"dra.limits": {"deny": [1], "warn": []}}
    assert "data.dra.limits.deny" in entrypoint_module(rule_packages(policy_set), "sha256:x")
