"""Dry-run + staged apply of 1,000 objects against `sim serve`, side by side with kubectl (issue 4 targets).

    python benchmarks/bench_apply.py [--objects 1000] [--concurrency 16] [--strict]

(a) ours: server-side dry-run of the whole plan, then the staged apply (fresh server);
(b) `kubectl apply --server-side` of the same files against another fresh server (namespaces file first,
    counted in kubectl's time, as kubectl cannot order them);
(c) ours again on (a)'s server: a no-op re-apply, which must send no writes, target < 2 s;
(d) `dra-gitops apply` (load, policies, delivery, as the command runs it) of the same unchanged tree on
    (a)'s server, twice: the first dry-runs every object and records what it delivered; the second finds
    the tree as last delivered and compares the live objects (one LIST per kind). Target for the second:
    < 1 s, 0 writes.
Each server is `dra-gitops sim serve --no-control-plane` in its own process, so client and server do not
share a GIL. Target: (a) at least 3x faster than (b). `--strict` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconciler.cluster.apply import apply_plan, dry_run  # noqa: E402
from reconciler.cluster.applyset import applyset_id  # noqa: E402
from reconciler.cluster.client import ClusterClient  # noqa: E402
from reconciler.delivery.check import CheckOptions  # noqa: E402
from reconciler.delivery.desired import load_directories  # noqa: E402
from reconciler.delivery.pipeline import DeliverOptions, deliver  # noqa: E402
from reconciler.model.loader import DEFAULT_LIMITS, load_paths  # noqa: E402
from reconciler.model.plan import compute_plan  # noqa: E402

RATIO_TARGET = 3.0
NOOP_TARGET = 2.0
ONE_SHOT_TARGET = 1.0
NAMESPACES = 20


def generate(root: Path, total: int) -> int:
    """20 namespaces, and ConfigMaps, DeviceClasses and ResourceClaimTemplates up to `total` objects."""
    (root / "00-namespaces").mkdir(parents=True)
    (root / "objects").mkdir()
    namespaces = [f"bench-{i:02d}" for i in range(NAMESPACES)]
    docs = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces]
    (root / "00-namespaces" / "namespaces.yaml").write_text(yaml.safe_dump_all(docs))
    rest = total - NAMESPACES
    classes = rest // 10
    per_ns = (rest - classes) // NAMESPACES
    configmaps = per_ns // 2
    templates = per_ns - configmaps
    classes = rest - per_ns * NAMESPACES
    class_docs = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": f"bench-{i:03d}.example.com"},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "bench-{i:03d}.example.com"'}}]},
        }
        for i in range(classes)
    ]
    (root / "objects" / "classes.yaml").write_text(yaml.safe_dump_all(class_docs))
    count = NAMESPACES + classes
    for n, ns in enumerate(namespaces):
        ns_docs: list[dict[str, object]] = [
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"cm-{i:03d}", "namespace": ns, "labels": {"bench": "apply"}},
                "data": {"key": f"value-{i}", "other": "x" * 64},
            }
            for i in range(configmaps)
        ]
        ns_docs += [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "ResourceClaimTemplate",
                "metadata": {"name": f"rct-{i:03d}", "namespace": ns},
                "spec": {
                    "spec": {
                        "devices": {
                            "requests": [
                                {
                                    "name": "gpu",
                                    "exactly": {
                                        "deviceClassName": f"bench-{(n + i) % max(classes, 1):03d}.example.com"
                                    },
                                }
                            ]
                        }
                    }
                },
            }
            for i in range(templates)
        ]
        (root / "objects" / f"{ns}.yaml").write_text(yaml.safe_dump_all(ns_docs))
        count += len(ns_docs)
    return count


@contextmanager
def sim_server(workdir: Path, name: str) -> Iterator[Path]:
    """A fresh `sim serve --no-control-plane` subprocess; yields its kubeconfig."""
    kubeconfig = workdir / f"{name}.kubeconfig"
    proc = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "sim", "serve", "--port", "0", "--no-control-plane"]
        + ["--kubeconfig-out", str(kubeconfig)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http"):
            raise SystemExit(f"sim serve did not start (got {url!r})")
        deadline = time.monotonic() + 10
        while not kubeconfig.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        yield kubeconfig
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def run_ours(kubeconfig: Path, manifests_dir: Path, concurrency: int) -> tuple[float, float, int, float, int]:
    """(dry-run s, apply s, writes, no-op re-apply s, no-op writes)."""
    loaded = load_paths([manifests_dir], display_root=manifests_dir)
    plan = compute_plan([], loaded.manifests)
    set_id = applyset_id("bench", "dra-gitops")
    with ClusterClient.from_kubeconfig(str(kubeconfig)) as client:
        started = time.perf_counter()
        checked = dry_run(client, plan, applyset_id=set_id, concurrency=concurrency)
        dry_seconds = time.perf_counter() - started
        if not checked.ok:
            raise SystemExit(f"dry-run failed: {[r.error for r in checked.results if r.error][:3]}")
        started = time.perf_counter()
        result = apply_plan(client, plan, applyset_id=set_id, checked=checked, concurrency=concurrency)
        apply_seconds = time.perf_counter() - started
        if not result.ok:
            raise SystemExit(f"apply failed: {result.error}")
        writes = result.writes
        # (c) what a reconcile pass of an unchanged commit does: dry-run, then apply (nothing to write)
        before = client.writes_sent
        started = time.perf_counter()
        again = dry_run(client, plan, applyset_id=set_id, concurrency=concurrency)
        noop = apply_plan(client, plan, applyset_id=set_id, checked=again, concurrency=concurrency)
        noop_seconds = time.perf_counter() - started
        if not noop.ok:
            raise SystemExit(f"no-op re-apply failed: {noop.error}")
        return dry_seconds, apply_seconds, writes, noop_seconds, client.writes_sent - before


def run_one_shot(kubeconfig: Path, manifests_dir: Path) -> list[tuple[float, int, int]]:
    """(seconds, writes, requests) of two `apply` deliveries of the unchanged tree, one after the other."""
    figures = []
    with ClusterClient.from_kubeconfig(str(kubeconfig)) as client:
        client.request_log = []
        for _ in range(2):
            writes, requests = client.writes_sent, len(client.request_log)
            started = time.perf_counter()
            desired = load_directories([manifests_dir], DEFAULT_LIMITS)
            delivery = deliver(
                client, desired, CheckOptions(), DeliverOptions(target="bench"), lambda _l: None
            )
            seconds = time.perf_counter() - started
            if delivery.outcome != "applied":
                raise SystemExit(f"one-shot apply: {delivery.outcome}: {delivery.failure_message()}")
            figures.append((seconds, client.writes_sent - writes, len(client.request_log) - requests))
    return figures


def run_kubectl(kubectl: str, kubeconfig: Path, manifests_dir: Path) -> float:
    started = time.perf_counter()
    for target in (manifests_dir / "00-namespaces", manifests_dir / "objects"):
        done = subprocess.run(
            [kubectl, "apply", "--server-side", "-R", "-f", str(target), "--kubeconfig", str(kubeconfig)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        if done.returncode != 0:
            raise SystemExit(f"kubectl failed: {done.stderr[-1000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--kubectl", default=shutil.which("kubectl") or "/usr/bin/kubectl")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-apply-") as tmp:
        workdir = Path(tmp)
        manifests_dir = workdir / "manifests"
        count = generate(manifests_dir, args.objects)
        with sim_server(workdir, "ours") as kubeconfig:
            dry_s, apply_s, writes, noop_s, noop_writes = run_ours(
                kubeconfig, manifests_dir, args.concurrency
            )
            (first_s, first_w, first_r), (again_s, again_w, again_r) = run_one_shot(kubeconfig, manifests_dir)
        ours = dry_s + apply_s
        kubectl_s: float | None = None
        if os.path.exists(args.kubectl):
            with sim_server(workdir, "kubectl") as kubeconfig:
                kubectl_s = run_kubectl(args.kubectl, kubeconfig, manifests_dir)
    print(f"objects: {count}")
    print(
        f"(a) dra-gitops dry-run + staged apply: {ours:.2f} s (dry-run {dry_s:.2f} s, apply {apply_s:.2f} s, {writes} writes)"
    )
    missed: list[str] = []
    if kubectl_s is not None:
        ratio = kubectl_s / ours
        print(f"(b) kubectl apply --server-side:       {kubectl_s:.2f} s")
        print(f"    ratio kubectl / dra-gitops:         {ratio:.2f}x (target >= {RATIO_TARGET:g}x)")
        if ratio < RATIO_TARGET:
            missed.append("ratio")
    else:
        print(f"(b) kubectl not found at {args.kubectl}: skipped")
    print(
        f"(c) no-op re-apply:                    {noop_s:.2f} s, {noop_writes} writes (target < {NOOP_TARGET:g} s, 0 writes)"
    )
    if noop_writes or noop_s >= NOOP_TARGET:
        missed.append("no-op")
    print(
        f"(d) one-shot apply of the unchanged tree: {first_s:.2f} s, {first_w} writes, {first_r} requests (first)"
    )
    print(
        f"    again, as last delivered:           {again_s:.2f} s, {again_w} writes, {again_r} requests "
        f"(target < {ONE_SHOT_TARGET:g} s, 0 writes)"
    )
    if again_w or again_s >= ONE_SHOT_TARGET:
        missed.append("one-shot")
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
