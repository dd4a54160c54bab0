"""Scale figures (issue 20): 200 targets over 3 `dra-gitops run` replicas sharding their Leases, against one
`sim serve` process.

    python benchmarks/bench_scale.py [--targets 200] [--replicas 3] [--lease 15] [--interval 15] [--strict]

Each target follows its own directory of one bare Git remote (one ConfigMap each), with its own poll
interval. Figures:
(a) spread: targets held by each replica once the Leases settle (target: ceil/floor of targets/replicas),
    and the time from the start until every target had its first pass (applied and recorded);
(b) interval: over the next poll interval and a half, every target was reconciled at least once more;
(c) handover: the replica holding the most targets is killed with SIGKILL; the time until the survivors
    hold every one of its targets (target: lease duration + one retry period, duration / 7), and the
    spread after;
(d) memory: the highest RSS of each replica over the run (target < 150 MB).
`--strict` exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "faults"))
sys.path.insert(0, str(ROOT))

from controller_support import Running, free_port  # noqa: E402
from faults_support import ServedSim  # noqa: E402
from helpers import GitRemote  # noqa: E402

from reconciler.cluster.leaseshard import HEARTBEAT_PREFIX  # noqa: E402
from reconciler.model.readers import parse_time  # noqa: E402

os.environ.setdefault("RUST_BACKTRACE", "0")
NAMESPACE = "dra-gitops"
RSS_TARGET_MB = 150.0
_PASSES = re.compile(r"^dra_gitops_passes_total\{(?P<labels>[^}]*)\} (?P<value>[0-9.e+]+)$", re.M)


def target_name(index: int) -> str:
    return f"t{index:03d}"


def seed_remote(root: Path, targets: int) -> GitRemote:
    """One bare remote, one directory per target holding one small ConfigMap."""
    remote = GitRemote(root)
    for index in range(targets):
        folder = remote.work / target_name(index)
        folder.mkdir()
        config_map = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": f"scale-{target_name(index)}", "namespace": "default"},
            "data": {"target": target_name(index)},
        }
        (folder / "settings.yaml").write_text(yaml.safe_dump(config_map))
    remote.commit_and_push(f"{targets} targets")
    return remote


def write_config(path: Path, remote: GitRemote, targets: int, interval: float) -> None:
    entries = [
        {
            "name": target_name(index),
            "repo": remote.url,
            "branch": "main",
            "path": target_name(index),
            "pollInterval": f"{interval:g}s",
        }
        for index in range(targets)
    ]
    path.write_text(yaml.safe_dump({"targets": entries}, sort_keys=False))


class Fleet:
    """The replicas, and what the cluster and their /metrics say about them."""

    def __init__(
        self, root: Path, served: ServedSim, config: Path, replicas: int, lease: float, logs: Path
    ) -> None:
        self.served = served
        self.client = served.client()  # one client (and discovery) for every look of the benchmark
        self.runs: dict[str, Running] = {}
        self.peak_rss: dict[str, float] = {}
        for index in range(replicas):
            identity = f"replica-{index}"
            args = ["--config", str(config), "--kubeconfig", str(served.kubeconfig)]
            args += ["--cache-dir", str(root / identity), "--identity", identity]
            args += ["--lease-duration", f"{lease:g}s", "--log-format", "json"]
            self.runs[identity] = Running(args, free_port(), logs / f"{identity}.log")

    def leases(self) -> dict[str, dict[str, Any]]:
        """Target Lease name -> its spec (heartbeats left out)."""
        leases = self.client.list(self.client.resource_for("coordination.k8s.io/v1", "Lease"), NAMESPACE)
        return {
            lease["metadata"]["name"]: dict(lease.get("spec") or {})
            for lease in leases
            if not lease["metadata"]["name"].startswith(HEARTBEAT_PREFIX)
        }

    def holders(self) -> dict[str, str]:
        """Target Lease name -> holder."""
        return {name: str(spec.get("holderIdentity") or "") for name, spec in self.leases().items()}

    def spread(self, alive: set[str]) -> list[int]:
        """Targets held by each live replica, sorted (every target counted once, by its Lease)."""
        counts = Counter(holder for holder in self.holders().values() if holder)
        return sorted(counts.get(identity, 0) for identity in alive)

    def recorded(self) -> int:
        """Targets whose state records a last good revision (their first pass applied)."""
        maps = self.client.list(self.client.resource_for("v1", "ConfigMap"), NAMESPACE)
        return sum(1 for m in maps if (m.get("data") or {}).get("lastGood"))

    def passes(self, alive: set[str]) -> Counter[str]:
        """Passes per target, summed over the live replicas' /metrics."""
        total: Counter[str] = Counter()
        for identity in alive:
            for match in _PASSES.finditer(self.runs[identity].text("/metrics")):
                labels = dict(re.findall(r'(\w+)="([^"]*)"', match["labels"]))
                total[labels["target"]] += int(float(match["value"]))
        return total

    def sample_rss(self) -> None:
        for identity, run in self.runs.items():
            if run.proc.poll() is not None:
                continue
            status = Path(f"/proc/{run.proc.pid}/status").read_text()
            kib = int(re.search(r"^VmRSS:\s+(\d+) kB", status, re.M).group(1))  # type: ignore[union-attr]
            self.peak_rss[identity] = max(self.peak_rss.get(identity, 0.0), kib / 1024)

    def wait(self, condition: Callable[[], Any], timeout: float, what: str, interval: float = 0.2) -> float:
        """Seconds until `condition` holds, sampling memory meanwhile; raises at the deadline."""
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            self.sample_rss()
            if condition():
                return time.monotonic() - started
            time.sleep(interval)
        raise TimeoutError(f"no {what} within {timeout:g} s")

    def stop(self) -> None:
        for run in self.runs.values():
            run.stop(signal.SIGKILL)
        self.client.close()


