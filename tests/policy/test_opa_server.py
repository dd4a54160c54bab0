"""One OPA server across several runs, as the in-cluster sidecar outlives every check.

Each run must evaluate exactly its own policy set: what an earlier run uploaded and this one did not send
must not count, module ids must not depend on the working directory, and test modules must not stay.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from opa_standin import call, stored_modules

from reconciler.delivery.check import CheckOptions, run_check
from reconciler.errors import EnvironmentProblem
from reconciler.model.loader import LoadResult, load_paths
from reconciler.policy.engine import EmbeddedEngine, evaluate, load_policy_set
from reconciler.policy.opa import OpaServerEngine, run_policy_tests_on_opa

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "policies"
OURS = "dra-gitops/"

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


@pytest.fixture
def eight_gpus(tmp_path: Path) -> LoadResult:
    (tmp_path / "manifests").mkdir()
    (tmp_path / "manifests" / "claims.yaml").write_text(EIGHT_GPUS)
    return load_paths([tmp_path / "manifests"], display_root=tmp_path)


def findings(head: LoadResult, opa_url: str | None, *policy_dirs: Path) -> list[tuple[str, str, int]]:
    run = run_check(head, None, CheckOptions(policy_dirs=policy_dirs, opa_url=opa_url))
    return [(f.rule, f.ref, f.line) for f in run.result.findings]


def test_a_later_run_without_an_extra_policy_dir_matches_the_embedded_engine(
    opa_url: str, eight_gpus: LoadResult
) -> None:
    with_examples = findings(eight_gpus, opa_url, EXAMPLES)
    assert with_examples == findings(eight_gpus, None, EXAMPLES)
    assert [rule for rule, _, _ in with_examples] == ["max-devices-per-request"]
    # The same server, a run without --policy: the example rule it no longer sends must not count.
    assert findings(eight_gpus, opa_url) == findings(eight_gpus, None) == []
    assert findings(eight_gpus, opa_url, EXAMPLES) == with_examples


def test_module_ids_do_not_depend_on_the_working_directory(
    opa_url: str, eight_gpus: LoadResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundled = {
        f"{OURS}bundled/{path.relative_to(REPO / 'policies').as_posix()}"
        for path in (REPO / "policies").rglob("*.rego")
        if not path.stem.endswith("_test")
    }
    expected = bundled | {
        f"{OURS}policy-1/max-devices-per-request/max_devices_per_request.rego",
        f"{OURS}entrypoint.rego",
    }
    # From the repository (policy paths shown relative), from elsewhere (absolute), from inside the pack.
    for cwd in (REPO, tmp_path, EXAMPLES / "max-devices-per-request"):
        monkeypatch.chdir(cwd)
        findings(eight_gpus, opa_url, EXAMPLES)
        assert set(stored_modules(opa_url, OURS)) == expected, cwd


def test_policy_tests_on_the_server_leave_no_test_module(opa_url: str) -> None:
    report = run_policy_tests_on_opa(opa_url, [EXAMPLES])
    assert report.passed >= 1 and report.failed == 0 and report.errors == 0
    left = sorted(stored_modules(opa_url, OURS))
    assert left and not [module_id for module_id in left if module_id.endswith("_test.rego")], left


LIMIT_RULE = """\
package dra.limit

default limit := {limit}

deny contains {{"msg": "over the limit", "ref": obj._dra.ref, "path": obj._dra.path, "line": obj._dra.line}} if {{
	some obj in input.objects
	obj.kind == "ResourceClaimTemplate"
	some request in obj.spec.spec.devices.requests
	request.exactly.count > limit
}}
"""


def test_a_moved_module_replaces_its_earlier_copy(
    opa_url: str, eight_gpus: LoadResult, tmp_path: Path
) -> None:
    # `default limit` twice in one package is a conflict: the earlier copy must go before the new one is put.
    before, after = tmp_path / "before", tmp_path / "after"
    (before / "limit").mkdir(parents=True)
    (before / "limit" / "limit.rego").write_text(LIMIT_RULE.format(limit=4))
    (after / "limit").mkdir(parents=True)
    (after / "limit" / "moved.rego").write_text(LIMIT_RULE.format(limit=10))
    assert [rule for rule, _, _ in findings(eight_gpus, opa_url, before)] == ["limit"]
    assert findings(eight_gpus, opa_url, after) == findings(eight_gpus, None, after) == []


def test_runs_with_the_same_policies_share_one_server(opa_url: str, eight_gpus: LoadResult) -> None:
    input_doc = run_check(eight_gpus, None, CheckOptions(policy_dirs=(EXAMPLES,))).input_doc
    policy_set = load_policy_set([EXAMPLES])
    embedded = evaluate(EmbeddedEngine(policy_set), policy_set, input_doc)
    first = OpaServerEngine(opa_url, policy_set)
    second = OpaServerEngine(opa_url, load_policy_set([EXAMPLES]))  # another run, started meanwhile
    try:
        assert evaluate(first, policy_set, input_doc) == embedded
        assert evaluate(second, policy_set, input_doc) == embedded
        assert [f.rule for f in embedded] == ["max-devices-per-request"]
    finally:
        first.close()
        second.close()


def test_a_run_whose_policies_another_run_replaced_fails_rather_than_report_theirs(
    opa_url: str, eight_gpus: LoadResult
) -> None:
    input_doc = run_check(eight_gpus, None, CheckOptions(policy_dirs=(EXAMPLES,))).input_doc
    policy_set = load_policy_set([EXAMPLES])
    mine = OpaServerEngine(opa_url, policy_set)
    OpaServerEngine(opa_url, load_policy_set([])).close()  # another run, without the example policies
    try:
        with pytest.raises(EnvironmentProblem) as error:
            evaluate(mine, policy_set, input_doc)
        assert opa_url in str(error.value) and "another run" in str(error.value)
    finally:
        mine.close()


def test_a_module_someone_else_put_in_one_of_our_packages_is_refused(opa_url: str) -> None:
    foreign = "someone-else/capacity.rego"
    status, answer = call(
        opa_url, "PUT", f"/v1/policies/{foreign}", 'package dra.capacity\n\ndeny contains {"msg": "theirs"}\n'
    )
    assert status == 200, answer
    try:
        with pytest.raises(EnvironmentProblem) as error:
            OpaServerEngine(opa_url, load_policy_set([]))
        assert foreign in str(error.value) and "dra.capacity" in str(error.value)
    finally:
        call(opa_url, "DELETE", f"/v1/policies/{foreign}")
