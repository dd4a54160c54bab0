"""Run Rego unit tests (`test_*` rules in `*_test.rego` files) with the embedded engine.

The same convention as `opa test`: every rule whose name starts with `test_` in any loaded module is a
test; it passes when it evaluates to `true`, fails when it is undefined or anything else, and is an
error when evaluation raises (a builtin type error, a conflict, ...). Every module and `data.json` under
the given directories is loaded, so tests see the rules they import and the default params.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from reconciler.errors import EnvironmentProblem
from reconciler.policy.engine import Module, PolicySet, load_policy_set, rego_error
from reconciler.policy.rego_ast import rego_ref

Status = Literal["pass", "fail", "error"]


@dataclass(frozen=True)
class PolicyTest:
    """One `test_*` rule: its package, name and where it is defined (first definition)."""

    package: str
    name: str
    path: str
    line: int
    rule_path: tuple[str, ...] = ()  # under `data`: the package's names, then the rule's

    @property
    def query(self) -> str:
        return rego_ref(self.rule_path) if self.rule_path else f"data.{self.package}.{self.name}"

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

    def with_status(self, status: Status) -> list[PolicyTestResult]:
        return [r for r in self.results if r.status == status]

    @property
    def passed(self) -> int:
        return len(self.with_status("pass"))

    @property
    def failed(self) -> int:
        return len(self.with_status("fail"))

    @property
    def errors(self) -> int:
        return len(self.with_status("error"))

    @property
    def ok(self) -> bool:
        """At least one test ran and every test passed."""
        return bool(self.results) and all(r.passed for r in self.results)

    def summary(self) -> str:
        """`N passed, M failed` (errors count as failed), the closing line of `dra-gitops policy test`."""
        return f"{self.passed} passed, {self.failed + self.errors} failed"

    def render(self, verbose: bool = False) -> str:
        """Text: every failure and error with `file:line`, passes too when verbose, then the summary."""
        lines: list[str] = []
        for result in self.results:
            if result.passed and not verbose:
                continue
            label = {"pass": "PASS", "fail": "FAIL", "error": "ERROR"}[result.status]
            millis = result.duration * 1000
            lines.append(f"{result.test.where}: {label} {result.test.query} ({millis:.1f}ms)")
            if result.message:
                lines.append(f"    {result.message}")
        if not self.results:
            lines.append("no tests found")
        lines.append(self.summary())
        return "\n".join(lines) + "\n"

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "summary": {
                "passed": self.passed,
                "failed": self.failed,
                "errors": self.errors,
                "total": len(self.results),
            },
            "files": list(self.files),
            "tests": [
                {
                    "package": r.test.package,
                    "name": r.test.name,
                    "path": r.test.path,
                    "line": r.test.line,
                    "status": r.status,
                    "message": r.message,
                    "duration_ms": round(r.duration * 1000, 3),
                }
                for r in self.results
            ],
        }


def discover_tests(modules: Sequence[Module]) -> list[PolicyTest]:
    """`test_*` rules of the modules (as the parser reads their heads), once per path, in file order."""
    seen: set[tuple[str, ...]] = set()
    tests: list[PolicyTest] = []
    for module in modules:
        for rule in module.rules:
            if not rule.path[-1].startswith("test_") or rule.kind != "single-value" or rule.path in seen:
                continue  # a rule defined by several bodies is one test
            seen.add(rule.path)
            package = ".".join(rule.path[:-1])
            tests.append(PolicyTest(package, rule.path[-1], module.path, rule.line, rule.path))
    return tests


def _first_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    if not lines:
        return "evaluation failed"
    error_lines = [line for line in lines if line.startswith("error:")]
    location = next((line.strip() for line in lines if line.strip().startswith("-->")), "")
    message = (error_lines[-1] if error_lines else lines[-1]).removeprefix("error:").strip()
    return f"{location.removeprefix('-->').strip()}: {message}" if location else message


Query = Callable[[tuple[str, ...]], Any]


def _run_one(query: Query, test: PolicyTest) -> PolicyTestResult:
    started = time.perf_counter()
    try:
        value = query(test.rule_path or (*test.package.split("."), test.name))
    except EnvironmentProblem:
        raise  # the engine is gone, not the test wrong
    except Exception as exc:  # noqa: BLE001 - an engine's evaluation error is this test's error
        return PolicyTestResult(test, "error", _first_line(str(exc)), time.perf_counter() - started)
    elapsed = time.perf_counter() - started
    if value is True:
        return PolicyTestResult(test, "pass", "", elapsed)
    if value is None:
        return PolicyTestResult(test, "fail", "undefined (some expression in the body was false)", elapsed)
    return PolicyTestResult(test, "fail", f"evaluated to {value!r}, not true", elapsed)


def run_tests_with(query: Query, policy_set: PolicySet, filter: str | None = None) -> TestReport:
    """Run the `test_*` rules of a loaded policy set through any engine.

    `query` takes a rule's path under `data` (`("dra", "claim_refs_test", "test_x")`) and returns its
    value, None when undefined; it raises when evaluation fails. `filter` keeps the tests whose
    `package.test_name` contains that text.
    """
    modules = [*policy_set.modules, *policy_set.tests]
    tests = [t for t in discover_tests(modules) if not filter or filter in f"{t.package}.{t.name}"]
    report = TestReport(files=sorted(m.path for m in modules))
    report.results = [_run_one(query, test) for test in tests]
    return report


def run_policy_tests(dirs: list[Path], filter: str | None = None) -> TestReport:
    """Load every module, test module and `data.json` under `dirs` and run the `test_*` rules embedded.

    `filter` keeps the tests whose `package.test_name` contains that text (`--run`).
    A module that does not parse raises `PolicyError` whose message starts with `file:line:col`.
    """
    import regorus  # imported here so importing this module stays cheap

    policy_set = load_policy_set(dirs, include_bundled=False)
    engine: Any = regorus.Engine()
    try:
        engine.set_rego_v0(False)
        for module in [*policy_set.modules, *policy_set.tests]:
            try:
                engine.add_policy(module.path, module.text)
            except RuntimeError as exc:
                raise rego_error(exc) from exc
        engine.add_data_json(json.dumps({"params": policy_set.params}))

        def query(path: tuple[str, ...]) -> Any:
            return engine.eval_rule(rego_ref(path))

        return run_tests_with(query, policy_set, filter)
    finally:
        # Unsendable: dropped here, in this thread, not left in a traceback's frame (or `query`'s cell) for
        # the cyclic collector of another thread (see EmbeddedEngine).
        engine = None
