"""Speed of the simulated API server through the official client (issue 3 targets).

    python benchmarks/bench_sim.py [--applies 1000] [--objects 10000] [--data-dir]

* 1,000 server-side applies of ConfigMaps through the official client: target < 3 s.
* LIST of 10,000 objects: target < 1 s.
With --data-dir the store persists to a temporary data directory (`sim serve --data-dir`: every write
journaled before it is answered), which the figures then include.
Prints one line per figure; exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kubernetes import client  # noqa: E402
from kubernetes.dynamic import DynamicClient  # noqa: E402

from reconciler.sim.server import SimCluster  # noqa: E402

APPLY_TARGET = 3.0
LIST_TARGET = 1.0


def configmap(i: int, ns: str) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"cm-{i:05d}", "namespace": ns, "labels": {"bench": "sim", "n": str(i % 10)}},
        "data": {"key": f"value-{i}", "other": "x" * 64},
    }


def bench_applies(cluster: SimCluster, n: int) -> tuple[float, float]:
    """(typed CoreV1Api seconds, DynamicClient seconds) for n applies each."""
    api = client.ApiClient(client.Configuration(host=cluster.url))
    core = client.CoreV1Api(api)
    cluster.store.create("", "namespaces", {"metadata": {"name": "bench-typed"}})
    cluster.store.create("", "namespaces", {"metadata": {"name": "bench-dyn"}})
    t0 = time.perf_counter()
    for i in range(n):
        core.patch_namespaced_config_map(
            f"cm-{i:05d}",
            "bench-typed",
            configmap(i, "bench-typed"),
            field_manager="bench",
            _content_type="application/apply-patch+yaml",
        )
    typed = time.perf_counter() - t0
    dyn = DynamicClient(api)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    t0 = time.perf_counter()
    for i in range(n):
        dyn.server_side_apply(
            cms, body=configmap(i, "bench-dyn"), namespace="bench-dyn", field_manager="bench"
        )
    dynamic = time.perf_counter() - t0
    api.close()
    return typed, dynamic


def bench_list(cluster: SimCluster, n: int) -> tuple[float, float, float]:
    """(raw JSON seconds, typed CoreV1Api seconds, DynamicClient seconds) to LIST n ConfigMaps."""
    ns = "bench-list"
    cluster.store.create("", "namespaces", {"metadata": {"name": ns}})
    for i in range(n):
        cluster.store.create("", "configmaps", configmap(i, ns))
    api = client.ApiClient(client.Configuration(host=cluster.url))
    core = client.CoreV1Api(api)
    t0 = time.perf_counter()
    resp = core.list_namespaced_config_map(ns, _preload_content=False)
    items = json.loads(resp.data)["items"]
    raw = time.perf_counter() - t0
    assert len(items) == n, len(items)
    t0 = time.perf_counter()
    typed_items = core.list_namespaced_config_map(ns).items
    typed = time.perf_counter() - t0
    assert len(typed_items) == n
    dyn = DynamicClient(api)
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    t0 = time.perf_counter()
    dyn_items = cms.get(namespace=ns).items
    dynamic = time.perf_counter() - t0
    assert len(dyn_items) == n
    api.close()
    return raw, typed, dynamic


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--applies", type=int, default=1000)
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--data-dir", action="store_true", help="persist the store to a temporary directory")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data_dir = Path(tmp) / "data" if args.data_dir else None
        with SimCluster(data_dir=data_dir) as cluster:
            typed, dynamic = bench_applies(cluster, args.applies)
            t0 = time.perf_counter()
            raw, typed_list, dyn_list = bench_list(cluster, args.objects)
            creates = time.perf_counter() - t0 - raw - typed_list - dyn_list
        t0 = time.perf_counter()
        if data_dir is not None:
            SimCluster(data_dir=data_dir).stop()
        restart = time.perf_counter() - t0
    ok = typed < APPLY_TARGET and raw < LIST_TARGET
    print(
        f"{args.applies} server-side applies (CoreV1Api):     {typed:6.2f} s  (target < {APPLY_TARGET:.0f} s)"
    )
    print(f"{args.applies} server-side applies (DynamicClient): {dynamic:6.2f} s")
    print(
        f"LIST {args.objects} ConfigMaps (HTTP + json.loads):   {raw:6.2f} s  (target < {LIST_TARGET:.0f} s)"
    )
    print(f"LIST {args.objects} ConfigMaps (CoreV1Api models):    {typed_list:6.2f} s")
    print(f"LIST {args.objects} ConfigMaps (DynamicClient):       {dyn_list:6.2f} s")
    print(f"{args.objects} store creates (in process):         {creates:6.2f} s")
    if data_dir is not None:
        print(f"restart on the data directory:              {restart:6.2f} s")
    print("targets met" if ok else "TARGET MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
