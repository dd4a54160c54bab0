"""deploy/ on the cluster of $DRA_GITOPS_E2E_KUBECONFIG, and the reconciler working with its token alone.

`kubectl apply -k deploy/base`; a token of the reconciler's ServiceAccount from the TokenRequest API
(`POST .../serviceaccounts/dra-gitops/token`, as `kubectl create token` does); then `dra-gitops run --once`
with a kubeconfig whose only credential is that token reconciles manifests-example/ (kept in a bare Git
repository in tmp), and a commit asking for more GPUs than the nodes have is rolled back. Whatever the
reconciler needs beyond its roles makes the cluster answer 403 and the run fail.

Everything deploy/ creates is deleted afterwards; the test skips when the cluster already has it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from deploy_support import (
    DEPLOY,
    KUBECTL,
    NAMESPACE,
    NO_KUBECTL,
    SERVICE_ACCOUNT,
    edit,
    explain,
    kubectl,
    kustomize,
    reconcile_once,
    request_token,
    token_kubeconfig,
)
from e2e_support import (
    DEVICES_PER_NODE,
    E2E_ENV,
    EXAMPLE,
    NODE_COUNT,
    SKIP_MESSAGE,
    E2ECluster,
    Kube,
    KubeError,
    delete_example_state,
    wait_for,
)
from helpers import GitRemote

if not os.environ.get(E2E_ENV):
    pytest.skip(SKIP_MESSAGE, allow_module_level=True)
pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

TARGET = "e2e-deploy"


def _path(obj: dict[str, object]) -> str:
    meta = obj["metadata"]
    assert isinstance(meta, dict)
    group, _, version = str(obj["apiVersion"]).rpartition("/")
    prefix = f"/apis/{group}/{version}" if group else f"/api/{version}"
    plural = {
        "ClusterRole": "clusterroles",
        "ClusterRoleBinding": "clusterrolebindings",
        "Namespace": "namespaces",
    }
    return f"{prefix}/{plural[str(obj['kind'])]}/{meta['name']}"


@pytest.fixture
def deployed(fresh_example: E2ECluster) -> Iterator[E2ECluster]:
    """deploy/base applied (and removed at the end); skipped if the cluster already has any of it."""
    cluster = fresh_example
    cluster_scoped = [
        o for o in kustomize("base") if o["kind"] in ("Namespace", "ClusterRole", "ClusterRoleBinding")
    ]
    present = [_path(o) for o in cluster_scoped if cluster.kube.get(_path(o))]
    if present:
        pytest.skip(
            f"e2e: the cluster already has objects of deploy/ ({', '.join(present)}); not touching them"
        )
    try:
        applied = kubectl(cluster.kubeconfig, "apply", "-k", str(DEPLOY / "base"))
        assert applied.returncode == 0, applied.stderr
        yield cluster
    finally:
        left = delete_example_state(cluster.kube, state_namespace=NAMESPACE)
        for obj in cluster_scoped:
            cluster.kube.delete(_path(obj))
        assert not left, f"could not remove: {left}"


def test_the_reconciler_reconciles_the_example_with_its_service_account_token_alone(
    deployed: E2ECluster, tmp_path: Path
) -> None:
    cluster = deployed
    answer = request_token(cluster.kubeconfig, NAMESPACE, SERVICE_ACCOUNT, seconds=3600)
    assert answer["kind"] == "TokenRequest" and answer["status"]["expirationTimestamp"]
    kubeconfig = token_kubeconfig(
        cluster.kubeconfig, answer["status"]["token"], tmp_path / "reconciler.kubeconfig"
    )

    # the token is the ServiceAccount's, and it is not an admin's
    as_reconciler = Kube(str(kubeconfig))
    try:
        with pytest.raises(KubeError) as refused:
            as_reconciler.list("/api/v1/namespaces/kube-system/secrets")
        assert refused.value.status == 403
        assert f'User "system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"' in str(refused.value)
    finally:
        as_reconciler.close()

    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    good = remote.commit_and_push("example")
    done = reconcile_once(kubeconfig, remote.url, tmp_path / "cache", target=TARGET)
    assert done.returncode == 0 and f"applied {good}" in done.stdout, f"{explain(done)}\n{cluster.health()}"
    assert "forbidden" not in done.stderr.lower()

    total = NODE_COUNT * DEVICES_PER_NODE
    edit(remote.work, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=total))
    bad = remote.commit_and_push(f"{total} trainers: one GPU more than the nodes have")
    done = reconcile_once(kubeconfig, remote.url, tmp_path / "cache", target=TARGET)
    assert done.returncode == 1 and f"rolled-back {bad}" in done.stdout, (
        f"{explain(done)}\n{cluster.health()}"
    )
    assert "forbidden" not in done.stderr.lower()

    def trainer_back() -> bool:
        trainer = cluster.kube.get("/apis/apps/v1/namespaces/ml-team/deployments/trainer") or {}
        return bool((trainer.get("spec") or {}).get("replicas") == 2)

    wait_for("the trainer back on 2 replicas", trainer_back, timeout=30)
    state = cluster.kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/dra-gitops-{TARGET}")
    assert state is not None, "the state ConfigMap is kept in the deployment's namespace"
    lease = cluster.kube.get(
        f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/dra-gitops-{TARGET}"
    )
    assert lease is not None
