"""One OPA server that loaded a bundle, and runs that only query it.

A run writes nothing: it asks one question of the bundle's generated entry point, learns the revision of
the bundle that answered in the same answer, and refuses (exit 4, both revisions named) when that is not
the revision of its own policies. Runs with different policy sets against one server are each either
right or refused, never wrong, whatever bundle the server activates meanwhile.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from opa_standin import StandInServer, call
from opa_support import bundle_of, bundled_test_count

from reconciler.delivery.check import CheckOptions, run_check
from reconciler.errors import EnvironmentProblem, PolicyError
from reconciler.model.loader import LoadResult, load_paths
from reconciler.policy.bundle import ENTRYPOINT_PACKAGE, build_bundle, bundle_revision
from reconciler.policy.engine import EmbeddedEngine, evaluate, load_policy_set
from reconciler.policy.opa import OpaServerEngine, run_policy_tests_on_opa
from reconciler.policy.testing import run_policy_tests

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "policies"

# Eight devices in one request: only examples/policies' max-devices-per-request denies it.
EIGHT_GPUS = """\
apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu.example.com
spec:
  selectors:
    - cel:
        expression: device.driver == "gpu.example.com"
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: eight-gpus
  namespace: ml-team
spec:
  spec:
    devices:
      requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.example.com
            allocationMode: ExactCount
            count: 8
"""

LIMIT_RULE = """\
package dra.limit

