"""`run --log-format json`: every line the process writes to stderr is a JSON object, whoever logged it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import GitRemote

from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"


def run_once(args: list[str], kubeconfig: Path) -> list[dict[str, Any]]:
    command = [sys.executable, "-m", "reconciler", "run", "--once", "--listen", "127.0.0.1:0"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
    done = subprocess.run(
        [*command, *args, "--kubeconfig", str(kubeconfig), "--log-format", "json", "--grace", "5s"],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines, done.stderr
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            raise AssertionError(f"not a JSON line: {line!r}") from None
    return records


def test_lease_and_force_push_lines_are_json_too(tmp_path: Path) -> None:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    remote.commit_and_push("example")
    with SimCluster() as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
            args = ["--repo", remote.url, "--state-namespace", "dra-state"]
            first = run_once(args, kubeconfig)
            remote.git("commit", "--quiet", "--amend", "-m", "example, rewritten")
            remote.push("--force")
            second = run_once(args, kubeconfig)
        finally:
            plane.stop()
    for record in first + second:
        assert {"time", "level", "logger", "msg"} <= set(record), record
    by_logger = {(r["logger"], r["level"]) for r in first + second}
    # Modules that log under their own name (not the dra_gitops tree) come out in the chosen format.
    assert ("reconciler.cluster.lease", "info") in by_logger
    assert ("dra_gitops.controller", "info") in by_logger
    (rewritten,) = [
        r for r in second if r["logger"] == "reconciler.source.remote" and "rewritten" in r["msg"]
    ]
    assert rewritten["level"] == "warning"
    created = [r["msg"] for r in first if "namespace" in r["msg"].lower()]
    assert created == ["created namespace dra-state (it holds the targets' Leases and state)"]
