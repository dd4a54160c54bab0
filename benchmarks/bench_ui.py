"""Dashboard figures (issues 21, 28): server-side rendering and the controller's memory with the dashboard open.

    python benchmarks/bench_ui.py [--repeat 20] [--objects 1000] [--strict]

(a) Rendering on the server, through the dashboard's WSGI application (`reconciler/ui/app.py`, Werkzeug
    routing, Jinja2 templates) from data in memory: every page with 100 history entries (findings,
    verification chains and diagnoses in each): targets, history, a commit, its report; the device map
    with 1,000 devices on 50 nodes (600 allocated, cards), and with 10,000 devices on 1,250 nodes
    (compact). Best and median of --repeat. Targets: < 50 ms each page, < 100 ms the 10,000-device map.
(c) Webhook → pass start: a signed generic webhook POSTed to the receiver (waitress, a connection kept
    alive as a forge's) until the controller's trigger runs. Best and median of 200.
(b) Memory: RSS of a `dra-gitops run` process managing --objects objects after its first pass, while a
    reader keeps the dashboard open (every page fetched again and again, as the page's script polls).
    Target: < 150 MB.
`--strict` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import http.client
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_reconcile import many_objects, sim_serve  # noqa: E402
from helpers import GitRemote  # noqa: E402

from reconciler.cluster.client import ClusterClient  # noqa: E402
from reconciler.ui.app import Dashboard  # noqa: E402
from reconciler.ui.devices import DeviceCell, build_device_cells  # noqa: E402
from reconciler.ui.targets import TargetView  # noqa: E402

TARGET_MS = 50.0
TARGET_MAP_MS = 100.0
TARGET_MB = 150.0


class _Devices:
    def __init__(self, cells: list[DeviceCell]) -> None:
        self.cells = cells
        self.warnings: list[str] = []
        self.clusters: list[tuple[str, str]] = []
        self.cluster = ""
        self.error = ""
        self.pending: list[Any] = []


class StaticData:
    """The dashboard's data held in memory: what the pages render, without the cluster's reading time."""

    def __init__(self, view: TargetView, cells: list[DeviceCell]) -> None:
        self.view = view
        self.cells = cells

    def targets(self) -> list[TargetView]:
        return [self.view]

    def target(self, name: str, shas: Sequence[str] = ()) -> TargetView | None:
        return self.view if name == self.view.name else None

    def version(self) -> str:
        return "1"

    def devices(self, cluster: str = "") -> _Devices:
        return _Devices(self.cells)


def history(entries: int) -> TargetView:
    records: list[dict[str, Any]] = []
    for i in range(entries):
        sha = f"{i:040x}"
        records.append(
            {
                "id": entries - i,
                "sha": sha,
                "operation": "apply",
                "outcome": ("applied", "denied", "verify-failed")[i % 3],
                "at": "2026-01-01T00:00:00Z",
                "diff": {"summary": "1 to create, 2 to update, 0 to delete, 40 unchanged"},
                "decisions": [
                    {
                        "rule": "capacity",
                        "severity": "warn",
                        "ref": f"Deployment/ml/t{j}",
                        "msg": "tight <fit>",
                        "path": f"w/t{j}.yaml",
                        "line": 3,
                    }
                    for j in range(5)
                ],
                "devices": [
                    {
                        "claim": f"ml/claim-{i}-{j}",
                        "pod": f"ml/pod-{i}-{j}",
                        "devices": [f"gpu.example.com/node-{j}/gpu-0"],
                        "node": f"node-{j}",
                    }
                    for j in range(8)
                ],
                "timings": {"check": 0.1, "dry_run": 0.2, "apply": 0.3, "verify": 1.0},
                "message": "verification failed: pod ml/t <x>" if i % 3 == 2 else None,
                "diagnoses": [
                    {
                        "mode": "exhaustion",
                        "ref": f"ResourceClaim/ml/claim-{i}-0",
                        "summary": "no free device",
                        "evidence": ["8 of 8 allocated"],
                        "recovery": ["free a device"],
                    }
                ]
                if i % 3 == 2
                else None,
            }
        )
    status = {
        "lastGood": records[0]["sha"],
        "lastAttempted": {"sha": records[0]["sha"], "outcome": "applied"},
        "history": records,
        # a driver upgrade in waves under way (issue 32): the targets and history pages show it
        "inProgress": {
            "sha": "f" * 40,
            "operation": "apply",
            "stage": "1",
            "since": "2026-01-01T00:00:00Z",
            "rollout": {
                "driver": "gpu.example.com",
                "namespace": "gpu-system",
                "daemonset": "gpu-plugin",
                "wave": 3,
                "of": 4,
                "nodes": 50,
                "done": [f"node-{n}" for n in range(20)],
                "failedNodes": {"node-20": "CrashLoopBackOff <b>"},
                "phase": "soaking",
                "soakUntil": "2026-01-01T00:02:00Z",
                "since": "2026-01-01T00:00:00Z",
            },
        },
    }
    commits = {
        r["sha"]: {"subject": f"change {r['id']} <b>", "author": "Dev <dev@example.com>"} for r in records
    }
    return TargetView("bench", "dra-gitops", status, commits)


def devices(count: int, nodes: int = 50, allocated: int = 600) -> list[DeviceCell]:
    per_node = count // nodes
    slices = [
        {
            "metadata": {"name": f"node-{n}"},
            "spec": {"driver": "gpu.example.com", "nodeName": f"node-{n}", "pool": {"name": f"node-{n}", "generation": 1, "resourceSliceCount": 1},
                     "devices": [{"name": f"gpu-{d}"} for d in range(per_node)]},
        }
        for n in range(nodes)
    ]  # fmt: skip
    claims = []
    for i in range(allocated):
        n, d = divmod(i, per_node)
        claims.append(
            {
                "metadata": {
                    "namespace": f"team-{i % 7}",
                    "name": f"claim-{i}",
                    "annotations": {"example.com/notes": "<i>x</i>"},
                },
                "status": {
                    "allocation": {
                        "devices": {
                            "results": [
                                {"driver": "gpu.example.com", "pool": f"node-{n}", "device": f"gpu-{d}"}
                            ]
                        }
                    },
                    "reservedFor": [{"resource": "pods", "name": f"pod-{i}"}],
                },
            }
        )
    nodes_ = [
        {
            "metadata": {"name": f"node-{n}"},
            "status": {"conditions": [{"type": "Ready", "status": "True" if n % 10 else "False"}]},
        }
        for n in range(nodes)
    ]
    return build_device_cells(slices, claims, nodes_)


def bench_render(repeat: int) -> dict[str, tuple[float, float, int]]:
    """path -> (best ms, median ms, bytes)."""
    from werkzeug.test import Client

    cells = devices(1000)
    assert len(cells) == 1000
    view = history(100)
    failed = view.status["history"][2]["sha"]
    big = devices(10000, nodes=1250, allocated=6000)
    small = Client(Dashboard(StaticData(view, cells)))
    large = Client(Dashboard(StaticData(view, big)))
    figures = {}
    for client, path in (
        (small, "/"),
        (small, "/targets/bench/history"),
        (small, "/targets/bench/history?outcome=failed&page=2"),
        (small, f"/targets/bench/commits/{failed}"),
        (small, f"/targets/bench/commits/{failed}/report"),
        (small, "/devices"),
        (small, "/devices?namespace=team-3"),
        (large, "/devices?view=compact"),
    ):
        times = []
        size = 0
        for _ in range(repeat):
            started = time.perf_counter()
            answer = client.get(path)
            body = answer.data
            times.append((time.perf_counter() - started) * 1000)
            assert answer.status_code == 200, (path, answer.status_code)
            size = len(body)
        key = "10,000 devices " + path if client is large else path
        figures[key] = (min(times), statistics.median(times), size)
    return figures


def bench_webhook(rounds: int = 200) -> tuple[float, float]:
    """(best ms, median ms) from a webhook's POST to its trigger running."""
    import threading

    from reconciler.loop.httpserver import ControllerServer, HookTarget
    from reconciler.loop.metrics import Metrics

    fired = threading.Event()
    token = "w" * 32
    server = ControllerServer(
        trigger=lambda names, reason: fired.set(),
        metrics=Metrics(),
        hook_targets=[HookTarget("bench", "/srv/bench.git", "main", generic_token=token.encode())],
        webhook_port=0,
    )
    server.start()
    assert server.webhook_port is not None
    conn = http.client.HTTPConnection("127.0.0.1", server.webhook_port, timeout=30)
    times = []
    try:
        for _ in range(rounds):
            fired.clear()
            started = time.perf_counter()
            conn.request("POST", "/hooks/generic", body=b"{}", headers={"Authorization": f"Bearer {token}"})
            answer = conn.getresponse()
            answer.read()
            assert answer.status == 202 and fired.wait(30)
            times.append((time.perf_counter() - started) * 1000)
    finally:
        conn.close()
        server.stop()
    return min(times), statistics.median(times)


