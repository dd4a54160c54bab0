"""Speed of the capacity prediction that `check --cluster` runs (issue 10 and 31 targets).

    python benchmarks/bench_capacity.py [--pods 1000] [--nodes 100] [--devices 8] [--uneven]
                                        [--repeat 3] [--strict]

1,000 pods (a Deployment's replicas, one claim each from a template with a CEL-selected class) placed
pod by pod over 100 nodes with 8 devices each (800 devices: the last 200 pods do not fit and get their
node-by-node explanation), each pod's nodes scored as kube-scheduler scores them and every placement
the ties between equal scores allow explored: target < 2 s for `capacity_input`, the whole prediction.
Also prints the share of pods whose verdict needed a search (judged in more than one placement).
``--uneven``: every other node has one device less, so the ties are between unequal nodes; with
``--count 2`` (devices per claim) which of them a pod takes can leave a device stranded, and the
exploration has to search (past its budget: a sample).
Prints one line per figure (best of --repeat); exits 1 on a wrong prediction, and with --strict on a missed
target (a timing on a shared machine swings past it by noise alone, as bench_check's does).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from reconciler.dra.capacity import capacity_input  # noqa: E402
from reconciler.model.objects import Manifest, ref_of  # noqa: E402
from reconciler.model.plan import compute_plan  # noqa: E402

TARGET = 2.0
DRIVER = "gpu.example.com"


def manifest(body: dict[str, Any], path: str = "", line: int = 0) -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path=path, line=line)


def live_state(nodes: int, devices: int, uneven: bool = False) -> list[Manifest]:
    out = [
        manifest(
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": "gpu"},
                "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
            }
        )
    ]
    for n in range(nodes):
        name = f"node-{n:03d}"
        out.append(
            manifest(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}]},
                }
            )
        )
        out.append(
            manifest(
                {
                    "apiVersion": "resource.k8s.io/v1",
                    "kind": "ResourceSlice",
                    "metadata": {"name": f"{name}-{DRIVER}"},
                    "spec": {
                        "driver": DRIVER,
                        "nodeName": name,
                        "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                        "devices": [
                            {
                                "name": f"gpu-{i}",
                                "attributes": {
                                    "model": {"string": "A100"},
                                    "index": {"int": i},
                                    "uuid": {"string": f"GPU-{n:03d}-{i}"},
                                },
                                "capacity": {"memory": {"value": "80Gi"}},
                            }
                            for i in range(devices - (1 if uneven and n % 2 else 0))
                        ],
                    },
                }
            )
        )
    return out


def change(pods: int, count: int = 1) -> list[Manifest]:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu",
                                "count": count,
                                "selectors": [
                                    {"cel": {"expression": f'device.attributes["{DRIVER}"].model == "A100"'}}
                                ],
                            },
                        }
                    ]
                }
            }
        },
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {
            "replicas": pods,
            "selector": {"matchLabels": {"app": "trainer"}},
            "template": {
                "metadata": {"labels": {"app": "trainer"}},
                "spec": {
                    "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                    "containers": [
                        {"name": "main", "image": "trainer:1", "resources": {"claims": [{"name": "gpu"}]}}
                    ],
                },
            },
        },
    }
    return [manifest(template, "template.yaml", 1), manifest(deployment, "trainer.yaml", 1)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--nodes", type=int, default=100)
    parser.add_argument("--devices", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--uneven", action="store_true", help="every other node has one device less")
    parser.add_argument("--count", type=int, default=1, help="devices per claim")
    parser.add_argument("--strict", action="store_true", help="exit 1 when the target is missed")
    args = parser.parse_args()
    live = live_state(args.nodes, args.devices, args.uneven)
    head = change(args.pods, args.count)
    plan = compute_plan([], head)
    elapsed = float("inf")
    for _ in range(max(1, args.repeat)):
        started = time.perf_counter()
        capacity = capacity_input(plan, head, live)
        elapsed = min(elapsed, time.perf_counter() - started)
    fits = sum(1 for p in capacity["pods"] if p["outcome"] == "fits")
    per_node = [args.devices - (1 if args.uneven and n % 2 else 0) for n in range(args.nodes)]
    expected_fits = min(args.pods, sum(k // args.count for k in per_node))
    if fits != expected_fits:
        print(f"capacity prediction wrong: {fits} pods fit, expected {expected_fits}", file=sys.stderr)
        return 1
    ok = elapsed < TARGET
    search = capacity["search"]
    shape = f"{args.nodes} nodes x {args.devices} devices{' (uneven)' if args.uneven else ''}"
    print(
        f"capacity prediction: {args.pods} pods over {shape} ({fits} fit, "
        f"{capacity['pending']['summary']}): {elapsed:.2f} s, best of {args.repeat} "
        f"(target < {TARGET:.0f} s) {'ok' if ok else 'MISSED'}"
    )
    print(
        f"pods whose verdict needed a search: {search['pods_searched']} of {len(capacity['pods'])} "
        f"({100 * search['pods_searched'] / max(1, len(capacity['pods'])):.1f}%); placements explored: "
        f"{search['placements']} {search['mode']}{', cut by the budget' if search['cut_by_budget'] else ''}"
    )
    return 0 if ok or not args.strict else 1


if __name__ == "__main__":
    sys.exit(main())
