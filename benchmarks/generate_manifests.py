"""Generate N small DRA manifests (classes, templates, claims, deployments) for the check benchmark.

    python benchmarks/generate_manifests.py OUT_DIR [--count 10000]

The set is consistent (every template names an existing class, every deployment an existing template and
matching container claims), so `dra-gitops check OUT_DIR` passes and the benchmark measures the full path.
"""

from __future__ import annotations

import argparse
from pathlib import Path

CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: gpu-{i}.example.com
spec:
  selectors:
  - cel:
      expression: device.driver == "gpu.example.com" && device.attributes["gpu.example.com"].model == "m{i}"
"""

TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: tpl-{i}
  namespace: team-{ns}
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: gpu-{c}.example.com
          count: 1
"""

CLAIM = """apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata:
  name: claim-{i}
  namespace: team-{ns}
spec:
  devices:
    requests:
    - name: gpu
      exactly:
        deviceClassName: gpu-{c}.example.com
"""

DEPLOYMENT = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-{i}
  namespace: team-{ns}
  labels:
    app: app-{i}
spec:
  replicas: 1
  selector:
    matchLabels:
      app: app-{i}
  template:
    metadata:
      labels:
        app: app-{i}
    spec:
      resourceClaims:
      - name: gpu
        resourceClaimTemplateName: tpl-{t}
      containers:
      - name: main
        image: registry.example.com/app:{i}
        resources:
          claims:
          - name: gpu
"""

NAMESPACE = """apiVersion: v1
kind: Namespace
metadata:
  name: team-{ns}
"""


def generate(out: Path, count: int, namespaces: int = 20) -> int:
    """Write `count` manifests, one per file, in four kinds; returns the number written."""
    out.mkdir(parents=True, exist_ok=True)
    classes = max(1, count // 20)
    written = 0
    for ns in range(namespaces):
        (out / f"ns-{ns}.yaml").write_text(NAMESPACE.format(ns=ns))
        written += 1
    for i in range(classes):
        (out / f"class-{i}.yaml").write_text(CLASS.format(i=i))
        written += 1
    rest = count - written
    per_kind = rest // 3
    templates = per_kind
    for i in range(templates):
        (out / f"tpl-{i}.yaml").write_text(TEMPLATE.format(i=i, ns=i % namespaces, c=i % classes))
    for i in range(per_kind):
        (out / f"claim-{i}.yaml").write_text(CLAIM.format(i=i, ns=i % namespaces, c=i % classes))
    deployments = rest - 2 * per_kind
    for i in range(deployments):
        t = i % templates
        (out / f"app-{i}.yaml").write_text(DEPLOYMENT.format(i=i, ns=t % namespaces, t=t))
    return written + templates + per_kind + deployments


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("out", type=Path)
    parser.add_argument("--count", type=int, default=10_000)
    args = parser.parse_args()
    print(generate(args.out, args.count))


if __name__ == "__main__":
    main()
