"""Benchmark: `dra-gitops check` over N generated manifests against PyYAML's C loader on the same files.

    python benchmarks/bench_check.py [--count 10000] [--repeat 3] [--strict] [--opa-url standin|URL]

The same N objects are laid out four ways: one object per file, 100 documents per file (files of one
kind each), 100 documents per file of mixed DRA objects (classes with CEL selectors, templates, claims and
the Deployments using them, side by side as a team keeps them), and a few large files. For each layout both
programs run as fresh subprocesses, interleaved, best of `--repeat`; a line per layout gives the ratio
(target: check within 2.5x of the bare parse on every layout) and the spread of the runs. Also prints how the check's time splits between load, plan, input, policy and report, and its peak
memory on the one-object-per-file layout (target: under 500 MB). Exits 1 when a target is missed. The
package's bytecode is written first, as an installed copy has it; the first check of a layout fills the
user's cache (the policy set's parsed heads), as any earlier check on the machine would have.

With `--opa-url` the check evaluates on an OPA server that serves the bundled pack's bundle: `standin`
starts the tests' stand-in (tests/policy/opa_standin.py) in this process with that bundle, and counts the
HTTP requests each check makes (target: one query round trip per run, whatever the number of rules); a
URL names a real server started with `dra-gitops policy bundle`'s file (its requests are not counted).
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from generate_manifests import generate  # noqa: E402

PARSE_ONLY = """
import sys, yaml
from pathlib import Path
for path in sorted(Path(sys.argv[1]).rglob("*.yaml")):
    list(yaml.load_all(path.read_bytes(), Loader=yaml.CSafeLoader))
"""

ROOT = Path(__file__).resolve().parents[1]
MAX_RATIO = 2.5
MAX_PEAK_MB = 500
LARGE_FILES = 4


def compile_package() -> None:
    """Write the package's bytecode first, as an installed dra-gitops has it (pip compiles on install, the
    image too): where PYTHONDONTWRITEBYTECODE is set, an editable checkout would otherwise be compiled anew
    by every check timed (~0.1 s of ~2.5 s), a cost no installed copy pays and PyYAML's side never has."""
    import compileall

    compileall.compile_dir(str(ROOT / "reconciler"), quiet=2)


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


class Opa:
    """The OPA server the checks use (none: the embedded engine), and the requests each check made."""

    def __init__(self, url: str | None, standin: Any = None) -> None:
        self.url = url
        self.standin = standin
        self.round_trips: list[int] = []

    def args(self) -> list[str]:
        return ["--opa-url", self.url] if self.url else []

    def count(self, run: Callable[[], tuple[float, str]]) -> tuple[float, str]:
        before = self.standin.requests if self.standin is not None else 0
        result = run()
        if self.standin is not None:
            self.round_trips.append(self.standin.requests - before)
        return result


@contextmanager
def opa_server(url: str | None) -> Iterator[Opa]:
    if url != "standin":
        yield Opa(url)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "policy"))
    from opa_standin import serve_opa_standin

    from reconciler.policy.bundle import build_bundle, tar_gz
    from reconciler.policy.engine import load_policy_set

    with serve_opa_standin(tar_gz(build_bundle(load_policy_set([])))) as server:
        yield Opa(server.url, server)


def measure(directory: Path, repeat: int, opa: Opa) -> tuple[list[float], list[float], str]:
    """Parse and check times of `repeat` interleaved runs, and the time split of the fastest check."""
    parse_times, check_times, splits = [], [], []
    for _ in range(repeat):
        parse_times.append(timed([sys.executable, "-c", PARSE_ONLY, str(directory)])[0])
        command = [
            sys.executable,
            "-m",
            "reconciler",
            "check",
            str(directory),
            "-vv",
            "-o",
            "json",
            *opa.args(),
        ]
        elapsed, stderr = opa.count(lambda command=command: timed(command))
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
    parser.add_argument("--opa-url", help="evaluate on an OPA server: `standin` or http://host:port")
    args = parser.parse_args()
    missed: list[str] = []
    compile_package()
    with tempfile.TemporaryDirectory() as tmp, opa_server(args.opa_url) as opa:
        for name, directory in layouts(Path(tmp), args.count).items():
            parse_times, check_times, split = measure(directory, args.repeat, opa)
            parse, check = min(parse_times), min(check_times)
            ratio = check / parse
            print(
                f"layout={name} objects={args.count} check={check:.2f}s pyyaml_c={parse:.2f}s ratio={ratio:.2f}x "
                f"(best of {args.repeat}; min/median/max check {_spread(check_times)}s, "
                f"pyyaml_c {_spread(parse_times)}s)"
            )
            print(f"  check time split: {split}")
            if opa.round_trips:
                print(f"  OPA requests per check: {sorted(set(opa.round_trips))} (target: 1)")
                if set(opa.round_trips) != {1}:
                    missed.append(f"{name}: OPA requests per check {sorted(set(opa.round_trips))}, not 1")
                opa.round_trips.clear()
            if ratio > MAX_RATIO and not opa.url:  # the ratio target is the embedded engine's
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
        + (
            "MISSED"
            if missed
            else "met (one OPA request per check; the ratio target is the embedded engine's)"
            if args.opa_url
            else f"met (ratio <= {MAX_RATIO}x on every layout, memory < {MAX_PEAK_MB} MB)"
        )
    )
    return 1 if missed and args.strict else 0


def _peak_of(command: list[str]) -> int:
    """Peak RSS (KiB) of one command alone (wait4 reports the child's own maximum)."""
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, _, usage = os.wait4(process.pid, 0)
    return int(usage.ru_maxrss)


if __name__ == "__main__":
    sys.exit(main())