deny contains {{"msg": "over {limit}", "ref": obj._dra.ref, "path": obj._dra.path, "line": obj._dra.line}} if {{
	some obj in input.objects
	obj.kind == "ResourceClaimTemplate"
	some request in obj.spec.spec.devices.requests
	request.exactly.count > {limit}
}}
"""


@pytest.fixture
def eight_gpus(tmp_path: Path) -> LoadResult:
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "claims.yaml").write_text(EIGHT_GPUS)
    return load_paths([tmp_path / "manifests"], display_root=tmp_path)


def findings(head: LoadResult, opa_url: str | None, *policy_dirs: Path) -> list[tuple[str, str, str]]:
    run = run_check(head, None, CheckOptions(policy_dirs=policy_dirs, opa_url=opa_url))
    return [(f.rule, f.ref, f.msg) for f in run.result.findings]


def test_a_run_asks_one_question_and_writes_nothing(
    opa_server: StandInServer, eight_gpus: LoadResult
) -> None:
    opa_server.activate(bundle_of(EXAMPLES))
    modules_before = dict(opa_server.state.modules)
    input_doc = run_check(eight_gpus, None, CheckOptions(policy_dirs=(EXAMPLES,))).input_doc
    policy_set = load_policy_set([EXAMPLES])
    engine = OpaServerEngine(opa_server.url, policy_set)
    queries = opa_server.queries
    try:
        found = evaluate(engine, policy_set, input_doc)
    finally:
        engine.close()
    assert found == evaluate(EmbeddedEngine(policy_set), policy_set, input_doc)
    assert [f.rule for f in found] == ["max-devices-per-request"]
    assert engine.requests == 1 and opa_server.queries == queries + 1  # one round trip, every rule
    assert opa_server.state.modules == modules_before


def test_a_server_with_another_bundle_is_refused_naming_both_revisions(
    opa_url: str, eight_gpus: LoadResult
) -> None:
    served = bundle_revision(load_policy_set([]))
    mine = bundle_revision(load_policy_set([EXAMPLES]))
    assert served != mine
    with pytest.raises(EnvironmentProblem) as error:
        findings(eight_gpus, opa_url, EXAMPLES)
    assert error.value.exit_code == 4
    assert served in str(error.value) and mine in str(error.value) and opa_url in str(error.value)


def test_a_server_without_a_bundle_says_so(opa_server: StandInServer, eight_gpus: LoadResult) -> None:
    opa_server.unload()
    with pytest.raises(EnvironmentProblem) as error:
        findings(eight_gpus, opa_server.url)
    assert "has loaded no bundle" in str(error.value)
    assert ".".join(ENTRYPOINT_PACKAGE) in str(error.value)


def test_the_revision_is_the_digest_of_policies_and_data(tmp_path: Path) -> None:
    (tmp_path / "limit").mkdir()
    (tmp_path / "limit" / "limit.rego").write_text(LIMIT_RULE.format(limit=4))
    first = bundle_revision(load_policy_set([tmp_path]))
    assert first == bundle_revision(load_policy_set([tmp_path]))  # the same policies, the same revision
    (tmp_path / "data.json").write_text('{"params": {"kubernetes_version": "1.35"}}')
    with_data = bundle_revision(load_policy_set([tmp_path]))
    (tmp_path / "limit" / "limit.rego").write_text(LIMIT_RULE.format(limit=5))
    changed = bundle_revision(load_policy_set([tmp_path]))
    assert len({first, with_data, changed}) == 3
    assert build_bundle(load_policy_set([tmp_path])).revision == changed


def test_three_runs_with_different_policies_on_one_server_are_right_or_refused(
    opa_server: StandInServer, eight_gpus: LoadResult, tmp_path: Path
) -> None:
    (tmp_path / "limit").mkdir()
    (tmp_path / "limit" / "limit.rego").write_text(LIMIT_RULE.format(limit=2))
    policy_sets = {"S": [EXAMPLES], "T": [tmp_path], "S2": [EXAMPLES]}
    loaded = {name: load_policy_set(dirs) for name, dirs in policy_sets.items()}
    input_doc = run_check(eight_gpus, None, CheckOptions()).input_doc
    expected = {name: evaluate(EmbeddedEngine(ps), ps, input_doc) for name, ps in loaded.items()}
    assert [f.rule for f in expected["S"]] == ["max-devices-per-request"]
    assert [f.rule for f in expected["T"]] == ["limit"]
    bundles = [bundle_of(EXAMPLES), bundle_of(tmp_path)]
    outcomes = {"right": 0, "refused": 0}
    wrong: list[str] = []
    lock = threading.Lock()

    def one_run(name: str) -> None:
        engine = OpaServerEngine(opa_server.url, loaded[name])
        try:
            got = evaluate(engine, loaded[name], input_doc)
            verdict = "right" if got == expected[name] else "wrong"
        except EnvironmentProblem as exc:
            verdict = "refused"
            assert engine.revision in str(exc), exc
        finally:
            engine.close()
        with lock:
            if verdict == "wrong":
                wrong.append(name)
            else:
                outcomes[verdict] += 1

    for round_number in range(50):
        runs = [threading.Thread(target=one_run, args=(name,)) for name in policy_sets]
        switch = threading.Thread(target=opa_server.activate, args=(bundles[round_number % 2],))
        for thread in [*runs[:2], switch, runs[2]]:
            thread.start()
        for thread in [*runs, switch]:
            thread.join()
    assert wrong == []
    assert outcomes["right"] + outcomes["refused"] == 150
    assert outcomes["right"] and outcomes["refused"], outcomes  # both happened: the race was real


def test_policy_tests_run_on_the_served_bundle_and_leave_nothing(opa_server: StandInServer) -> None:
    opa_server.activate(bundle_of(EXAMPLES))
    modules = dict(opa_server.state.modules)
    report = run_policy_tests_on_opa(opa_server.url, [EXAMPLES])
    assert report.failed == 0 and report.errors == 0
    assert (
        report.passed == bundled_test_count() + 5
    )  # the bundled pack's tests and the example's: the bundle's tests
    assert opa_server.state.modules == modules


def test_policy_tests_against_another_bundle_are_refused(opa_url: str) -> None:
    with pytest.raises(EnvironmentProblem) as error:
        run_policy_tests_on_opa(opa_url, [EXAMPLES])
    assert bundle_revision(load_policy_set([EXAMPLES])) in str(error.value)


def test_a_module_outside_the_root_cannot_be_bundled(tmp_path: Path) -> None:
    (tmp_path / "lib.rego").write_text("package lib\n\nhelper := 1\n")
    with pytest.raises(PolicyError) as error:
        build_bundle(load_policy_set([tmp_path]))
    assert "lib.rego:1" in str(error.value) and "outside the bundle root" in str(error.value)


def test_the_server_refuses_a_module_upload_under_the_bundle_root(opa_url: str) -> None:
    status, answer = call(
        opa_url, "PUT", "/v1/policies/mine.rego", "package dra.capacity\n\ndeny contains 1\n"
    )
    assert status == 400, answer


def test_a_test_whose_evaluation_fails_is_that_tests_error_on_both_engines(
    opa_server: StandInServer, tmp_path: Path
) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "t_test.rego").write_text(
        'package dra.t_test\n\ntest_ok if 1 == 1\n\ntest_boom if {\n\tx := {"a": "s"}\n\tx.a + 1 == 2\n}\n'
    )
    opa_server.activate(bundle_of(tmp_path))
    embedded = run_policy_tests([tmp_path])
    on_opa = run_policy_tests_on_opa(opa_server.url, [tmp_path])
    for report in (embedded, on_opa):
        statuses = {r.test.name: r.status for r in report.results}
        assert statuses["test_ok"] == "pass" and statuses["test_boom"] == "error", statuses
    assert on_opa.passed == bundled_test_count() + 1  # with the bundled pack's, which the bundle holds too
