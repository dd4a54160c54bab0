"""Run Rego unit tests (`test_*` rules in `*_test.rego` files) with the embedded engine.

The same convention as `opa test`: every rule whose name starts with `test_` in any loaded module is a
test; it passes when it evaluates to `true`, fails when it is undefined or anything else, and is an
error when evaluation raises (a builtin type error, a conflict, ...). Every module and `data.json` under
the given directories is loaded, so tests see the rules they import and the default params.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reconciler.policy.engine import Module, load_policy_set, rego_error

Status = Literal["pass", "fail", "error"]

# A rule head starts in column 0: `test_x if {`, `test_x := ...`, `test_x contains ...`.
_TEST_RULE_RE = re.compile(r"^(test_[A-Za-z0-9_]*)\b", re.MULTILINE)


@dataclass(frozen=True)
class PolicyTest:
    """One `test_*` rule: its package, name and where it is defined (first definition)."""

    package: str
    name: str
    path: str
    line: int

    @property
    def query(self) -> str:
        return f"data.{self.package}.{self.name}"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class PolicyTestResult:
    test: PolicyTest
    status: Status
    message: str = ""  # why it failed or errored; empty on pass
    duration: float = 0.0  # seconds

    @property
    def passed(self) -> bool:
        return self.status == "pass"


@dataclass
class TestReport:
    results: list[PolicyTestResult] = field(default_factory=list)
    files: list[str] = field(default_factory=list)  # every Rego file loaded

    __test__ = False  # not a pytest test class

    @property
    def passed(self) -> list[PolicyTestResult]:
        return [r for r in self.results if r.status == "pass"]

    @property
    def failed(self) -> list[PolicyTestResult]:
        return [r for r in self.results if r.status == "fail"]

    @property
    def errors(self) -> list[PolicyTestResult]:
        return [r for r in self.results if r.status == "error"]

    @property
    def ok(self) -> bool:
        return bool(self.results) and all(r.passed for r in self.results)

    def summary(self) -> str:
        """`N passed, M failed` (errors count as failed), the closing line of `dra-gitops policy test`."""
        return f"{len(self.passed)} passed, {len(self.failed) + len(self.errors)} failed"


def discover_tests(modules: Sequence[Module]) -> list[PolicyTest]:
    """`test_*` rules of the modules, once per package and name, in file order."""
    seen: set[tuple[str, str]] = set()
    tests: list[PolicyTest] = []
    for module in modules:
        for match in _TEST_RULE_RE.finditer(module.text):
            key = (module.package, match.group(1))
            if key in seen:
                continue  # a rule defined by several bodies is one test
            seen.add(key)
            line = module.text.count("\n", 0, match.start()) + 1
            tests.append(PolicyTest(module.package, match.group(1), module.path, line))
    return tests


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "evaluation failed"
    error_lines = [line for line in lines if line.startswith("error:")]
    location = next((line.strip() for line in lines if line.strip().startswith("-->")), "")
    message = (error_lines[-1] if error_lines else lines[-1]).removeprefix("error:").strip()
    return f"{location.removeprefix('-->').strip()}: {message}" if location else message


def _run_one(engine: Any, test: PolicyTest) -> PolicyTestResult:
    started = time.perf_counter()
    try:
        value = engine.eval_rule(test.query)
    except RuntimeError as exc:
        return PolicyTestResult(test, "error", _first_line(str(exc)), time.perf_counter() - started)
    elapsed = time.perf_counter() - started
    if value is True:
        return PolicyTestResult(test, "pass", "", elapsed)
    if value is None:
        return PolicyTestResult(test, "fail", "undefined (some expression in the body was false)", elapsed)
    return PolicyTestResult(test, "fail", f"evaluated to {value!r}, not true", elapsed)


def run_policy_tests(dirs: list[Path], filter: str | None = None) -> TestReport:
    """Load every module, test module and `data.json` under `dirs` and run the `test_*` rules.

    `filter` is a regular expression searched in `package.test_name` (like `opa test --run`).
    A module that does not parse raises `PolicyError` whose message starts with `file:line:col`.
    """
    import regorus  # imported here so importing this module stays cheap

    policy_set = load_policy_set(dirs, include_bundled=False)
    engine = regorus.Engine()
    engine.set_rego_v0(False)
    modules = [*policy_set.modules, *policy_set.tests]
    for module in modules:
        try:
            engine.add_policy(module.path, module.text)
        except RuntimeError as exc:
            raise rego_error(exc) from None
    engine.add_data_json(json.dumps({"params": policy_set.params}))

    pattern = re.compile(filter) if filter else None
    tests = [t for t in discover_tests(modules) if pattern is None or pattern.search(f"{t.package}.{t.name}")]
    report = TestReport(files=sorted(m.path for m in modules))
    report.results = [_run_one(engine, test) for test in tests]
    return report
