"""Claim templates made at run time by a controller (reconciler/model/generators.py): one test per generator."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.model.generators import TEMPLATE_GENERATORS, generated_template
from reconciler.sim.server import SimCluster

CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: computedomains.resource.nvidia.com}
spec:
  group: resource.nvidia.com
  scope: Namespaced
  names: {kind: ComputeDomain, plural: computedomains, singular: computedomain, listKind: ComputeDomainList}
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
"""
DOMAIN = """\
apiVersion: resource.nvidia.com/v1beta1
kind: ComputeDomain
metadata: {name: nvl-job, namespace: ml}
spec:
  numNodes: 2
  channel:
    resourceClaimTemplate: {name: nvl-job-channel}
"""
WORKER = """\
apiVersion: v1
kind: Pod
metadata: {name: nvl-worker-0, namespace: ml}
spec:
  resourceClaims:
  - {name: imex, resourceClaimTemplateName: nvl-job-channel}
  containers:
  - name: worker
    image: registry.example.com/nccl-tests:2
    resources:
      claims: [{name: imex}]
"""
NAMESPACE = "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n"


def _check(directory: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    result = CliRunner().invoke(cli, ["check", "-q", "-o", "json", *args, str(directory)])
    return result.exit_code, json.loads(result.stdout)["findings"]


def _claim_refs(findings: list[dict[str, Any]]) -> list[str]:
    return [f["msg"] for f in findings if f["rule"] == "claim-refs" and f["severity"] == "deny"]


def test_every_generator_names_the_template_it_creates() -> None:
    # One row per generator of the table: a body naming a template, and what a body without it gives.
    bodies = {
        ("resource.nvidia.com", "ComputeDomain"): {
            "spec": {"channel": {"resourceClaimTemplate": {"name": "t"}}}
        }
    }
    assert {(g.group, g.kind) for g in TEMPLATE_GENERATORS} == set(bodies)
    for (group, kind), body in bodies.items():
        found = generated_template(group, kind, body)
        assert found is not None and found[0] == "t"
        assert generated_template(group, kind, {"spec": {}}) is None
        assert generated_template("example.com", kind, body) is None


def test_a_compute_domain_channel_pod_passes_when_the_domain_is_in_the_desired_state(tmp_path: Path) -> None:
    (tmp_path / "worker.yaml").write_text(WORKER)
    code, findings = _check(tmp_path)
    assert code == 1
    assert _claim_refs(findings) == [
        "Pod/ml/nvl-worker-0 uses ResourceClaimTemplate ml/nvl-job-channel, which exists neither in the desired "
        "state nor in the cluster"
    ]
    (tmp_path / "domain.yaml").write_text(DOMAIN)
    code, findings = _check(tmp_path)
    assert (code, _claim_refs(findings)) == (0, [])


def test_a_domain_in_another_namespace_provides_nothing(tmp_path: Path) -> None:
    (tmp_path / "worker.yaml").write_text(WORKER)
    (tmp_path / "domain.yaml").write_text(DOMAIN.replace("namespace: ml", "namespace: other"))
    code, findings = _check(tmp_path)
    assert code == 1 and len(_claim_refs(findings)) == 1


def _wait_until_served(client: ClusterClient, group: str, kind: str) -> None:
    deadline = time.monotonic() + 30
    while client.find_kind(group, kind) is None:
        assert time.monotonic() < deadline, f"{kind} not served 30 s after its CRD was created"
        time.sleep(0.05)
        client.invalidate()


@pytest.mark.parametrize("live_domain", [True, False])
def test_a_live_compute_domain_provides_its_template(tmp_path: Path, live_domain: bool) -> None:
    with SimCluster() as sim:
        with ClusterClient.for_url(sim.url) as client:
            client.apply(yaml.safe_load(NAMESPACE))
            client.apply(yaml.safe_load(CRD))
            if live_domain:
                _wait_until_served(client, "resource.nvidia.com", "ComputeDomain")
                client.apply(yaml.safe_load(DOMAIN))
        (tmp_path / "m").mkdir()
        (tmp_path / "m" / "worker.yaml").write_text(WORKER)
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        code, findings = _check(tmp_path / "m", "--kubeconfig", str(kubeconfig))
    assert len(_claim_refs(findings)) == (0 if live_domain else 1)
