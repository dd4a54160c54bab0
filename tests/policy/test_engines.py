"""Every failing fixture fails its rule, and the embedded and OPA-server engines agree on every case."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.delivery.check import CheckOptions, run_check
from reconciler.errors import EnvironmentProblem, PolicyError, UserError
from reconciler.model.loader import load_paths
from reconciler.policy.engine import load_policy_set
from reconciler.policy.inputdoc import ClusterFacts
from reconciler.policy.opa import OpaServerEngine, run_policy_tests_on_opa

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"


def fixture_cases() -> list[tuple[str, Path]]:
    cases = []
    for rule_dir in sorted(p for p in FIXTURES.iterdir() if p.is_dir()):
        for case in sorted(p for p in rule_dir.iterdir() if p.is_dir()):
            cases.append((rule_dir.name, case))
    return cases


CASES = fixture_cases()
BUNDLED_RULES = {p.name for p in (REPO / "policies").iterdir() if p.is_dir()}


def test_every_bundled_rule_has_failing_fixtures() -> None:
    assert {rule for rule, _ in CASES} == BUNDLED_RULES


def run_case(case: Path, opa_url: str | None) -> list[tuple[str, str, str, str, int]]:
    if (case / "head").is_dir() and (case / "base").is_dir():
        head = load_paths([case / "head"], display_root=case)
        base = load_paths([case / "base"], display_root=case)
    else:
        head_dir = case / "head" if (case / "head").is_dir() else case
        head, base = load_paths([head_dir], display_root=case), None
    cluster = None
    if (case / "cluster").is_dir():
        # Live objects for rules that need cluster data, as `check --cluster` would read them.
        live = load_paths([case / "cluster"], display_root=case).manifests
        cluster = ClusterFacts(version="v1.36.2", served={"resource.k8s.io": ["v1"]}, objects=live)
    run = run_check(head, base, CheckOptions(opa_url=opa_url), cluster=cluster)
    return [(f.rule, f.severity, f.ref, f.path, f.line) for f in run.result.findings]


@pytest.mark.parametrize(("rule", "case"), CASES, ids=[f"{r}/{c.name}" for r, c in CASES])
def test_fixture_fails_its_rule_on_both_engines(rule: str, case: Path, opa_url: str) -> None:
    embedded = run_case(case, None)
    assert rule in {finding[0] for finding in embedded}, embedded
    assert all(finding[3] and finding[4] >= 1 for finding in embedded if finding[0] == rule)
    assert run_case(case, opa_url) == embedded


def test_example_repository_passes_on_both_engines(opa_url: str) -> None:
    head = load_paths([REPO / "manifests-example"], display_root=REPO)
    for url in (None, opa_url):
        run = run_check(head, None, CheckOptions(opa_url=url))
        assert run.result.findings == []
        assert run.result.engine == ("opa" if url else "embedded")


def test_policy_tests_pass_on_the_opa_server(opa_url: str) -> None:
    report = run_policy_tests_on_opa(opa_url, [REPO / "policies"])
    assert report.failed == 0 and report.errors == 0
    assert report.passed >= 100


def test_a_broken_user_policy_is_refused_at_its_line_before_any_engine(tmp_path: Path) -> None:
    (tmp_path / "broken.rego").write_text("package dra.broken\n\ndeny contains v if {\n  v := = 1\n}\n")
    with pytest.raises(PolicyError) as error:
        load_policy_set([tmp_path], include_bundled=False)
    assert str(error.value).startswith(f"{tmp_path / 'broken.rego'}:4:"), error.value


def test_unreachable_opa_server_is_an_environment_problem() -> None:
    policy_set = load_policy_set([], include_bundled=True)
    engine = OpaServerEngine("http://127.0.0.1:9", policy_set)
    with pytest.raises(EnvironmentProblem) as error:
        engine.evaluate({"objects": []})
    assert "127.0.0.1:9" in str(error.value) and "unreachable" in str(error.value)


def test_an_opa_url_that_is_no_http_url_is_refused_outside_the_cli_too() -> None:
    with pytest.raises(UserError, match="http://host:port"):
        OpaServerEngine("ftp://x:1", load_policy_set([]))
