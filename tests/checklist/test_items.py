"""The checklist builder: facts in, items with status and evidence out (pure, no cluster)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.checklist.facts import (
    ChainFact,
    ChecklistFacts,
    ClaimFact,
    ClassFact,
    DriverFact,
    DriverWorkloadFact,
    EventFact,
    NodeFact,
    PodFact,
    StateFact,
)
from reconciler.checklist.items import (
    CHECKED,
    ITEM_IDS,
    MAX_DETAILS,
    NOT_APPLICABLE,
    NOT_CHECKED,
    Checklist,
    build_checklist,
    event_window_start,
)
from reconciler.checklist.render import render
from reconciler.loop.store.records import AttemptRecord, HistoryRecord, InProgress
from reconciler.outcome import Outcome

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
GOOD = "a" * 40
BAD = "b" * 40
DRIVER = "gpu.example.com"


def apply_record(sha: str, outcome: str = "applied", **extra: Any) -> dict[str, Any]:
    return {
        "sha": sha,
        "operation": "apply",
        "outcome": outcome,
        "at": "2026-03-01T11:59:00Z",
        "diff": {"summary": "0 to create, 1 to update, 0 to delete, 11 unchanged", "create": 0, "update": 1},
        "decisions": [],
        "timings": {"check": 0.5, "dry_run": 0.4, "apply": 2.0, "verify": 3.2},
        "devices": [
            {
                "claim": "ml-team/shared-gpu",
                "pod": "ml-team/notebook-1",
                "devices": [f"{DRIVER}/node-0/gpu-0"],
                "node": "node-0",
            }
        ],
        **extra,
    }


def good_state(**changes: Any) -> StateFact:
    """A state after a good pass; `last_attempted`, `in_progress` and `history` are changed with the JSON the
    state ConfigMap holds, read into their records as `loop/store/state.py` reads them."""
    if isinstance(changes.get("last_attempted"), dict):
        changes["last_attempted"] = AttemptRecord.from_json(changes["last_attempted"])
    if isinstance(changes.get("in_progress"), dict):
        changes["in_progress"] = InProgress.from_json(changes["in_progress"])
    if "history" in changes:
        changes["history"] = tuple(map(history_record, changes["history"]))
    state = StateFact(
        ref="ConfigMap/dra-gitops/dra-gitops-gpu",
        found=True,
        last_good=GOOD,
        last_attempted=AttemptRecord(sha=GOOD, outcome=Outcome.APPLIED, at="2026-03-01T11:59:00Z"),
        inventory=(
            "v1 Namespace/ml-team",
            "apps/v1 DaemonSet/gpu-system/plugin",
            "resource.k8s.io/v1 DeviceClass/gpu.example.com",
            "resource.k8s.io/v1 ResourceClaim/ml-team/shared-gpu",
            "apps/v1 Deployment/ml-team/notebook",
        ),
        history=(history_record(apply_record(GOOD)),),
    )
    return replace(state, **changes)


def history_record(raw: dict[str, Any]) -> HistoryRecord:
    record = HistoryRecord.from_json(raw)
    assert record is not None
    return record


def good_facts(**changes: Any) -> ChecklistFacts:
    facts = ChecklistFacts(
        target="gpu",
        cluster="https://127.0.0.1:6443",
        now=NOW,
        server_version="v1.36.2",
        served=("v1", "v1beta2"),
        preferred="v1",
        deprecated={"v1beta2": "deprecated in v1.36+, unavailable in v1.39+; use resource.k8s.io/v1"},
        nodes=(NodeFact("node-0", True), NodeFact("node-1", True)),
        driver_workloads=(
            DriverWorkloadFact(
                ref="DaemonSet/gpu-system/plugin",
                driver=DRIVER,
                state="current",
                message="2/2 pods ready",
                desired=2,
                current_pods=2,
                ready_pods=2,
                nodes=("node-0", "node-1"),
            ),
        ),
        drivers=(
            DriverFact(DRIVER, slices=2, slice_nodes=("node-0", "node-1"), devices=4, allocated=1, pools=2),
        ),
        classes=(ClassFact(DRIVER, "DeviceClass", DRIVER, devices=4, allocated=1),),
        claims=(
            ClaimFact(
                "ml-team/shared-gpu",
                allocated=True,
                devices=(f"{DRIVER}/node-0/gpu-0",),
                node="node-0",
                reserved_for=("notebook-1",),
                users=("ml-team/notebook-1",),
            ),
        ),
        pods=(
            PodFact(
                "ml-team/notebook-1",
                phase="Running",
                ready=True,
                node="node-0",
                chains=(
                    ChainFact("ml-team/shared-gpu", (f"{DRIVER}/node-0/gpu-0",), "node-0", True, True, ""),
                ),
            ),
        ),
        namespaces=("gpu-system", "ml-team"),
        state=good_state(),
    )
    return replace(facts, **changes)


def status(checklist: Checklist, item_id: str) -> str:
    return checklist.item(item_id).status


def evidence(checklist: Checklist, item_id: str) -> str:
    return "\n".join(checklist.item(item_id).evidence)


# ---- the whole list --------------------------------------------------------------------------------------


def test_a_healthy_deployment_checks_every_applicable_item_with_its_evidence() -> None:
    checklist = build_checklist(good_facts())
    assert [i.id for i in checklist.items] == list(ITEM_IDS)
    assert [i.section for i in checklist.items] == ["before"] * 8 + ["during"] * 2 + ["after"] * 4
    statuses = {i.id: i.status for i in checklist.items}
    assert statuses.pop("devices-in-container") == NOT_APPLICABLE
    assert set(statuses.values()) == {CHECKED}
    assert checklist.ok and checklist.exit_code == 0
    assert checklist.counts() == {CHECKED: 13, NOT_CHECKED: 0, NOT_APPLICABLE: 1}
    assert evidence(checklist, "api").startswith(
        "Kubernetes v1.36.2; resource.k8s.io served: v1 (preferred), v1beta2 (deprecated)"
    )
    assert "resource.k8s.io/v1beta2 is served but deprecated in v1.36+" in evidence(checklist, "api")
    assert "last good aaaaaaaaaaaa uses resource.k8s.io/v1 (served)" in evidence(checklist, "api")
    assert evidence(checklist, "capacity").startswith("4 device(s), 1 allocated, 3 free")
    assert f"class {DRIVER}: 4 device(s) match, 1 allocated, 3 free" in evidence(checklist, "capacity")
    assert "aaaaaaaaaaaa: 0 to create, 1 to update" in evidence(checklist, "dry-run")
    assert "lastGood aaaaaaaaaaaa, apply verified at 2026-03-01T11:59:00Z; 5 object(s)" in evidence(
        checklist, "rollback-target"
    )
    assert "1 claim(s) in namespace(s) gpu-system, ml-team: 1 allocated, 1 reserved, 0 pending" in evidence(
        checklist, "claims"
    )
    assert (
        f"ml-team/notebook-1: claim ml-team/shared-gpu → {DRIVER}/node-0/gpu-0 on node-0, reserved"
        in evidence(checklist, "claims-allocated")
    )
    assert f"ml-team/shared-gpu → {DRIVER}/node-0/gpu-0 on node-0 (pod ml-team/notebook-1)" in evidence(
        checklist, "verified"
    )


def test_markdown_is_a_task_list_grouped_by_section() -> None:
    facts = good_facts(pods=(replace(good_facts().pods[0], ready=False, phase="Pending"),))
    text = render(build_checklist(facts), "markdown")
    assert text.startswith("## DRA deployment checklist: target `gpu`\n")
    assert "* **12/13 applicable item(s) checked, 1 not checked, 1 not applicable**" in text
    sections = [line for line in text.splitlines() if line.startswith("### ")]
    assert sections == ["### Before the change", "### During the change", "### After the change"]
    assert "- [x] **Kubernetes version and served resource.k8s.io versions** — Kubernetes v1.36.2" in text
    assert "- [ ] **Pods using claims Ready** — 0/1 pod(s) using claims Ready" in text
    assert "  - ml-team/notebook-1: Pending, not Ready on node-0" in text
    assert (
        "- [x] ~~Devices seen in the container (verify-exec)~~ — not applicable: no verify-exec ran" in text
    )
    assert text.count("- [") == len(ITEM_IDS)


def test_json_carries_the_same_items_and_the_verdict() -> None:
    checklist = build_checklist(good_facts(claims=()))
    data = json.loads(render(checklist, "json"))
    assert data["ok"] is True and data["target"] == "gpu" and data["lastGood"] == GOOD
    assert [i["id"] for i in data["items"]] == list(ITEM_IDS)
    claims = next(i for i in data["items"] if i["id"] == "claims")
    assert claims == {
        "id": "claims",
        "section": "during",
        "title": "ResourceClaims allocated, none pending for a pod",
        "status": NOT_APPLICABLE,
        "evidence": ["no ResourceClaim in namespace(s) gpu-system, ml-team"],
    }
    assert data["counts"] == {CHECKED: 12, NOT_CHECKED: 0, NOT_APPLICABLE: 2}


def test_text_marks_each_status() -> None:
    facts = good_facts(classes=())
    text = render(build_checklist(facts), "text")
    assert "  [ ] DeviceClasses present, each with a driver publishing ResourceSlices: no DeviceClass" in text
    assert "  [x] Kubernetes version" in text
    assert "  [-] Devices seen in the container (verify-exec): n/a: no verify-exec ran" in text
    assert text.rstrip().endswith("12/13 applicable item(s) checked, 1 not checked, 1 not applicable")


def test_unknown_format_is_refused() -> None:
    with pytest.raises(ValueError, match="unknown checklist format 'yaml'"):
        render(build_checklist(good_facts()), "yaml")


def test_long_evidence_is_cut_and_counted() -> None:
    claims = tuple(ClaimFact(f"ml-team/c{i:02}", allocated=True, reserved_for=(f"p{i}",)) for i in range(20))
    item = build_checklist(good_facts(claims=claims)).item("claims")
    assert len(item.evidence) == 1 + MAX_DETAILS + 1
    assert item.evidence[-1] == f"... and {20 - MAX_DETAILS} more"


# ---- before ----------------------------------------------------------------------------------------------


def test_dra_not_served_fails_the_api_and_every_dra_item() -> None:
    checklist = build_checklist(good_facts(served=(), preferred="", deprecated={}))
    assert status(checklist, "api") == NOT_CHECKED
    assert "resource.k8s.io is not served" in evidence(checklist, "api")
    for item_id in ("classes", "slices", "capacity", "claims"):
        assert status(checklist, item_id) == NOT_CHECKED
        assert evidence(checklist, item_id) == "resource.k8s.io is not served"
    assert checklist.exit_code == 1


def test_a_version_the_last_good_revision_uses_but_the_cluster_does_not_serve() -> None:
    state = good_state(inventory=("resource.k8s.io/v1beta1 DeviceClass/old",))
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "api") == NOT_CHECKED
    assert (
        "last good aaaaaaaaaaaa uses resource.k8s.io/v1beta1, which is not served: DeviceClass/old"
        in evidence(checklist, "api")
    )


def test_a_driver_workload_still_rolling_out() -> None:
    workload = replace(
        good_facts().driver_workloads[0], state="in-progress", message="1/2 pods updated", ready_pods=1
    )
    checklist = build_checklist(good_facts(driver_workloads=(workload,)))
    assert status(checklist, "driver-rollout") == NOT_CHECKED
    assert evidence(checklist, "driver-rollout").startswith("0/1 driver workload(s) rolled out")
    assert "DaemonSet/gpu-system/plugin (driver gpu.example.com): in-progress: 1/2 pods updated" in evidence(
        checklist, "driver-rollout"
    )
    assert status(checklist, "driver-pods") == NOT_CHECKED
    assert "1/2 driver pod(s) of the current template Ready" in evidence(checklist, "driver-pods")


def test_a_crash_looping_driver_pod_and_old_template_pods() -> None:
    workload = replace(
        good_facts().driver_workloads[0],
        ready_pods=1,
        crash_looping=("gpu-system/plugin-x (7 restarts)",),
        old_pods=1,
    )
    checklist = build_checklist(good_facts(driver_workloads=(workload,)))
    assert status(checklist, "driver-pods") == NOT_CHECKED
    text = evidence(checklist, "driver-pods")
    assert text.startswith("1/2 driver pod(s) of the current template Ready, 1 in CrashLoopBackOff")
    assert "gpu-system/plugin-x (7 restarts): CrashLoopBackOff" in text
    assert "1 pod(s) of an older template still present" in text


def test_a_not_ready_driver_pod_fails_even_when_counts_match() -> None:
    workload = replace(
        good_facts().driver_workloads[0], not_ready=("gpu-system/plugin-y: Pending, not ready",)
    )
    checklist = build_checklist(good_facts(driver_workloads=(workload,)))
    assert status(checklist, "driver-pods") == NOT_CHECKED
    assert "gpu-system/plugin-y: Pending, not ready" in evidence(checklist, "driver-pods")


def test_an_idle_canary_is_noted() -> None:
    canary = DriverWorkloadFact(
        ref="DaemonSet/gpu-system/plugin-canary",
        driver=DRIVER,
        state="current",
        message="0/0 pods ready",
        desired=0,
        current_pods=0,
        ready_pods=0,
        canary_for="plugin",
        idle_reason="canary DaemonSet/gpu-system/plugin-canary (canary for plugin) runs on no node",
    )
    checklist = build_checklist(good_facts(driver_workloads=(*good_facts().driver_workloads, canary)))
    assert status(checklist, "driver-rollout") == CHECKED
    assert "(driver gpu.example.com, canary for plugin)" in evidence(checklist, "driver-rollout")
    assert "note: canary DaemonSet/gpu-system/plugin-canary (canary for plugin) runs on no node" in evidence(
        checklist, "driver-rollout"
    )


def test_no_driver_workload_is_not_applicable_when_slices_come_from_elsewhere() -> None:
    checklist = build_checklist(good_facts(driver_workloads=()))
    for item_id in ("driver-rollout", "driver-pods"):
        assert status(checklist, item_id) == NOT_APPLICABLE
        assert "ResourceSlices come from gpu.example.com" in evidence(checklist, item_id)
    bare = build_checklist(good_facts(driver_workloads=(), drivers=(), classes=()))
    assert status(bare, "driver-rollout") == NOT_CHECKED
    assert evidence(bare, "driver-pods") == "no DRA driver workload found and no ResourceSlices published"
    assert status(bare, "slices") == NOT_CHECKED
    assert status(bare, "capacity") == NOT_CHECKED
    assert "no devices published" in evidence(bare, "capacity")


def test_classes_missing_without_slices_or_from_the_last_good_revision() -> None:
    other = ClassFact("fpga.example.com", "DeviceClass", "fpga.example.com", devices=0, allocated=0)
    vague = ClassFact("any-accelerator", "DeviceClass", None, devices=4, allocated=1)
    checklist = build_checklist(good_facts(classes=(other, vague)))
    assert status(checklist, "classes") == NOT_CHECKED
    text = evidence(checklist, "classes")
    assert text.startswith("2 class(es): any-accelerator → ?, fpga.example.com → fpga.example.com")
    assert "DeviceClass gpu.example.com of last good aaaaaaaaaaaa is missing" in text
    assert (
        "DeviceClass fpga.example.com selects driver fpga.example.com, which publishes no ResourceSlices"
        in text
    )
    assert "DeviceClass any-accelerator: its selectors name no single driver" in text
    assert status(checklist, "capacity") == NOT_CHECKED
    assert "class fpga.example.com matches no published device" in evidence(checklist, "capacity")


def test_a_node_running_the_driver_without_a_slice() -> None:
    driver = replace(good_facts().drivers[0], slices=1, slice_nodes=("node-0",))
    checklist = build_checklist(good_facts(drivers=(driver,)))
    assert status(checklist, "slices") == NOT_CHECKED
    assert "driver gpu.example.com runs on node-1 but publishes no ResourceSlice for it" in evidence(
        checklist, "slices"
    )


def test_a_driver_named_by_a_class_that_publishes_nothing_and_network_devices() -> None:
    network = DriverFact("net.example.com", slices=1, slice_nodes=(), devices=8, allocated=0, pools=1)
    cls = ClassFact("nic", "DeviceClass", "nic.example.com", devices=0, allocated=0)
    checklist = build_checklist(good_facts(drivers=(*good_facts().drivers, network), classes=(cls,)))
    text = evidence(checklist, "slices")
    assert status(checklist, "slices") == NOT_CHECKED
    assert "driver nic.example.com publishes no ResourceSlices" in text
    assert "net.example.com: 1 slice(s), 8 device(s) in 1 pool(s) not node-local" in text


def test_unknown_class_selectors_count_as_a_lower_bound() -> None:
    cls = ClassFact("fancy", "DeviceClass", DRIVER, devices=0, allocated=0, unknown=True)
    checklist = build_checklist(good_facts(classes=(cls,)))
    assert status(checklist, "capacity") == CHECKED
    assert "class fancy: 0 or more (a selector could not be evaluated) device(s) match" in evidence(
        checklist, "capacity"
    )


def test_no_state_fails_the_reconcile_items_and_names_other_targets() -> None:
    state = StateFact(ref="ConfigMap/dra-gitops/dra-gitops-gpu", found=False, other_targets=("gpu-cluster",))
    checklist = build_checklist(good_facts(state=state))
    for item_id in ("dry-run", "rollback-target", "verified"):
        assert status(checklist, item_id) == NOT_CHECKED
        assert evidence(checklist, item_id) == (
            "no reconcile recorded for target gpu (ConfigMap/dra-gitops/dra-gitops-gpu not found); "
            "targets with a state there: gpu-cluster"
        )
    assert status(checklist, "devices-in-container") == NOT_APPLICABLE
    assert checklist.exit_code == 1


def test_a_state_with_nothing_attempted_yet() -> None:
    state = good_state(last_good=None, last_attempted=None, history=(), inventory=())
    checklist = build_checklist(good_facts(state=state))
    assert evidence(checklist, "dry-run") == "no revision attempted yet (ConfigMap/dra-gitops/dra-gitops-gpu)"
    assert (
        evidence(checklist, "verified") == "no revision attempted yet (ConfigMap/dra-gitops/dra-gitops-gpu)"
    )
    assert status(checklist, "rollback-target") == NOT_CHECKED
    assert evidence(checklist, "rollback-target").startswith("no last good revision")


def test_a_denied_attempt_never_reached_the_dry_run() -> None:
    record = apply_record(BAD, "denied", message="Deployment/ml-team/x claim-refs: no such class")
    record["diff"] = {"summary": "3 object(s), not dry-run"}
    record["decisions"] = [
        {"rule": "claim-refs", "severity": "deny", "ref": "Deployment/ml-team/x", "msg": "no such class"}
    ]
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "denied", "at": record["at"]},
        history=(record, apply_record(GOOD)),
    )
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "dry-run") == NOT_CHECKED
    text = evidence(checklist, "dry-run")
    assert text.startswith(
        "bbbbbbbbbbbb: denied by policy before the dry-run (1 denial(s)); nothing was written"
    )
    assert "deny claim-refs Deployment/ml-team/x: no such class" in text
    assert text.count("no such class") == 1  # the finding once, not again in the summary
    assert status(checklist, "verified") == NOT_CHECKED
    assert evidence(checklist, "verified").startswith("bbbbbbbbbbbb denied: Deployment/ml-team/x claim-refs")
    # The cluster stayed on the last good revision: it is still the rollback target.
    assert status(checklist, "rollback-target") == CHECKED


@pytest.mark.parametrize(
    ("outcome", "expected"),
    [
        ("dry-run-failed", "bbbbbbbbbbbb: server-side dry-run failed: DeviceClass/x dry-run failed: invalid"),
        ("unverified", "bbbbbbbbbbbb: refused before the dry-run: DeviceClass/x dry-run failed: invalid"),
    ],
)
def test_attempts_that_stopped_before_writing(outcome: str, expected: str) -> None:
    record = apply_record(BAD, outcome, message="DeviceClass/x dry-run failed: invalid")
    state = good_state(last_attempted={"sha": BAD, "outcome": outcome, "at": record["at"]}, history=(record,))
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "dry-run") == NOT_CHECKED
    assert evidence(checklist, "dry-run") == expected


def test_an_interrupted_attempt_has_no_dry_run_result() -> None:
    record = {"sha": BAD, "operation": "apply", "outcome": "interrupted", "at": "2026-03-01T11:59:00Z"}
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "interrupted", "at": record["at"]}, history=(record,)
    )
    checklist = build_checklist(good_facts(state=state))
    assert evidence(checklist, "dry-run") == "bbbbbbbbbbbb (interrupted): no dry-run result recorded"


def test_warnings_of_an_applied_attempt_are_listed_under_its_dry_run() -> None:
    record = apply_record(
        GOOD,
        decisions=[
            {"rule": "capacity", "severity": "warn", "ref": "Deployment/ml-team/t", "msg": "0 of 4 free"}
        ],
    )
    checklist = build_checklist(good_facts(state=good_state(history=(record,))))
    assert status(checklist, "dry-run") == CHECKED
    assert "warn capacity Deployment/ml-team/t: 0 of 4 free" in evidence(checklist, "dry-run")


def test_a_rolled_back_attempt() -> None:
    failed = apply_record(
        BAD,
        "verify-failed",
        message="verification failed: pod ml-team/t-3: FailedScheduling 'cannot allocate all claims'",
        rolledBackTo=GOOD,
        rollback="applied",
    )
    rollback = {**apply_record(GOOD), "operation": "rollback", "from": BAD, "at": "2026-03-01T11:59:30Z"}
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "verify-failed", "at": failed["at"], "rolledBack": True},
        history=(failed, rollback, apply_record(GOOD)),
    )
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "verified") == NOT_CHECKED
    assert evidence(checklist, "verified").startswith(
        "bbbbbbbbbbbb verify-failed: verification failed: pod ml-team/t-3: FailedScheduling 'cannot allocate "
        "all claims'; rolled back to aaaaaaaaaaaa and verified"
    )
    assert status(checklist, "dry-run") == CHECKED
    target = evidence(checklist, "rollback-target")
    assert status(checklist, "rollback-target") == CHECKED
    assert "rollback verified at 2026-03-01T11:59:30Z" in target
    assert "bbbbbbbbbbbb (verify-failed) was rolled back to it" in target
    assert checklist.exit_code == 1


def test_a_failed_rollback_needs_a_human() -> None:
    failed = apply_record(
        BAD, "verify-failed", message="verification failed", rolledBackTo=GOOD, rollback="verify-failed"
    )
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "verify-failed", "at": failed["at"], "rolledBack": False},
        history=(failed, apply_record(GOOD)),
    )
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "rollback-target") == NOT_CHECKED
    assert "the rollback of bbbbbbbbbbbb to aaaaaaaaaaaa failed: the cluster needs a human" in evidence(
        checklist, "rollback-target"
    )
    assert checklist.item("verified").evidence[0] == (
        "bbbbbbbbbbbb verify-failed: verification failed; the rollback to aaaaaaaaaaaa failed"
    )


def test_a_pass_in_progress_and_a_hold() -> None:
    progress = {"sha": BAD, "operation": "apply", "stage": "1 drivers", "since": "2026-03-01T11:59:50Z"}
    checklist = build_checklist(good_facts(state=good_state(in_progress=progress, hold=BAD)))
    assert status(checklist, "verified") == NOT_CHECKED
    assert evidence(checklist, "verified") == (
        "a pass is in progress: apply of bbbbbbbbbbbb at stage 1 drivers since 2026-03-01T11:59:50Z"
    )
    target = evidence(checklist, "rollback-target")
    assert "holding: bbbbbbbbbbbb stays unapplied until a newer commit or `dra-gitops retry`" in target
    assert "apply of bbbbbbbbbbbb in progress at stage 1 drivers" in target


# ---- during ----------------------------------------------------------------------------------------------


def test_claim_states() -> None:
    claims = (
        ClaimFact("ml-team/waiting", allocated=False, users=("ml-team/t-1",)),
        ClaimFact("ml-team/spare", allocated=False),
        ClaimFact("ml-team/leftover", allocated=True, devices=(f"{DRIVER}/node-1/gpu-1",), node="node-1"),
        ClaimFact("ml-team/going", allocated=False, deleting=True),
    )
    checklist = build_checklist(good_facts(claims=claims))
    assert status(checklist, "claims") == NOT_CHECKED
    text = evidence(checklist, "claims")
    assert text.startswith(
        "4 claim(s) in namespace(s) gpu-system, ml-team: 1 allocated, 0 reserved, 2 pending"
    )
    assert "ml-team/waiting: pending, wanted by ml-team/t-1" in text
    assert "ml-team/spare: pending, no pod uses it yet (allocated when one does)" in text
    assert "ml-team/going: being deleted" in text
    assert f"ml-team/leftover: allocated {DRIVER}/node-1/gpu-1 on node-1, reserved for no pod" in text
    # A claim nobody uses yet is not a failure.
    assert status(build_checklist(good_facts(claims=claims[1:])), "claims") == CHECKED


def test_no_state_means_every_namespace() -> None:
    checklist = build_checklist(good_facts(namespaces=(), claims=(), pods=()))
    assert evidence(checklist, "claims") == "no ResourceClaim in all namespaces"
    assert evidence(checklist, "pods-ready") == "no pod uses a ResourceClaim in all namespaces"
    assert status(checklist, "claims-allocated") == NOT_APPLICABLE


def event(when: datetime | None, now: str, reason: str = "FailedScheduling") -> EventFact:
    return EventFact(
        "Pod/ml-team/t-3", reason, "0/2 nodes are available: cannot allocate all claims", 3, when, now
    )


def test_events_count_from_the_start_of_the_last_attempt() -> None:
    # at 11:59:00 minus 6.1 s of timings, rounded up to whole seconds
    assert event_window_start(good_facts()) == datetime(2026, 3, 1, 11, 58, 53, tzinfo=UTC)
    no_state = good_facts(state=StateFact(ref="x", found=False))
    assert event_window_start(no_state) == NOW - timedelta(minutes=15)


def test_unresolved_warning_events_fail_and_resolved_ones_are_listed() -> None:
    before = datetime(2026, 3, 1, 11, 0, tzinfo=UTC)
    during = datetime(2026, 3, 1, 11, 59, tzinfo=UTC)
    events = (event(before, "gone"), event(during, "healthy", "FailedPrepareDynamicResources"))
    checklist = build_checklist(good_facts(events=events))
    assert status(checklist, "events") == CHECKED
    text = evidence(checklist, "events")
    assert text.startswith(
        "1 Warning Event(s) since 2026-03-01T11:58:53Z (start of the last attempt): 0 unresolved"
    )
    assert "Pod/ml-team/t-3 FailedPrepareDynamicResources (x3) at 2026-03-01T11:59:00Z" in text
    assert text.endswith("[healthy now]")

    failing = build_checklist(good_facts(events=(*events, event(during, "gone"), event(None, "unhealthy"))))
    assert status(failing, "events") == NOT_CHECKED
    lines = failing.item("events").evidence
    assert lines[0].endswith(": 2 unresolved")
    assert lines[1].endswith("[gone now]") and lines[2].endswith("[unhealthy now]")

    quiet = build_checklist(good_facts(events=(event(before, "gone"),)))
    assert evidence(quiet, "events") == (
        "no Warning Event on pods or claims in namespace(s) gpu-system, ml-team since 2026-03-01T11:58:53Z "
        "(start of the last attempt)"
    )


# ---- after -----------------------------------------------------------------------------------------------


def test_pods_not_ready_and_broken_chains() -> None:
    pods = (
        PodFact(
            "ml-team/t-1",
            "Pending",
            False,
            None,
            (ChainFact("ml-team/t-1-gpu", (), None, False, False, "claim not allocated"),),
        ),
        PodFact(
            "ml-team/t-2",
            "Running",
            False,
            "node-1",
            (
                ChainFact(
                    "ml-team/t-2-gpu", (f"{DRIVER}/node-1/gpu-0",), "node-1", True, True, "pod not Ready"
                ),
            ),
        ),
        PodFact(
            "ml-team/job-1",
            "Succeeded",
            False,
            "node-0",
            (ChainFact("ml-team/job-1-gpu", (), "node-0", False, False, ""),),
        ),
    )
    checklist = build_checklist(good_facts(pods=pods))
    assert status(checklist, "pods-ready") == NOT_CHECKED
    ready = evidence(checklist, "pods-ready")
    assert ready.startswith("1/3 pod(s) using claims Ready (or finished)")
    assert "ml-team/t-1: Pending, not Ready, not scheduled" in ready
    assert "ml-team/t-2: Running, not Ready on node-1" in ready
    assert "ml-team/job-1: Succeeded on node-0" in ready
    assert status(checklist, "claims-allocated") == NOT_CHECKED
    chains = evidence(checklist, "claims-allocated")
    assert chains.startswith("2/3 claim(s) of 3 pod(s) allocated and reserved")
    assert "ml-team/t-1: claim ml-team/t-1-gpu: claim not allocated" in chains
    assert f"ml-team/t-2: claim ml-team/t-2-gpu → {DRIVER}/node-1/gpu-0 on node-1, reserved" in chains
    assert "ml-team/job-1: claim ml-team/job-1-gpu → - on node-0, released (pod finished)" in chains


def exec_result(ok: bool, output: str, pod: str = "ml-team/notebook-1") -> dict[str, Any]:
    return {"pod": pod, "container": "cuda", "command": "nvidia-smi -L", "ok": ok, "output": output}


def test_devices_seen_in_the_container() -> None:
    record = apply_record(GOOD, exec=[exec_result(True, "GPU 0: Example GPU (UUID: GPU-1234)\n")])
    checklist = build_checklist(good_facts(state=good_state(history=(record,))))
    assert status(checklist, "devices-in-container") == CHECKED
    assert checklist.item("devices-in-container").evidence == (
        "verify-exec of aaaaaaaaaaaa (apply, 2026-03-01T11:59:00Z): 1/1 container(s) ok",
        "ml-team/notebook-1 [cuda] 'nvidia-smi -L': ok: GPU 0: Example GPU (UUID: GPU-1234)",
    )


def test_a_failed_verify_exec_of_the_last_attempt_comes_first() -> None:
    failed = apply_record(
        BAD,
        "verify-failed",
        message="verification failed: verify-exec in ml-team/notebook-2: no devices found",
        exec=[exec_result(True, "GPU 0"), exec_result(False, "no devices found", "ml-team/notebook-2")],
    )
    good = apply_record(GOOD, exec=[exec_result(True, "GPU 0")])
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "verify-failed", "at": failed["at"], "rolledBack": True},
        history=(failed, good),
    )
    checklist = build_checklist(good_facts(state=state))
    item = checklist.item("devices-in-container")
    assert item.status == NOT_CHECKED
    assert (
        item.evidence[0] == "verify-exec of bbbbbbbbbbbb (apply, 2026-03-01T11:59:00Z): 1/2 container(s) ok"
    )
    assert item.evidence[1] == "ml-team/notebook-2 [cuda] 'nvidia-smi -L': FAILED: no devices found"


def test_the_verified_last_good_record_speaks_when_the_last_attempt_ran_no_exec() -> None:
    denied = apply_record(BAD, "denied", message="denied")
    good = apply_record(GOOD, exec=[exec_result(True, "")])
    state = good_state(
        last_attempted={"sha": BAD, "outcome": "denied", "at": denied["at"]}, history=(denied, good)
    )
    item = build_checklist(good_facts(state=state)).item("devices-in-container")
    assert item.status == CHECKED
    assert item.evidence == (
        "verify-exec of aaaaaaaaaaaa (apply, 2026-03-01T11:59:00Z): 1/1 container(s) ok",
        "ml-team/notebook-1 [cuda] 'nvidia-smi -L': ok",
    )


def test_a_record_without_a_readable_time_falls_back_to_the_default_window() -> None:
    record = {**apply_record(GOOD), "at": "yesterday", "timings": {"apply": 2.0}}
    assert event_window_start(good_facts(state=good_state(history=(record,)))) == NOW - timedelta(minutes=15)
    whole = {**apply_record(GOOD), "timings": {"apply": 2.0, "note": "n/a"}}
    assert event_window_start(good_facts(state=good_state(history=(whole,)))) == datetime(
        2026, 3, 1, 11, 58, 58, tzinfo=UTC
    )


def test_an_unknown_item_id_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        build_checklist(good_facts()).item("nothing")


def test_a_failed_rollback_rehearsal_leaves_the_rollback_target_not_checked() -> None:
    steps = [
        {"step": "rollback", "sha": BAD, "outcome": "verify-failed", "at": "2026-03-01T11:59:20Z", "seconds": 6.0,
         "verified": "", "message": "pod ml-team/t-3: FailedScheduling 'cannot allocate all claims'"},
        {"step": "re-apply", "sha": GOOD, "outcome": "applied", "at": "2026-03-01T11:59:30Z", "seconds": 3.0,
         "verified": "3 claim(s) allocated", "message": "verified"},
    ]  # fmt: skip
    state = good_state(history=(apply_record(GOOD, rehearsal={"ok": False, "steps": steps}),))
    checklist = build_checklist(good_facts(state=state))
    assert status(checklist, "rollback-target") == NOT_CHECKED
    assert (
        "the rollback rehearsal FAILED at 2026-03-01T11:59:30Z: rollback to bbbbbbbbbbbb verify-failed in 6.0s "
        "(pod ml-team/t-3: FailedScheduling 'cannot allocate all claims'); re-apply to aaaaaaaaaaaa applied in "
        "3.0s (3 claim(s) allocated)"
    ) in evidence(checklist, "rollback-target")
    promoted = good_state(
        history=(apply_record(GOOD, promoted={"from": "staging", "verifiedAt": "x", "rehearsed": True}),)
    )
    checklist = build_checklist(good_facts(state=promoted))
    assert status(checklist, "rollback-target") == CHECKED
    assert "its rollback was rehearsed in staging before it was promoted here" in evidence(
        checklist, "rollback-target"
    )