def _get(port: int, path: str) -> int:
    """The status of a GET (a report page that could not be produced counts as 404)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("GET", path)
        answer = conn.getresponse()
        body = answer.read()
        return 404 if b"cannot be produced" in body else answer.status
    finally:
        conn.close()


def bench_memory(tmp: Path, objects: int, rounds: int = 20) -> tuple[float, dict[str, int]]:
    """RSS of `run` managing `objects` objects after a reader fetched every page `rounds` times."""
    with sim_serve(tmp, "--no-control-plane") as kubeconfig:
        remote = GitRemote(tmp / "mem")
        many_objects(remote, objects)
        sha = remote.commit_and_push("many objects")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        command = [
            sys.executable, "-m", "reconciler", "run", "--repo", remote.url, "--kubeconfig", str(kubeconfig),
            "--poll-interval", "1s", "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp / "memcache"), "-q",
        ]  # fmt: skip
        proc = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        try:
            client = ClusterClient.from_kubeconfig(str(kubeconfig), None)
            resource = client.resource_for("v1", "ConfigMap")
            for _ in range(1200):
                state = client.get(resource, "dra-gitops", "dra-gitops-default")
                if state and (state.get("data") or {}).get("lastGood"):
                    break
                time.sleep(0.1)
            client.close()
            statuses: dict[str, int] = {}
            pages = [
                "/",
                "/targets/default/history",
                f"/targets/default/commits/{sha}",
                "/devices",
                "/api/version",
            ]
            for _ in range(rounds):
                for path in pages:
                    statuses[path] = _get(port, path)
            # The commit's report (as its pass recorded it) once.
            statuses["report"] = _get(port, f"/targets/default/commits/{sha}/report")
            for path in pages:
                statuses[path] = _get(port, path)
            rss_kb = 0
            for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    rss_kb = int(line.split()[1])
            return rss_kb / 1024, statuses
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    missed = []
    for path, (best, median, size) in bench_render(args.repeat).items():
        target = TARGET_MAP_MS if path.startswith("10,000") else TARGET_MS
        print(
            f"render {path}: best {best:.1f} ms, median {median:.1f} ms, {size / 1024:.0f} KiB (target < {target:.0f} ms)"
        )
        if median >= target:
            missed.append(f"render {path}")
    best, median = bench_webhook()
    print(f"webhook -> pass start (trigger called): best {best:.2f} ms, median {median:.2f} ms")
    with tempfile.TemporaryDirectory() as name:
        rss, statuses = bench_memory(Path(name), args.objects)
    print(
        f"`run` RSS with {args.objects} managed objects and the dashboard open: {rss:.0f} MB (target < {TARGET_MB:.0f} MB); answers {statuses}"
    )
    if rss >= TARGET_MB:
        missed.append("memory")
    if any(code != 200 for code in statuses.values()):
        missed.append("dashboard answers")
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if missed and args.strict else 0


if __name__ == "__main__":
    raise SystemExit(main())