def fair(targets: int, replicas: int) -> list[int]:
    low = targets // replicas
    return sorted([low + 1] * (targets % replicas) + [low] * (replicas - targets % replicas))


def spread_phase(fleet: Fleet, args: argparse.Namespace, alive: set[str]) -> list[str]:
    expected = fair(args.targets, args.replicas)
    settle = fleet.wait(lambda: fleet.spread(alive) == expected, 120, f"spread {expected}")
    first = fleet.wait(lambda: fleet.recorded() == args.targets, 180, "first pass of every target")
    print(
        f"(a) spread over {args.replicas} replicas: {fleet.spread(alive)} targets held "
        f"(target {expected}), settled {settle:.1f} s after the start; every target's first pass "
        f"recorded {settle + first:.1f} s after the start"
    )
    return []


def interval_phase(fleet: Fleet, args: argparse.Namespace, alive: set[str]) -> list[str]:
    before = fleet.passes(alive)
    window = args.interval * 1.5
    deadline = time.monotonic() + window
    while time.monotonic() < deadline:
        fleet.sample_rss()
        time.sleep(0.5)
    after = fleet.passes(alive)
    names = [target_name(i) for i in range(args.targets)]
    idle = sorted(name for name in names if after[name] <= before[name])
    print(
        f"(b) interval: {args.targets - len(idle)}/{args.targets} targets reconciled again within "
        f"{window:g} s (poll interval {args.interval:g} s)" + (f"  MISSED: {idle[:5]}" if idle else "")
    )
    return ["interval"] if idle else []


def handover_phase(fleet: Fleet, args: argparse.Namespace, alive: set[str]) -> list[str]:
    held = fleet.holders()
    victim = Counter(h for h in held.values() if h).most_common(1)[0][0]
    orphans = {name for name, holder in held.items() if holder == victim}
    killed = datetime.now(UTC)
    fleet.runs[victim].stop(signal.SIGKILL)
    alive.discard(victim)
    target = args.lease + args.lease / 7
    fleet.wait(
        lambda: all(fleet.holders().get(name) in alive for name in orphans),
        args.lease * 4 + 30,
        "handover",
        0.1,
    )
    # When each was taken, as its new holder wrote it (acquireTime): not when this loop looked.
    specs = fleet.leases()
    times = sorted(
        (parse_time(specs[name]["acquireTime"]) - killed).total_seconds()  # type: ignore[operator]
        for name in orphans
    )
    fleet.wait(lambda: fleet.spread(alive) == fair(args.targets, len(alive)), 60, "spread after the handover")
    balanced = (datetime.now(UTC) - killed).total_seconds()
    print(
        f"(c) handover: {victim} (holding {len(orphans)}) killed with SIGKILL; its targets taken by the "
        f"survivors {times[0]:.2f} to {times[-1]:.2f} s after the kill (target <= {target:.2f} s: "
        f"lease + retry period); spread {fleet.spread(alive)} {balanced:.1f} s after the kill"
        + ("" if times[-1] <= target else "  MISSED")
    )
    return ["handover"] if times[-1] > target else []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--targets", type=int, default=200)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--lease", type=float, default=15.0, help="--lease-duration of the replicas (s)")
    parser.add_argument("--interval", type=float, default=15.0, help="every target's pollInterval (s)")
    parser.add_argument("--logs", type=Path, help="keep the replicas' logs here (default: thrown away)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    missed: list[str] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        root = Path(tmp)
        served = ServedSim(root)
        remote = seed_remote(root / "git", args.targets)
        config = root / "targets.yaml"
        write_config(config, remote, args.targets, args.interval)
        logs = args.logs or root
        logs.mkdir(parents=True, exist_ok=True)
        fleet = Fleet(root, served, config, args.replicas, args.lease, logs)
        alive = set(fleet.runs)
        try:
            for phase in (spread_phase, interval_phase, handover_phase):
                missed += phase(fleet, args, alive)
        except TimeoutError as exc:  # a figure that never came is a missed target too; the rest is skipped
            print(f"MISSED: {exc}")
            missed.append(str(exc))
        finally:
            fleet.stop()
            served.stop()
    worst = max(fleet.peak_rss.values())
    print(
        "(d) memory: peak RSS per replica "
        + ", ".join(f"{identity} {mb:.0f} MB" for identity, mb in sorted(fleet.peak_rss.items()))
        + f" (target < {RSS_TARGET_MB:.0f} MB)"
        + ("" if worst < RSS_TARGET_MB else "  MISSED")
    )
    if worst >= RSS_TARGET_MB:
        missed.append("memory")
    print(f"total {time.monotonic() - started:.0f} s")
    if missed and args.strict:
        print(f"missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
