"""What verification returns and how it reads: the evidence per claim, the verify-exec results, the result.

Pure.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from reconciler.cluster.diagnose import Diagnosis, render_diagnoses

__all__ = ["ClaimEvidence", "ExecResult", "VerifyResult", "evidence_line", "render_evidence"]


@dataclass
class ClaimEvidence:
    pod: str  # ns/name
    claim: (
        str  # ns/name; "" for a pod without claims; "ns/(not created)" for a template claim not generated yet
    )
    devices: list[str]  # driver/pool/device
    node: str | None  # the node the claim is allocated on (else the pod's node)
    reserved: bool
    pod_ready: bool
    allocated: bool = False
    pod_node: str | None = None
    problem: str = ""  # the first broken link of the chain; "" when the chain holds

    @property
    def ok(self) -> bool:
        return not self.problem

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ExecResult:
    pod: str
    container: str | None
    command: str
    ok: bool
    output: str


@dataclass
class VerifyResult:
    ok: bool
    evidence: list[ClaimEvidence]
    diagnoses: list[Diagnosis]
    message: str
    exec_results: list[ExecResult] = field(default_factory=list)
    elapsed: float = 0.0
    terminal: str = ""  # which terminal signal stopped the wait ("" when ok or timed out)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "message": self.message,
            "terminal": self.terminal,
            "elapsed": round(self.elapsed, 3),
            "evidence": [e.to_json() for e in self.evidence],
            "diagnoses": [d.to_json() for d in self.diagnoses],
            "exec": [asdict(x) for x in self.exec_results],
        }


# ---- rendering (pure) --------------------------------------------------------------------------------


def evidence_line(e: ClaimEvidence) -> str:
    claim = f"claim {e.claim}" if e.claim else "no claims"
    device = f"device {','.join(e.devices)}" if e.devices else "device -"
    parts = [f"Pod {e.pod}", claim]
    if e.claim:
        parts.append(device)
    parts.append(f"node {e.node or e.pod_node or '-'}")
    if e.claim:
        parts.append("reserved" if e.reserved else "not-reserved")
    parts.append("ready" if e.pod_ready else "not-ready")
    line = "  ".join(parts)
    return f"{line}  ({e.problem})" if e.problem else line


def render_evidence(result: VerifyResult) -> str:
    lines = [evidence_line(e) for e in result.evidence]
    for x in result.exec_results:
        status = "ok" if x.ok else "FAILED"
        out = " | ".join(ln for ln in x.output.strip().splitlines()[:5])
        lines.append(f"exec {x.pod} [{x.container or '-'}] {x.command!r}: {status}  {out}".rstrip())
    lines.append(result.message)
    text = "\n".join(lines) + "\n"
    if result.diagnoses:
        text += render_diagnoses(result.diagnoses, "text")
    return text
