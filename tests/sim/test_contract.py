"""Runs the shared Kubernetes API contract suite (../shared/kube-contract) against the simulated cluster."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from reconciler.sim.server import SimCluster

CONTRACT = Path(__file__).resolve().parents[2].parent / "shared" / "kube-contract"


def test_contract_suite_passes_against_the_sim(tmp_path: Path) -> None:
    assert (CONTRACT / "test_contract.py").is_file(), (
        f"the contract suite is missing at {CONTRACT}: clone the shared/ directory beside the repository"
    )
    with SimCluster() as cluster:
        env = dict(os.environ, KUBE_CONTRACT_URL=cluster.url)
        env.pop("KUBECONFIG", None)
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", str(CONTRACT), "-q", "-p", "no:cacheprovider", "-o", "addopts="],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
    tail = "\n".join(proc.stdout.splitlines()[-40:])
    assert proc.returncode == 0, f"contract suite failed against the sim:\n{tail}\n{proc.stderr[-2000:]}"
    assert " passed" in tail and "failed" not in tail and "error" not in tail.lower(), tail
