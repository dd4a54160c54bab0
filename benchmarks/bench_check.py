"""Benchmark: `dra-gitops check` over N generated manifests against PyYAML's C loader on the same files.

    python benchmarks/bench_check.py [--count 10000] [--repeat 3]

Both run as fresh subprocesses, side by side in one run, best of `--repeat`. Prints the ratio (target:
check within 3x of the bare parse), the check's peak memory (target: under 500 MB) and how its time splits
between load, plan, input, policy and report.
"""

from __future__ import annotations

import argparse
import os
import re
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
for path in sorted(Path(sys.argv[1]).iterdir()):
    list(yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader))
"""


def timed(command: list[str]) -> tuple[float, str]:
    """Wall time and stderr of one child process."""
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise SystemExit(f"{command} failed ({done.returncode}):\n{done.stderr}")
    return elapsed, done.stderr


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "manifests"
        written = generate(out, args.count)
        parse_times, check_times, splits = [], [], []
        for _ in range(args.repeat):
            parse_times.append(timed([sys.executable, "-c", PARSE_ONLY, str(out)])[0])
            elapsed, stderr = timed(
                [sys.executable, "-m", "reconciler", "check", str(out), "-vv", "-o", "json"]
            )
            check_times.append(elapsed)
            match = re.search(r"timings: (.*)", stderr)
            splits.append(match.group(1) if match else "?")
            if "0 denied" not in stderr:
                raise SystemExit(f"generated set must pass the check:\n{stderr[-2000:]}")
        check_peak = _peak_of([sys.executable, "-m", "reconciler", "check", str(out), "-q", "-o", "json"])
        parse, check = min(parse_times), min(check_times)
        best = splits[check_times.index(check)]
        print(f"manifests: {written}")
        print(f"PyYAML C loader parse only: {parse:.2f} s (best of {args.repeat})")
        print(
            f"dra-gitops check:           {check:.2f} s (best of {args.repeat}), {check / parse:.2f}x the parse"
        )
        print(f"check time split:           {best}")
        print(f"check peak memory:          {check_peak / 1024:.0f} MB")
        print(
            f"targets: ratio <= 3.0 -> {'met' if check / parse <= 3.0 else 'MISSED'}; "
            f"memory < 500 MB -> {'met' if check_peak / 1024 < 500 else 'MISSED'}"
        )


def _peak_of(command: list[str]) -> int:
    """Peak RSS (KiB) of one command alone (wait4 reports the child's own maximum)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return int(usage.ru_maxrss)


if __name__ == "__main__":
    main()
