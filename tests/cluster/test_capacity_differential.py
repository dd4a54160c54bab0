"""Differential test: whatever node the simulated scheduler picks among equal scores, `check --cluster`
said it could happen.

For each seeded random scenario (nodes, slices with attributes and taints, classes, templates with
counts, All, firstAvailable, selectors, tolerations and constraints, shared claims, 1-6 pods with 1-2
claims, half of them requesting cpu and memory), the sim publishes the slices and classes, `check --cluster -o json` runs over the change's
manifests (claims, templates, pods) and records each pod's verdict and the range of Pending pods; then,
once per tie-break seed of the sim's scheduler (which breaks ties between equal scores at random, as
the real one does in effect), a fresh sim gets the manifests over real HTTP, pods one at a time in the
prediction's order (so the scheduler's queue order is the same). In every run a pod predicted to fit
is bound, a pod predicted not to fit stays Pending, and the number left Pending lies in the range.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from capacity_scenario import claim as claim_body
from capacity_scenario import classes_of, pod_spec, resource_slice, template
from click.testing import CliRunner
from helpers import wait_for

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

SEEDS = range(100)
TIE_SEEDS = range(3)  # runs of each scenario, each with its own tie-break seed
CLASSES = {"classes": {"model-a": {"selector": 'device.attributes["gpu.example.com"].model == "A"'}}}
MODELS = ("A", "B")


def _device(rng: random.Random, name: str) -> dict[str, Any]:
    d: dict[str, Any] = {"name": name, "attrs": {"model": rng.choice(MODELS), "numa": rng.randint(0, 1)}}
    if rng.random() < 0.08:
        d["taints"] = [{"key": "flaky", "value": "yes", "effect": rng.choice(["NoSchedule", "NoExecute"])}]
    return d


def _request(rng: random.Random, name: str) -> dict[str, Any]:
    r: dict[str, Any] = {"name": name, "class": rng.choice(["gpu", "gpu", "gpu", "gpu", "nic", "model-a"])}
    roll = rng.random()
    if roll < 0.15:
        r["mode"] = "All"
    elif roll < 0.45:
        r["count"] = rng.randint(1, 2)
    if rng.random() < 0.2:
        r["selector"] = f'device.attributes["{_driver(r["class"])}"].numa == {rng.randint(0, 1)}'
    if rng.random() < 0.2:
        r["tolerations"] = [{"key": "flaky", "operator": "Exists"}]
    if rng.random() < 0.2:
        alt = {"name": "fallback", "class": rng.choice(["gpu", "nic"])}
        return {
            "name": name,
            "first": [{**{k: v for k, v in r.items() if k != "name"}, "name": "first"}, alt],
        }
    return r


def _driver(cls: str) -> str:
    return "nic.example.com" if cls == "nic" else "gpu.example.com"


def scenario(seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    nodes = [f"sim-node-{i}" for i in range(rng.randint(1, 3))]
    slices = []
    for node in nodes:
        for driver in ["gpu.example.com", *(["nic.example.com"] if rng.random() < 0.6 else [])]:
            prefix = "gpu" if driver.startswith("gpu") else "nic"
            devices = [_device(rng, f"{prefix}-{i}") for i in range(rng.randint(1, 4))]
            slices.append({"node": node, "driver": driver, "devices": devices})
    if rng.random() < 0.25:
        slices.append({"allNodes": True, "pool": "fabric", "devices": [_device(rng, "fab-0")]})
    templates = []
    for i in range(rng.randint(1, 3)):
        requests = [_request(rng, f"r{j}") for j in range(rng.randint(1, 2))]
        t: dict[str, Any] = {"name": f"t{i}", "requests": requests}
        plain = [r["name"] for r in requests if "first" not in r and r["class"] != "nic"]
        if len(plain) == 2 and rng.random() < 0.4:
            t["constraints"] = [{"requests": plain, "matchAttribute": "gpu.example.com/model"}]
        templates.append(t)
    shared = [{"name": "shared", "requests": [_request(rng, "r0")]}] if rng.random() < 0.4 else []
    pods = []
    for i in range(rng.randint(1, 6)):
        claims = {}
        for j in range(rng.randint(1, 2)):
            if shared and rng.random() < 0.3:
                claims[f"c{j}"] = "claim:shared"
            else:
                claims[f"c{j}"] = f"template:{rng.choice(templates)['name']}"
        pod: dict[str, Any] = {"name": f"p{i}", "claims": claims}
        if rng.random() < 0.5:  # cpu and memory weigh in the scores (LeastAllocated, BalancedAllocation)
            pod["requests"] = {"cpu": rng.choice(["250m", "1", "3"]), "memory": rng.choice(["256Mi", "4Gi"])}
        pods.append(pod)
    return {"nodes": nodes, "slices": slices, "templates": templates, "claims": shared, "pods": pods}


def manifests(case: dict[str, Any]) -> list[dict[str, Any]]:
    out = [claim_body(c) for c in case["claims"]] + [template(t) for t in case["templates"]]
    for p in case["pods"]:
        out.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": p["name"], "namespace": "default"},
                "spec": pod_spec(p),
            }
        )
    return out


@pytest.fixture
def runner() -> Iterator[CliRunner]:
    yield CliRunner()


def _settled(client: ClusterClient, pods: Any, name: str) -> bool:
    pod = client.get(pods, "default", name) or {}
    if (pod.get("spec") or {}).get("nodeName"):
        return True
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False" for c in conditions)


def _predict(
    runner: CliRunner, sim: SimCluster, docs: list[dict[str, Any]], tmp_path: Path
) -> dict[str, Any]:
    change = tmp_path / "change"
    change.mkdir(exist_ok=True)
    (change / "change.yaml").write_text(yaml.safe_dump_all(docs, sort_keys=False))
    kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
    result = runner.invoke(cli, ["check", str(change), "--kubeconfig", str(kubeconfig), "-o", "json", "-q"])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    capacity: dict[str, Any] = json.loads(result.stdout)["capacity"]
    return capacity


def _run(
    case: dict[str, Any], tie_seed: int, runner: CliRunner, tmp_path: Path, prediction: dict[str, Any] | None
) -> tuple[dict[str, Any], set[str]]:
    """(the prediction, the pods the sim's scheduler left Pending) in a fresh sim with this tie-break seed."""
    with SimCluster() as sim:
        plane = install(
            sim,
            nodes=len(case["nodes"]),
            components=("controller-manager", "scheduler"),
            scheduler_seed=tie_seed,
        )
        try:
            with ClusterClient.for_url(sim.url) as client:
                for body in classes_of(CLASSES):
                    client.apply(body)
                for i, s in enumerate(case["slices"]):
                    client.apply(resource_slice(s, i))
                docs = manifests(case)
                if prediction is None:
                    prediction = _predict(runner, sim, docs, tmp_path)
                order = [p["pod"].split("/")[1] for p in prediction["pods"]]
                for body in docs:
                    if body["kind"] != "Pod":
                        client.apply(body)
                pods = client.find_kind("", "Pod")
                assert pods is not None
                by_name = {b["metadata"]["name"]: b for b in docs if b["kind"] == "Pod"}
                for name in order:
                    client.apply(by_name[name])
                    wait_for(
                        lambda n=name: _settled(client, pods, n), what=f"the scheduler to decide on {name}"
                    )
                pending = {
                    name
                    for name in order
                    if not ((client.get(pods, "default", name) or {}).get("spec") or {}).get("nodeName")
                }
        finally:
            plane.stop()
    return prediction, pending


@pytest.mark.parametrize("seed", SEEDS)
def test_every_outcome_lies_in_the_predicted_range(seed: int, tmp_path: Path, runner: CliRunner) -> None:
    case = scenario(seed)
    prediction: dict[str, Any] | None = None
    observed = []
    for tie_seed in TIE_SEEDS:
        prediction, pending = _run(case, seed * 1000 + tie_seed, runner, tmp_path, prediction)
        observed.append(sorted(pending))
    assert prediction is not None
    verdicts = {p["pod"].split("/")[1]: p["outcome"] for p in prediction["pods"]}
    where = json.dumps({"case": case, "observed": observed, "prediction": prediction["pods"]}, indent=1)
    assert "unknown" not in verdicts.values(), where
    low, high = prediction["pending"]["min"], prediction["pending"]["max"]
    for pending in observed:
        for name, verdict in verdicts.items():
            if verdict == "fits":
                assert name not in pending, f"{name} was predicted to fit\n{where}"
            if verdict == "does-not-fit":
                assert name in pending, f"{name} was predicted not to fit\n{where}"
        assert low <= len(pending) <= high, f"{len(pending)} pending outside {low}-{high}\n{where}"
    if "at-risk" not in verdicts.values():
        assert low == high, where  # no pod at risk: the ties cannot change how many stay Pending
