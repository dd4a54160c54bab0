"""`dra-gitops apply` end to end, as a subprocess, against the cluster of $DRA_GITOPS_E2E_KUBECONFIG.

Order matters and is the file's order: the example is applied once (module fixture), re-applied unchanged,
then a commit with an unknown field is rejected on top of it, and last an exhaustion commit fails fast.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import (
    DEVICES_PER_NODE,
    DRIVER,
    E2E_ENV,
    EXAMPLE,
    EXAMPLE_CLUSTER_OBJECTS,
    EXAMPLE_NAMESPACES,
    NODE_COUNT,
    RESOURCE_API,
    SKIP_MESSAGE,
    STATE_TARGET,
    E2ECluster,
    Kube,
    delete_example_state,
    md,
)

if not os.environ.get(E2E_ENV):
    pytest.skip(SKIP_MESSAGE, allow_module_level=True)

REPO = Path(__file__).resolve().parents[2]
APPLY_TIMEOUT = 600.0
# Namespaced kinds the example (and the test commits) write, by list path under a namespace.
NAMESPACED_PATHS = (
    "/api/v1/namespaces/{ns}/serviceaccounts",
    "/api/v1/namespaces/{ns}/configmaps",
    "/apis/apps/v1/namespaces/{ns}/daemonsets",
    "/apis/apps/v1/namespaces/{ns}/deployments",
    RESOURCE_API + "/namespaces/{ns}/resourceclaims",
    RESOURCE_API + "/namespaces/{ns}/resourceclaimtemplates",
)


@dataclass
class ApplyRun:
    returncode: int
    result: dict[str, Any]
    stdout: str
    stderr: str
    seconds: float

    def explain(self) -> str:
        return f"exit {self.returncode} after {self.seconds:.1f}s\nstdout:\n{self.stdout[-6000:]}\nstderr:\n{self.stderr[-4000:]}"


def run_apply(cluster: E2ECluster, path: Path, *extra: str) -> ApplyRun:
    command = [
        sys.executable,
        "-m",
        "reconciler",
        "apply",
        str(path),
        "--kubeconfig",
        cluster.kubeconfig,
        "--state-namespace",
        cluster.state_namespace,
        "--target",
        STATE_TARGET,
        "-o",
        "json",
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=APPLY_TIMEOUT, check=False
    )
    seconds = time.monotonic() - started
    try:
        result = json.loads(done.stdout)
    except ValueError:
        result = {}
    run = ApplyRun(done.returncode, result, done.stdout, done.stderr, seconds)
    assert isinstance(result, dict) and "outcome" in result, f"no JSON result on stdout\n{run.explain()}"
    return run


def copy_example(tmp: Path, name: str) -> Path:
    target = tmp / name
    shutil.copytree(EXAMPLE, target)
    return target


def edit_yaml(path: Path, edit: Any) -> None:
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    for doc in docs:
        edit(doc)
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def count(value: Any) -> int:
    """A stage counter: a number, or the list of refs it counts."""
    if isinstance(value, list | tuple | dict):
        return len(value)
    return int(value or 0)


def snapshot(kube: Kube, namespaces: tuple[str, ...] = EXAMPLE_NAMESPACES) -> dict[str, str]:
    """Every object a commit of the example can write -> digest of what a write would change."""
    found: dict[str, str] = {}

    def add(kind_path: str, obj: dict[str, Any]) -> None:
        meta = md(obj)
        written = {
            "labels": meta.get("labels"),
            "annotations": meta.get("annotations"),
            "generation": meta.get("generation"),
            "spec": obj.get("spec"),
            "data": obj.get("data"),
            "rules": obj.get("rules"),
            "roleRef": obj.get("roleRef"),
            "subjects": obj.get("subjects"),
        }
        digest = hashlib.sha256(json.dumps(written, sort_keys=True).encode()).hexdigest()[:16]
        found[f"{kind_path.rsplit('/', 1)[1]}/{meta.get('namespace', '')}/{meta.get('name')}"] = digest

    for ns in namespaces:
        namespace = kube.get(f"/api/v1/namespaces/{ns}")
        if namespace is not None:
            add("/api/v1/namespaces", namespace)
        for template in NAMESPACED_PATHS:
            path = template.format(ns=ns)
            for obj in kube.list(path):
                if path.endswith("/configmaps") and md(obj).get("name") == "kube-root-ca.crt":
                    continue
                add(path, obj)
    for path, name in EXAMPLE_CLUSTER_OBJECTS:
        live = kube.get(f"{path}/{name}")
        if live is not None:
            add(path, live)
    return found


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_example(tmp_path_factory.mktemp("e2e"), "manifests-example")


@pytest.fixture(scope="module")
def first_apply(e2e_cluster: E2ECluster, example: Path) -> ApplyRun:
    """The example applied once on a cluster without any of its objects."""
    left = delete_example_state(e2e_cluster.kube, state_namespace=e2e_cluster.state_namespace)
    assert not left, f"could not remove the example's objects first: {left}"
    return run_apply(e2e_cluster, example)


def test_apply_example_prints_every_claim_with_device_and_node(
    e2e_cluster: E2ECluster, first_apply: ApplyRun
) -> None:
    run = first_apply
    assert run.returncode == 0, f"{run.explain()}\n{e2e_cluster.health()}"
    assert run.result["outcome"] == "applied"
    evidence = run.result["evidence"]
    trainer = [e for e in evidence if "trainer" in str(e["pod"])]
    notebook = [e for e in evidence if "notebook" in str(e["pod"])]
    assert len(trainer) == 2 and len(notebook) == 1, json.dumps(evidence, indent=1)
    assert len({str(e["claim"]) for e in trainer}) == 2, "each trainer replica has its own claim"
    assert "shared-gpu" in str(notebook[0]["claim"])
    used = set()
    for line in trainer + notebook:
        assert line["devices"], line
        assert line["node"] in e2e_cluster.nodes, line
        assert line["reserved"] is True and line["pod_ready"] is True, line
        for device in line["devices"]:
            driver, pool, name = str(device).split("/")
            assert driver == DRIVER and pool == line["node"], line
            used.add((pool, name))
    assert len(used) == 3, f"three different devices: {sorted(used)}"

    # and the cluster agrees: every claim in ml-team allocated and reserved
    claims = e2e_cluster.kube.list(f"{RESOURCE_API}/namespaces/ml-team/resourceclaims")
    assert len(claims) == 3
    for claim in claims:
        status = claim.get("status") or {}
        assert status.get("allocation") and status.get("reservedFor"), claim


def test_reapply_unchanged_writes_nothing(
    e2e_cluster: E2ECluster, first_apply: ApplyRun, example: Path
) -> None:
    assert first_apply.returncode == 0, "needs the example applied"
    kube = e2e_cluster.kube
    before = {
        f"{path}/{name}": (kube.get(f"{path}/{name}") or {}).get("metadata", {}).get("resourceVersion")
        for path, name in EXAMPLE_CLUSTER_OBJECTS
    }
    digest_before = snapshot(kube)
    run = run_apply(e2e_cluster, example)
    assert run.returncode == 0, run.explain()
    assert run.result["outcome"] == "applied"
    assert run.result["stages"], run.explain()
    for stage in run.result["stages"]:
        assert count(stage.get("applied")) == 0 and count(stage.get("deleted")) == 0, stage
        assert not stage.get("error"), stage
    assert sum(count(s.get("unchanged")) for s in run.result["stages"]) > 0
    after = {
        f"{path}/{name}": (kube.get(f"{path}/{name}") or {}).get("metadata", {}).get("resourceVersion")
        for path, name in EXAMPLE_CLUSTER_OBJECTS
    }
    assert after == before, "a no-op re-apply must not bump resourceVersion"
    assert snapshot(kube) == digest_before


def test_an_invalid_value_is_rejected_by_the_dry_run_before_any_write(
    e2e_cluster: E2ECluster, first_apply: ApplyRun, tmp_path: Path
) -> None:
    assert first_apply.returncode == 0, "needs the example applied"
    commit = copy_example(tmp_path, "invalid-value")
    # earlier stages change too, so a staged apply without a whole-commit dry-run would write them
    edit_yaml(
        commit / "20-classes" / "gpu-class.yaml",
        lambda doc: doc["metadata"].setdefault("labels", {}).update({"e2e.dra-gitops.io/changed": "yes"}),
    )
    (commit / "00-foundation" / "settings.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: e2e-new-settings\n  namespace: ml-team\n"
        "data:\n  epochs: '10'\n"
    )

    # A value only the API server's validation refuses (the schema has no enum for it; an unknown field
    # would be denied offline by the `schema` rule before any dry-run).
    def invalid_allocation_mode(doc: dict[str, Any]) -> None:
        doc["spec"]["spec"]["devices"]["requests"][0]["exactly"]["allocationMode"] = "Sometimes"

    edit_yaml(commit / "30-claims" / "single-gpu-template.yaml", invalid_allocation_mode)
    kube = e2e_cluster.kube
    before = snapshot(kube)
    run = run_apply(e2e_cluster, commit)
    assert run.returncode == 1, run.explain()
    assert run.result["outcome"] == "dry-run-failed", run.explain()
    assert "allocationMode" in json.dumps(run.result) or "allocationMode" in run.stderr, "the error names it"
    after = snapshot(kube)
    assert after == before, f"objects changed: {sorted(set(after.items()) ^ set(before.items()))}"
    assert kube.get("/api/v1/namespaces/ml-team/configmaps/e2e-new-settings") is None


def test_exhaustion_fails_fast_with_a_diagnosis(
    e2e_cluster: E2ECluster, first_apply: ApplyRun, tmp_path: Path
) -> None:
    commit = copy_example(tmp_path, "exhaustion")
    total = NODE_COUNT * DEVICES_PER_NODE
    # `total` trainer replicas plus the notebook's shared claim: one device more than the nodes have

    def scale(doc: dict[str, Any]) -> None:
        doc["spec"]["replicas"] = total

    edit_yaml(commit / "40-workloads" / "trainer.yaml", scale)
    # generous stage timeouts (a real cluster is slower), but a hang must not cost the default 300 s
    run = run_apply(e2e_cluster, commit, "--grace", "5", "--stage-timeout", "150", "--verify-timeout", "150")
    assert run.returncode == 1, run.explain()
    assert run.seconds < 90, f"exhaustion must fail fast, took {run.seconds:.0f}s\n{run.explain()}"
    assert run.result["outcome"] == "verify-failed", run.explain()
    exhaustion = [d for d in run.result["diagnoses"] if d["mode"] == "exhaustion"]
    assert exhaustion, json.dumps(run.result["diagnoses"], indent=1)
    numbers = exhaustion[0]["numbers"]
    assert {"needed", "free"} <= set(numbers), numbers
    assert numbers["needed"] > numbers["free"], numbers
    if "total" in numbers:
        assert numbers["total"] == total, numbers
    assert exhaustion[0]["recovery"], exhaustion[0]
