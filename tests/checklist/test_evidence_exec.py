"""What verify-exec saw in the containers is kept in the pass's evidence record (the checklist reads it)."""

from __future__ import annotations

from reconciler.cluster.verify import ClaimEvidence, ExecResult, VerifyResult
from reconciler.delivery.result import Delivery
from reconciler.loop.store.evidence import EXEC_OUTPUT, evidence_record
from reconciler.model.plan import Plan
from reconciler.outcome import Outcome


def delivery(exec_results: list[ExecResult]) -> Delivery:
    evidence = [
        ClaimEvidence("ml/probe", "ml/gpu", ["gpu.example.com/node-0/gpu-0"], "node-0", True, True, True)
    ]
    verified = VerifyResult(True, evidence, [], "verified 1 workload(s), 1 claim(s)", exec_results)
    return Delivery(Outcome.APPLIED, "a" * 40, Plan(()), verified=verified)


def test_exec_results_are_recorded_with_their_output_cut() -> None:
    long_output = "GPU 0: Example\n" + "x" * 2000
    record = evidence_record(
        delivery(
            [
                ExecResult("ml/probe", "cuda", "nvidia-smi -L", True, long_output),
                ExecResult("ml/probe-2", None, "nvidia-smi -L", False, "exited with status 1: no devices"),
            ]
        ),
        "a" * 40,
        "apply",
    ).to_json()
    assert record["exec"] == [
        {
            "pod": "ml/probe",
            "container": "cuda",
            "command": "nvidia-smi -L",
            "ok": True,
            "output": long_output[:EXEC_OUTPUT],
        },
        {
            "pod": "ml/probe-2",
            "container": None,
            "command": "nvidia-smi -L",
            "ok": False,
            "output": "exited with status 1: no devices",
        },
    ]
    assert record["devices"] == [
        {"claim": "ml/gpu", "pod": "ml/probe", "devices": ["gpu.example.com/node-0/gpu-0"], "node": "node-0"}
    ]


def test_a_pass_without_verify_exec_records_no_exec_key() -> None:
    assert "exec" not in evidence_record(delivery([]), "a" * 40, "apply").to_json()
