"""Reconcile-loop figures (issue 8 targets), against `sim serve` in its own process and real bare Git repos.

    python benchmarks/bench_reconcile.py [--runs 5] [--objects 1000] [--strict]

(a) push → verified: `git push` of a one-line change to manifests-example (a pod-template annotation of
    the notebook, so its pod rolls), then the pass a webhook triggers, until the revision is applied and
    verified. Median of --runs. Target < 2 s.
(b) push → rollback finished for a commit asking for more devices than exist (two more trainers in a
    Namespace of their own, which the rollback prunes), `--grace 5`. Target < grace + 3 s = 8 s.
(c) a no-op pass over --objects managed objects: seconds, writes, requests per kind. Targets < 0.5 s,
    0 writes, at most 2 requests per kind.
(d) memory: RSS of a `dra-gitops run` process managing --objects objects after a few passes. Target < 150 MB.
`--strict` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from helpers import GitRemote  # noqa: E402

from reconciler.cluster.client import ClusterClient  # noqa: E402
from reconciler.delivery.check import CheckOptions  # noqa: E402
from reconciler.delivery.pipeline import DeliverOptions  # noqa: E402
from reconciler.loop.passes.reconcile import Reconciler  # noqa: E402
from reconciler.loop.passes.reconcile_types import ReconcileOptions  # noqa: E402
from reconciler.loop.passes.revisions import GitRevisions  # noqa: E402
from reconciler.source.remote import GitSource  # noqa: E402

EXAMPLE = ROOT / "manifests-example"


@contextmanager
def sim_serve(tmp: Path, *args: str) -> Iterator[Path]:
    kubeconfig = tmp / f"sim-{time.monotonic_ns()}.kubeconfig"
    out = tmp / "sim.out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "sim", "serve", "--kubeconfig-out", str(kubeconfig), *args],
        stdout=out.open("w"),
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        for _ in range(300):
            if kubeconfig.exists() and out.read_text().startswith("http"):
                break
            time.sleep(0.1)
        yield kubeconfig
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def reconciler_for(
    kubeconfig: Path, remote: GitRemote, tmp: Path, grace: float
) -> tuple[Reconciler, ClusterClient]:
    client = ClusterClient.from_kubeconfig(str(kubeconfig), None)
    source = GitRevisions(GitSource(remote.url, tmp / f"cache-{time.monotonic_ns()}", branch="main"))
    options = ReconcileOptions(
        DeliverOptions(target="bench", grace=grace, stage_timeout=60, verify_timeout=60)
    )
    return Reconciler(client, source, options, CheckOptions()), client


def roll_notebook(remote: GitRemote, run: int) -> None:
    path = remote.work / "40-workloads" / "notebook.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    # A pod-template annotation: the notebook's pod rolls, and verification waits for the new one.
    template_meta = docs[0]["spec"]["template"].setdefault("metadata", {})
    template_meta.setdefault("annotations", {})["bench/run"] = str(run)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def bench_push_to_verified(tmp: Path, runs: int) -> tuple[float, float]:
    with sim_serve(tmp, "--nodes", "2", "--canary-nodes", "1", "--devices-per-node", "2") as kubeconfig:
        remote = GitRemote(tmp / "push")
        shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
        remote.commit_and_push("example")
        reconciler, client = reconciler_for(kubeconfig, remote, tmp, grace=5)
        first = reconciler.reconcile()
        assert first.outcome == "applied", first.message
        times = []
        for run in range(runs):
            roll_notebook(remote, run)
            started = time.perf_counter()
            remote.commit_and_push(f"bench {run}")
            result = reconciler.reconcile()  # what the webhook's trigger runs
            times.append(time.perf_counter() - started)
            assert result.outcome == "applied", result.message
        # (b) a commit asking for more devices than exist: push to rollback finished.
        burst(remote)
        started = time.perf_counter()
        remote.commit_and_push("too many GPUs")
        result = reconciler.reconcile()
        rollback = time.perf_counter() - started
        assert result.outcome == "rolled-back", (result.outcome, result.message)
        client.close()
        return statistics.median(times), rollback


def burst(remote: GitRemote) -> None:
    """Two more GPU trainers in a new Namespace: five devices wanted, four exist."""
    trainer = [
        d for d in yaml.safe_load_all((remote.work / "40-workloads" / "trainer.yaml").read_text()) if d
    ]
    template = [
        d
        for d in yaml.safe_load_all((remote.work / "30-claims" / "single-gpu-template.yaml").read_text())
        if d
    ]
    docs: list[dict[str, object]] = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "burst"}}]
    for doc in (*template, *trainer):
        doc["metadata"]["namespace"] = "burst"
        docs.append(doc)
    (remote.work / "40-workloads" / "burst.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))


def many_objects(remote: GitRemote, objects: int) -> None:
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bench"}}]
    for index in range(objects - 1):
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    "name": f"settings-{index:04d}",
                    "namespace": "bench",
                    "labels": {"app": "bench"},
                },
                "data": {"index": str(index), "value": "x" * 64},
            }
        )
    (remote.work / "objects.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))


def bench_noop(tmp: Path, objects: int) -> tuple[float, int, dict[str, int]]:
    with sim_serve(tmp, "--no-control-plane") as kubeconfig:
        remote = GitRemote(tmp / "noop")
        many_objects(remote, objects)
        remote.commit_and_push("many objects")
        reconciler, client = reconciler_for(kubeconfig, remote, tmp, grace=5)
        assert reconciler.reconcile().outcome == "applied"
        reconciler.reconcile()  # fingerprints learnt
        client.request_log = []
        writes = client.writes_sent
        started = time.perf_counter()
        result = reconciler.reconcile()
        seconds = time.perf_counter() - started
        assert result.outcome == "unchanged", result.outcome
        per_kind: Counter[str] = Counter()
        for _method, path, _query in client.request_log:
            parts = [p for p in path.split("/") if p]
            per_kind[parts[-1] if "namespaces" not in parts[-2:] else parts[-1]] += 1
        client.close()
        return seconds, client.writes_sent - writes, dict(per_kind)


def bench_memory(tmp: Path, objects: int) -> float:
    with sim_serve(tmp, "--no-control-plane") as kubeconfig:
        remote = GitRemote(tmp / "mem")
        many_objects(remote, objects)
        remote.commit_and_push("many objects")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "reconciler",
                "run",
                "--repo",
                remote.url,
                "--kubeconfig",
                str(kubeconfig),
                "--poll-interval",
                "1s",
                "--listen",
                f"127.0.0.1:{port}",
                "--cache-dir",
                str(tmp / "memcache"),
                "-q",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            client = ClusterClient.from_kubeconfig(str(kubeconfig), None)
            resource = client.resource_for("v1", "ConfigMap")
            for _ in range(600):
                state = client.get(resource, "dra-gitops", "dra-gitops-default")
                if state and (state.get("data") or {}).get("lastGood"):
                    break
                time.sleep(0.1)
            time.sleep(4)  # a few steady-state passes
            rss_kb = 0
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
            client.close()
            return rss_kb / 1024
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    missed = []
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        median, rollback = bench_push_to_verified(tmp, args.runs)
        print(
            f"push -> verified (manifests-example): median {median:.2f}s over {args.runs} runs (target < 2 s)"
        )
        print(f"push -> rollback finished (grace 5 s): {rollback:.2f}s (target < 8 s: grace + 3 s)")
        seconds, writes, per_kind = bench_noop(tmp, args.objects)
        worst = max(per_kind.values(), default=0)
        print(
            f"no-op pass over {args.objects} objects: {seconds:.3f}s, {writes} writes, requests {per_kind} "
            f"(targets < 0.5 s, 0 writes, <= 2 per kind)"
        )
        rss = bench_memory(tmp, args.objects)
        print(f"controller RSS with {args.objects} managed objects: {rss:.0f} MB (target < 150 MB)")
    if median >= 2:
        missed.append("push -> verified")
    if rollback >= 8:
        missed.append("rollback")
    if seconds >= 0.5 or writes or worst > 2:
        missed.append("no-op pass")
    if rss >= 150:
        missed.append("memory")
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    sys.exit(main())
