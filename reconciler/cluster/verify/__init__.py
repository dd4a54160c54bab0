"""Verification of the DRA chain of the workloads a plan applied (fail fast on terminal DRA signals).

`wait.py` (`verify_workloads`: observe, judge, until the chain holds or a terminal signal shows) over
`observe.py` (one observation), `chain.py` (the chain of one pod), `signals.py` (terminal signals,
rollout done) and `result.py` (what it returns, and how that reads).
"""

from reconciler.cluster.verify.chain import chain_of
from reconciler.cluster.verify.result import (
    ClaimEvidence,
    ExecResult,
    VerifyResult,
    evidence_line,
    render_evidence,
)
from reconciler.cluster.verify.wait import VERIFY_EXEC_ANNOTATION, verify_workloads

__all__ = [
    "ClaimEvidence",
    "ExecResult",
    "VERIFY_EXEC_ANNOTATION",
    "VerifyResult",
    "chain_of",
    "evidence_line",
    "render_evidence",
    "verify_workloads",
]
