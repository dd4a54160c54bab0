"""`check PATH --cluster` (no revision) judges a config-only driver change against the cluster: the content
of the live ConfigMaps and Secrets the driver workloads read, compared as digests.

The example driver and its canary each read their own copy of a ConfigMap (the driver's mode) and share a
Secret (a token in env). Changing the main driver's ConfigMap is denied until the canary has run that
content; a Secret both read cannot go through the canary first. Secret values never reach the output.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import yaml
from test_apply_command import copy_example, run, sim  # noqa: F401  (fixture)

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.facts import collect_facts
from reconciler.model.dra_drivers import CONTENT_DIGEST, config_content_digest
from reconciler.sim.server import SimCluster

MAIN = "10-driver/kubelet-plugin.yaml"
CANARY = "10-driver/kubelet-plugin-canary.yaml"
CONFIG = "10-driver/config.yaml"
TOKEN = "s3cr3t-t0ken"
NEW_TOKEN = "n3w-t0ken"


def _edit(path: Path, config_map: str) -> None:
    """The DaemonSet mounts `config_map` and reads the token Secret into its env."""
    (body,) = yaml.safe_load_all(path.read_text())
    spec = body["spec"]["template"]["spec"]
    spec["volumes"].append({"name": "config", "configMap": {"name": config_map}})
    container = spec["containers"][0]
    container["volumeMounts"].append({"name": "config", "mountPath": "/etc/gpu-driver"})
    container["env"].append(
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "gpu-driver-auth", "key": "token"}}}
    )
    path.write_text(yaml.safe_dump(body, sort_keys=False))


def config(mode: str, canary_mode: str, token: str = TOKEN) -> list[dict[str, Any]]:
    def config_map(name: str, value: str) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "gpu-system"},
            "data": {"config.yaml": f"deviceMode: {value}\n"},
        }

    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "gpu-driver-auth", "namespace": "gpu-system"},
        "stringData": {"token": token},
    }
    return [
        config_map("gpu-driver-config", mode),
        config_map("gpu-driver-config-canary", canary_mode),
        secret,
    ]


def repo_with(tmp_path: Path, name: str, mode: str, canary_mode: str, token: str = TOKEN) -> Path:
    repo = copy_example(tmp_path, name)
    _edit(repo / MAIN, "gpu-driver-config")
    _edit(repo / CANARY, "gpu-driver-config-canary")
    (repo / CONFIG).write_text(yaml.safe_dump_all(config(mode, canary_mode, token), sort_keys=False))
    return repo


def check(repo: Path, kubeconfig: Path) -> tuple[int, list[dict[str, Any]], str]:
    done = run("check", str(repo), "--cluster", "--kubeconfig", str(kubeconfig), "-v", "-o", "json")
    return done.exit_code, json.loads(done.stdout)["findings"], done.output


def apply(repo: Path, kubeconfig: Path) -> None:
    applied = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
    assert applied.exit_code == 0, applied.output


def test_a_driver_config_change_is_judged_against_the_live_content(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    apply(repo_with(tmp_path, "v1", "grouped", "grouped"), kubeconfig)

    # the same content as the cluster's: nothing to judge (the Secret's stringData is its stored data)
    code, findings, _ = check(repo_with(tmp_path, "same", "grouped", "grouped"), kubeconfig)
    assert (code, findings) == (0, [])

    # the main driver's mode changes before its canary ran it
    code, findings, _ = check(repo_with(tmp_path, "main-first", "individual", "grouped"), kubeconfig)
    assert code == 1 and [f["rule"] for f in findings] == ["driver-canary"], findings
    assert findings[0]["ref"] == "ConfigMap/gpu-system/gpu-driver-config"
    assert str(findings[0]["msg"]).startswith(
        "ConfigMap/gpu-system/gpu-driver-config changes the config driver "
        "DaemonSet/gpu-system/gpu-example-kubelet-plugin reads, but no already-applied canary runs that content"
    ), findings

    # the canary's copy first: allowed, and applied
    canary_first = repo_with(tmp_path, "canary-first", "grouped", "individual")
    code, findings, _ = check(canary_first, kubeconfig)
    assert (code, findings) == (0, [])
    apply(canary_first, kubeconfig)

    # then the main driver gets the content its canary runs in the cluster
    code, findings, _ = check(repo_with(tmp_path, "promote", "individual", "individual"), kubeconfig)
    assert (code, findings) == (0, [])


def test_a_secret_both_read_cannot_change_and_no_value_is_shown(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    cluster, kubeconfig = sim
    apply(repo_with(tmp_path, "v1", "grouped", "grouped"), kubeconfig)
    with ClusterClient.for_url(cluster.url) as client:
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "unrelated", "namespace": "gpu-system"},
                "stringData": {"password": "not-read-by-a-driver"},
            }
        )
        facts = collect_facts(client)
    # only what the driver workloads read, by name, and no content but a digest
    assert sorted(str(m.ref) for m in facts.configs) == [
        "ConfigMap/gpu-system/gpu-driver-config",
        "ConfigMap/gpu-system/gpu-driver-config-canary",
        "Secret/gpu-system/gpu-driver-auth",
    ]
    for m in facts.configs:
        assert set(m.body) == {"apiVersion", "kind", "metadata", CONTENT_DIGEST}, m.body
    secret = next(m for m in facts.configs if m.kind == "Secret")
    assert secret.body[CONTENT_DIGEST] == config_content_digest(config("grouped", "grouped")[2])

    code, findings, output = check(
        repo_with(tmp_path, "rotated", "grouped", "grouped", NEW_TOKEN), kubeconfig
    )
    assert code == 1 and [(f["rule"], f["ref"]) for f in findings] == [
        ("driver-canary", "Secret/gpu-system/gpu-driver-auth")
    ], findings
    assert "canary DaemonSet/gpu-system/gpu-example-kubelet-plugin-canary reads different content" in str(
        findings[0]["msg"]
    )
    for value in (TOKEN, NEW_TOKEN, "not-read-by-a-driver"):
        assert value not in output and base64.b64encode(value.encode()).decode() not in output


ROOT = Path(__file__).resolve().parents[2]


def test_credentials_that_may_not_read_a_drivers_config_are_told_so(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    """deploy/reader's dra-reader gets a driver's ConfigMaps by name but no Secret: the check compares the
    ConfigMaps, says which Secrets it could not read (they are then judged as new content) and goes on."""
    cluster, kubeconfig = sim
    apply(repo_with(tmp_path, "v1", "grouped", "grouped"), kubeconfig)
    with ClusterClient.for_url(cluster.url) as client:
        for path in (
            ROOT / "deploy" / "namespace" / "namespace.yaml",
            ROOT / "deploy" / "reader" / "rbac-reader.yaml",
        ):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc:
                    client.apply(doc)
        answer = client.request(
            "POST", "/api/v1/namespaces/dra-gitops/serviceaccounts/dra-reader/token", body={"spec": {}}
        )
    said: list[str] = []
    with ClusterClient.for_url(cluster.url, token=answer["status"]["token"]) as reader:
        facts = collect_facts(reader, said.append)
    assert sorted(str(m.ref) for m in facts.configs) == [
        "ConfigMap/gpu-system/gpu-driver-config",
        "ConfigMap/gpu-system/gpu-driver-config-canary",
    ]
    assert (
        "cannot read Secret/gpu-system/gpu-driver-auth (forbidden): a change of what driver workloads read there "
        "is judged as new content"
    ) in said, said
