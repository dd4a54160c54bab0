"""Runs the contract suite beside the repository (../shared/kube-contract), where there is one, against the sim.

tests/contract is the project's own copy and always runs; the one beside the repository gains tests first,
so it runs too when it is there (in a subprocess: its conftest.py would clash with tests/contract's).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from reconciler.sim.server import SimCluster

CONTRACT = Path(__file__).resolve().parents[2].parent / "shared" / "kube-contract"


@pytest.mark.skipif(
    not (CONTRACT / "test_contract.py").is_file(),
    reason=f"no contract suite beside the repository ({CONTRACT}); tests/contract is the copy that always runs",
)
def test_shared_contract_suite_passes_against_the_sim(tmp_path: Path) -> None:
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
