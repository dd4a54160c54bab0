"""Driver upgrades in waves (issue 32): what the waves cost beyond the plugin pods' own start and the soaks.

    python benchmarks/bench_waves.py [--nodes 12] [--waves 1,25%,50%,100%] [--repeat 3] [--strict]

On the simulated cluster (its kubelet and driver, real HTTP), a driver DaemonSet delivered OnDelete with a
new template is upgraded by `cluster/waverollout.run_rollout` with drainDevices (a DeviceTaintRule per pool)
and no soak. Its own start is measured first, without any wave: an old plugin pod deleted by hand, timed
until its replacement is Ready and the node's ResourceSlices are republished (polled every 10 ms), the
median of --repeat nodes. A wave's overhead is its time (started to verified) minus that own start: the
taints and their removal, the reads of slices, pods and revisions, the polls (every 0.1 s, as the reconcile
pass runs them), the progress saves and Events. Target: < 2 s per wave. `--strict` exits 1 when missed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from wave_fixtures import plugin_daemonset  # noqa: E402

from reconciler.cluster.client import ClusterClient  # noqa: E402
from reconciler.cluster.waverollout import WaveControl, run_rollout  # noqa: E402
from reconciler.model.driver_rollout import RolloutSpec, parse_wave  # noqa: E402
from reconciler.sim.controlplane import install  # noqa: E402
from reconciler.sim.server import SimCluster  # noqa: E402

NS, DS, DRIVER = "gpu-driver", "gpu-plugin", "gpu.example.com"
TARGET_SECONDS = 2.0


def daemonset(image: str) -> dict[str, Any]:
    return plugin_daemonset(image, NS, DS, DRIVER)


def pods_by_node(client: ClusterClient) -> dict[str, dict[str, Any]]:
    return {
        p["spec"]["nodeName"]: p
        for p in client.list_kind("", "Pod", NS)
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def ready(pod: dict[str, Any]) -> bool:
    return any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in (pod.get("status") or {}).get("conditions") or []
    )


def slice_uids(client: ClusterClient, node: str) -> set[str]:
    return {
        s["metadata"]["uid"]
        for s in client.list_kind("resource.k8s.io", "ResourceSlice")
        if s["spec"].get("nodeName") == node
    }


def wait(condition: Any, timeout: float, what: str, interval: float = 0.01) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(interval)


def own_start(client: ClusterClient, node: str) -> float:
    """Seconds from deleting the node's plugin pod to its replacement Ready and its slices republished."""
    old = pods_by_node(client)[node]
    slices = slice_uids(client, node)
    started = time.monotonic()
    client.delete(client.resource_for("v1", "Pod"), NS, old["metadata"]["name"])

    def replaced() -> bool:
        pod = pods_by_node(client).get(node)
        now = slice_uids(client, node)
        return (
            pod is not None
            and pod["metadata"]["uid"] != old["metadata"]["uid"]
            and ready(pod)
            and bool(now)
            and not (now & slices)
        )

    wait(replaced, 60, f"the plugin replaced on {node}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=12)
    parser.add_argument("--waves", default="1,25%,50%,100%")
    parser.add_argument("--repeat", type=int, default=3, help="nodes whose own start is measured")
    parser.add_argument("--strict", action="store_true")
    args = parser.parse_args()
    waves = tuple(w for w in (parse_wave(text) for text in args.waves.split(",")) if w is not None)
    spec = RolloutSpec(waves=waves, drain_devices=True)
    with SimCluster(served_versions=("v1", "v1beta2")) as sim:
        plane = install(sim, nodes=args.nodes, devices_per_node=2, drivers=(DRIVER,), time_scale=0.01)
        try:
            with ClusterClient.for_url(sim.url) as client:
                client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NS}})
                client.apply(daemonset("registry.example.com/gpu-plugin:1"))
                nodes = [f"sim-node-{i}" for i in range(args.nodes)]
                wait(
                    lambda: (
                        len(pods_by_node(client)) == args.nodes
                        and all(ready(p) for p in pods_by_node(client).values())
                        and all(slice_uids(client, n) for n in nodes)
                    ),
                    60,
                    "the plugin on every node",
                )
                own = statistics.median(own_start(client, node) for node in nodes[-args.repeat :])
                client.apply(daemonset("registry.example.com/gpu-plugin:2"))
                marks: dict[int, dict[str, float]] = {}
                sizes: dict[int, int] = {}

                def event(reason: str, message: str, _warning: bool) -> None:
                    if reason in ("WaveStarted", "WaveVerified"):
                        number = int(message.split("wave ", 1)[1].split(" ", 1)[0])
                        marks.setdefault(number, {})[reason] = time.monotonic()
                        if reason == "WaveStarted":
                            sizes[number] = len(message.rsplit(": ", 1)[1].split(", "))

                live = client.get(client.resource_for("apps/v1", "DaemonSet"), NS, DS) or {}
                started = time.monotonic()
                outcome = run_rollout(client, live, spec, WaveControl(event=event))
                total = time.monotonic() - started
        finally:
            plane.stop()
    if outcome.error:
        print(f"the rollout failed: {outcome.error}", file=sys.stderr)
        return 1
    print(f"waves: {args.nodes} nodes, waves {args.waves}, drainDevices, no soak (simulated cluster)")
    print(
        f"  a plugin pod's own start (deleted → replacement Ready, slices republished): {own:.2f} s (median)"
    )
    overheads = []
    for number in sorted(marks):
        seconds = marks[number]["WaveVerified"] - marks[number]["WaveStarted"]
        overheads.append(seconds - own)
        print(
            f"  wave {number}: {sizes[number]:>2} node(s) {seconds:5.2f} s, overhead {seconds - own:5.2f} s"
        )
    worst = max(overheads)
    whole = (total - len(marks) * own) / max(1, len(marks))
    print(f"  the whole rollout's overhead (planning and settling included): {whole:.2f} s per wave")
    overheads.append(whole)
    worst = max(overheads)
    print(
        f"  whole rollout {total:.2f} s; overhead per wave: median {statistics.median(overheads):.2f} s, max {worst:.2f} s"
    )
    met = worst < TARGET_SECONDS
    print(
        f"  target: < {TARGET_SECONDS:g} s per wave beyond the pods' own start and the soaks: {'met' if met else 'MISSED'}"
    )
    return 1 if args.strict and not met else 0


if __name__ == "__main__":
    raise SystemExit(main())
