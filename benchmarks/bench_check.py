"""Benchmark: `dra-gitops check` over N generated manifests against PyYAML's C loader on the same files.

    python benchmarks/bench_check.py [--count 10000] [--repeat 3] [--strict]

The same N objects are laid out four ways: one object per file, 100 documents per file (files of one
kind each), 100 documents per file of mixed DRA objects (classes with CEL selectors, templates, claims and
the Deployments using them, side by side as a team keeps them), and a few large files. For each layout both
programs run as fresh subprocesses, interleaved, best of `--repeat`; a line per layout gives the ratio
(target: check within 2.5x of the bare parse on every layout) and the spread of the runs. Also prints how the check's time splits between load, plan, input, policy and report, and its peak
memory on the one-object-per-file layout (target: under 500 MB). Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_manifests import generate  # noqa: E402

PARSE_ONLY = """
import sys, yaml
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.yaml")):
    list(yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader))
"""

MAX_RATIO = 2.5
MAX_PEAK_MB = 500
LARGE_FILES = 4


def timed(command: list[str]) -> tuple[float, str]:
    """Wall time and stderr of one child process."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command} failed ({done.returncode}):\n{done.stderr}")
    return elapsed, done.stderr


def regroup(single: Path, out: Path, per_file: int) -> None:
    """Write the one-object files of `single` again as multi-document files of `per_file` objects each."""
    out.mkdir(parents=True)
    files = sorted(single.iterdir())
    for start in range(0, len(files), per_file):
        documents = [path.read_text() for path in files[start : start + per_file]]
        (out / f"part-{start // per_file:05d}.yaml").write_text("---\n".join(documents))


def interleave(single: Path, out: Path, per_file: int) -> None:
    """The one-object files of `single` as files of `per_file` objects whose kinds alternate (round robin
    over the kinds, by file-name prefix), as a repository of mixed DRA objects is laid out."""
    out.mkdir(parents=True)
    by_kind: dict[str, list[Path]] = {}
    for path in sorted(single.iterdir()):
        by_kind.setdefault(path.name.split("-", 1)[0], []).append(path)
    queues = list(by_kind.values())
    order: list[Path] = []
    while any(queues):
        for queue in queues:
            if queue:
                order.append(queue.pop(0))
    for start in range(0, len(order), per_file):
        documents = [path.read_text() for path in order[start : start + per_file]]
        (out / f"mixed-{start // per_file:05d}.yaml").write_text("---\n".join(documents))


def layouts(root: Path, count: int) -> dict[str, Path]:
    """The four layouts of the same `count` objects, by name."""
    single = root / "one-per-file"
    written = generate(single, count)
    if written != count:
        raise SystemExit(f"generated {written} objects, not {count}")
    many = root / "docs-per-file-100"
    regroup(single, many, 100)
    mixed = root / "mixed-dra-100"
    interleave(single, mixed, 100)
    large = root / f"large-files-{LARGE_FILES}"
    regroup(single, large, -(-count // LARGE_FILES))
    return {
        "one-per-file": single,
        "docs-per-file-100": many,
        "mixed-dra-100": mixed,
        f"large-files-{LARGE_FILES}": large,
    }


def measure(directory: Path, repeat: int) -> tuple[list[float], list[float], str]:
    """Parse and check times of `repeat` interleaved runs, and the time split of the fastest check."""
    parse_times, check_times, splits = [], [], []
    for _ in range(repeat):
        parse_times.append(timed([sys.executable, "-c", PARSE_ONLY, str(directory)])[0])
        elapsed, stderr = timed(
            [sys.executable, "-m", "reconciler", "check", str(directory), "-vv", "-o", "json"]
        )
        check_times.append(elapsed)
        match = re.search(r"timings: (.*)", stderr)
        splits.append(match.group(1) if match else "?")
        if "0 denied" not in stderr:
            raise SystemExit(f"generated set must pass the check:\n{stderr[-2000:]}")
    return parse_times, check_times, splits[check_times.index(min(check_times))]


def _spread(times: list[float]) -> str:
    return f"{min(times):.2f}/{statistics.median(times):.2f}/{max(times):.2f}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args()
    missed: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, directory in layouts(Path(tmp), args.count).items():
            parse_times, check_times, split = measure(directory, args.repeat)
            parse, check = min(parse_times), min(check_times)
            ratio = check / parse
            print(
                f"layout={name} objects={args.count} check={check:.2f}s pyyaml_c={parse:.2f}s ratio={ratio:.2f}x "
                f"(best of {args.repeat}; min/median/max check {_spread(check_times)}s, "
                f"pyyaml_c {_spread(parse_times)}s)"
            )
            print(f"  check time split: {split}")
            if ratio > MAX_RATIO:
                missed.append(f"{name}: ratio {ratio:.2f}x > {MAX_RATIO}x")
            if name == "one-per-file":
                peak_mb = (
                    _peak_of(
                        [sys.executable, "-m", "reconciler", "check", str(directory), "-q", "-o", "json"]
                    )
                    / 1024
                )
                print(f"  check peak memory: {peak_mb:.0f} MB")
                if peak_mb >= MAX_PEAK_MB:
                    missed.append(f"{name}: peak memory {peak_mb:.0f} MB >= {MAX_PEAK_MB} MB")
    for miss in missed:
        print(f"MISSED {miss}")
    print(
        "targets: "
        + ("MISSED" if missed else f"met (ratio <= {MAX_RATIO}x on every layout, memory < {MAX_PEAK_MB} MB)")
    )
    return 1 if missed and args.strict else 0


def _peak_of(command: list[str]) -> int:
    """Peak RSS (KiB) of one command alone (wait4 reports the child's own maximum)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return int(usage.ru_maxrss)


if __name__ == "__main__":
    sys.exit(main())
