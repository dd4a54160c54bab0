"""Rendering figures (issue 19): what kustomize and Helm add to a check, a pull-request check against a full
check, and the loop following a chart and an overlay on the sim.

    python benchmarks/bench_render.py [--repeat 3] [--count 10000] [--strict]

(a) `check` of examples/kustomize/overlays/prod and of examples/helm against `check` of the same objects
    as plain files (manifests-example), fresh processes, best of --repeat. Target: rendering adds < 0.3 s.
(b) `check --repo --base --head` of a one-file change in a --count-object repository against a full
    `check` of the head tree on disk, best of --repeat. Target: <= 1.1x.
(c) the loop (in process, against a SimCluster with the example driver) following examples/helm and
    examples/kustomize/overlays/prod: a no-op pass (target < 0.5 s, 0 writes) and a values change pushed
    until verified (target < 2 s).
(d) render + check (in process) of a 25-object driver chart (tests/render/lookalikes.py's chart with a
    kubelet plugin, a controller, a DeviceClass, a CRD and their RBAC and config): target <= 0.5 s; the same
    check again renders nothing (the release cache is hit: Helm loads no chart).
`--strict` exits 1 when a target is missed; `--only d` runs one part.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "render"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from generate_manifests import generate  # noqa: E402
from helpers import GitRemote  # noqa: E402
from lookalikes import chart_config, chart_named_after_itself, write  # noqa: E402

from reconciler.cluster.client import ClusterClient  # noqa: E402
from reconciler.delivery.check import CheckOptions, check_paths  # noqa: E402
from reconciler.delivery.pipeline import DeliverOptions  # noqa: E402
from reconciler.loop.passes.keep import KeptRevision  # noqa: E402
from reconciler.loop.passes.reconcile import Reconciler  # noqa: E402
from reconciler.loop.passes.reconcile_types import ReconcileOptions  # noqa: E402
from reconciler.loop.passes.revisions import GitRevisions  # noqa: E402
from reconciler.sim.controlplane import install  # noqa: E402
from reconciler.sim.server import SimCluster  # noqa: E402
from reconciler.source.remote import GitSource  # noqa: E402

ENV = {**os.environ, "PYTHONPATH": str(ROOT), "RUST_BACKTRACE": "0"}


def best(command: list[str], repeat: int, cwd: Path = ROOT) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        done = subprocess.run(command, cwd=cwd, env=ENV, capture_output=True, text=True)
        times.append(time.perf_counter() - started)
        if done.returncode not in (0, 1):
            raise SystemExit(f"{' '.join(command)} failed: {done.stderr[-2000:]}")
    return min(times)


def check(*args: str) -> list[str]:
    return [sys.executable, "-m", "reconciler", "check", *args, "-q"]


def render_overhead(repeat: int) -> list[tuple[str, float, float]]:
    plain = best(check("manifests-example"), repeat)
    return [
        ("kustomize overlay", best(check("examples/kustomize/overlays/prod"), repeat), plain),
        ("chart releases", best(check("examples/helm"), repeat), plain),
    ]


def pull_request(tmp: Path, count: int, repeat: int) -> tuple[float, float]:
    repo = tmp / "repo"
    generate(repo, count)
    git = ["git", "-C", str(repo), "-c", "user.email=b@example.com", "-c", "user.name=bench"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "base"], check=True)
    first = sorted(repo.rglob("*.yaml"))[0]
    first.write_text(first.read_text().replace("name: ", "name: changed-", 1))
    subprocess.run([*git, "commit", "-qam", "one file changed"], check=True)
    full = best(check(str(repo)), repeat)
    pr = best(check("--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD"), repeat)
    return pr, full


def loop_figures(tmp: Path) -> list[tuple[str, float, int, float]]:
    figures = []
    for example, path, values_file, change in (
        ("helm", "", "values/canary.yaml", {"canaryNodes": "only", "image": {"tag": "v0.4.0"}}),
        ("kustomize", "overlays/prod", "overlays/prod/trainer-replicas.yaml", None),
    ):
        with SimCluster() as sim:
            plane = install(
                sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}]
            )
            try:
                remote = GitRemote(tmp / f"git-{example}")
                shutil.copytree(ROOT / "examples" / example, remote.work, dirs_exist_ok=True)
                remote.commit_and_push("first")
                with ClusterClient.for_url(sim.url) as client:
                    source = GitSource(remote.url, tmp / f"cache-{example}", branch="main", path=path)
                    options = ReconcileOptions(
                        DeliverOptions(target="bench", grace=5, stage_timeout=60, verify_timeout=60)
                    )
                    reconciler = Reconciler(
                        client,
                        GitRevisions(source, kept=KeptRevision(client, "bench")),
                        options,
                        CheckOptions(),
                    )
                    assert reconciler.reconcile().outcome == "applied"
                    reconciler.reconcile()
                    writes = client.writes_sent
                    started = time.perf_counter()
                    steady = reconciler.reconcile()
                    noop = time.perf_counter() - started
                    noop_writes = client.writes_sent - writes
                    assert steady.outcome == "unchanged", steady.message
                    target = remote.work / values_file
                    if change is None:
                        doc = yaml.safe_load(target.read_text())
                        doc["spec"]["replicas"] = 1
                        target.write_text(yaml.safe_dump(doc))
                    else:
                        target.write_text(yaml.safe_dump(change))
                    started = time.perf_counter()
                    remote.commit_and_push("values change")
                    result = reconciler.reconcile()
                    delivered = time.perf_counter() - started
                    assert result.outcome == "applied", (result.message, result.records)
                    figures.append((example, noop, noop_writes, delivered))
            finally:
                plane.stop()
    return figures


# 21 objects more than the chart's 4 (CRD, DaemonSet, Deployment, DeviceClass): 25 in one release.
_EXTRA = """{{- range $i := until 7 }}
apiVersion: v1
kind: ConfigMap
metadata: {name: driver-config-{{ $i }}}
data: {mode: grouped}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: driver-sa-{{ $i }}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: {{ $.Release.Name }}-role-{{ $i }}}
rules: [{apiGroups: [resource.k8s.io], resources: [resourceslices], verbs: [get, list, watch]}]
---
{{- end }}
"""


def driver_chart(tmp: Path, repeat: int) -> tuple[float, float, int, int]:
    """(first render + check, best unchanged render + check, objects, charts loaded by the unchanged ones)."""
    import helm_python

    root = tmp / "chart-repo"
    write(root, chart_named_after_itself())
    write(root, {"charts/gpu-lookalike/templates/extra.yaml": _EXTRA, "dra-gitops.yaml": chart_config()})
    loads = 0
    real = helm_python.Chart.load

    def counted(path: object) -> object:
        nonlocal loads
        loads += 1
        return real(path)  # type: ignore[arg-type]

    helm_python.Chart.load = counted  # type: ignore[method-assign]
    try:
        cwd = Path.cwd()
        os.chdir(root)
        started = time.perf_counter()
        run = check_paths([root], CheckOptions())
        first = time.perf_counter() - started
        loads_first = loads
        again = []
        for _ in range(repeat):
            started = time.perf_counter()
            check_paths([root], CheckOptions())
            again.append(time.perf_counter() - started)
        os.chdir(cwd)
    finally:
        helm_python.Chart.load = real  # type: ignore[method-assign]
    assert loads_first == 1, loads_first  # the first check rendered the release
    fresh = best(check(str(root)), repeat)  # for comparison: a new process, imports and start-up included
    print(f"    (a fresh `dra-gitops check` process of the same chart: {fresh:.2f} s, start-up included)")
    return first, min(again), run.result.objects_checked, loads - loads_first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--count", type=int, default=10_000)
    parser.add_argument("--strict", action="store_true")
    parser.add_argument("--only", choices=["a", "b", "c", "d"])
    args = parser.parse_args()
    missed = []
    if args.only in (None, "d"):
        with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
            first, again, objects, loads = driver_chart(Path(tmp), args.repeat)
        ok = first <= 0.5 and loads == 0
        print(
            f"(d) render + check of a {objects}-object driver chart: {first:.3f} s (target <= 0.5 s); unchanged "
            f"again: {again:.3f} s, {loads} chart(s) rendered (target 0: the cache is hit)"
            + ("" if ok else "  MISSED")
        )
        missed += [] if ok else ["driver chart"]
        if args.only == "d":
            return 1 if missed and args.strict else 0
    for name, rendered, plain in render_overhead(args.repeat) if args.only in (None, "a") else []:
        added = rendered - plain
        print(
            f"(a) check of the {name}: {rendered:.2f} s against {plain:.2f} s for the same objects as files: "
            f"+{added:.2f} s (target < 0.30 s)" + ("" if added < 0.3 else "  MISSED")
        )
        missed += [] if added < 0.3 else [name]
    with tempfile.TemporaryDirectory(prefix="bench-render-") as tmp:
        if args.only in (None, "b"):
            pr, full = pull_request(Path(tmp), args.count, args.repeat)
            ratio = pr / full
            print(
                f"(b) pull-request check of a one-file change in {args.count} objects: {pr:.2f} s against a "
                f"full check's {full:.2f} s: {ratio:.2f}x (target <= 1.10x)"
                + ("" if ratio <= 1.1 else "  MISSED")
            )
            missed += [] if ratio <= 1.1 else ["pull request"]
        for example, noop, writes, delivered in loop_figures(Path(tmp)) if args.only in (None, "c") else []:
            ok = noop < 0.5 and writes == 0 and delivered < 2
            print(
                f"(c) loop on examples/{example}: no-op pass {noop:.3f} s, {writes} writes (target < 0.5 s, 0); "
                f"values change pushed to verified {delivered:.2f} s (target < 2 s)"
                + ("" if ok else "  MISSED")
            )
            missed += [] if ok else [f"loop {example}"]
    if missed and args.strict:
        print(f"missed: {', '.join(missed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
