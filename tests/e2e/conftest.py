"""Fixtures of the end-to-end suite (see e2e_support.py for what the suite plays and why).

Skipped, loudly, when $DRA_GITOPS_E2E_KUBECONFIG is not set.
"""

from __future__ import annotations

import os
import secrets
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e_support import (
    DRIVER,
    E2E_ENV,
    EXAMPLE_CLUSTER_OBJECTS,
    EXAMPLE_NAMESPACES,
    NODE_COUNT,
    RESOURCE_API,
    RUN_LABEL,
    SKIP_MESSAGE,
    E2ECluster,
    FakeDriver,
    FakeKubelet,
    Kube,
    condition,
    delete_example_state,
    e2e_kubeconfig,
    md,
    renew_node,
    wait_for,
)


def pytest_report_header(config: pytest.Config) -> str:
    path = e2e_kubeconfig()
    if path is None:
        return f"e2e: skipped, {E2E_ENV} not set"
    return f"e2e: against the cluster of {E2E_ENV}={path}"


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    # Also shown when tests/e2e is collected from the top (its conftest is then not an "initial" one
    # and pytest_report_header is not called for it).
    if e2e_kubeconfig() is None:
        terminalreporter.write_sep("-", f"e2e: skipped, {E2E_ENV} not set", yellow=True)


# ---------------------------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def kubeconfig() -> str:
    path = e2e_kubeconfig()
    if path is None:
        pytest.skip(SKIP_MESSAGE)
    if not Path(path).is_file():
        pytest.fail(f"{E2E_ENV}={path}: no such kubeconfig file")
    return path


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> Iterator[Kube]:
    client = Kube(kubeconfig)
    try:
        client.request("GET", "/version", timeout=10)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"{E2E_ENV}={kubeconfig}: cannot reach the cluster: {exc}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def run_id() -> str:
    return f"dra-e2e-{secrets.token_hex(3)}"


@pytest.fixture(scope="session")
def e2e_guard(kube: Kube) -> bool:
    """Refuse to touch a cluster that already has the example's objects (or any Node)."""
    group = kube.get("/apis/resource.k8s.io") or {}
    versions = [v.get("version") for v in group.get("versions") or []]
    if "v1" not in versions:
        pytest.skip(f"e2e: the cluster does not serve resource.k8s.io/v1 (serves {versions or 'none'})")
    found = [f"Namespace {ns}" for ns in EXAMPLE_NAMESPACES if kube.get(f"/api/v1/namespaces/{ns}")]
    found += [
        f"{path.rsplit('/', 1)[1]} {name}"
        for path, name in EXAMPLE_CLUSTER_OBJECTS
        if kube.get(f"{path}/{name}")
    ]
    slices = [
        md(s)["name"]
        for s in kube.list(f"{RESOURCE_API}/resourceslices")
        if (s.get("spec") or {}).get("driver") == DRIVER
    ]
    if slices:
        found.append(f"ResourceSlices of {DRIVER}: {', '.join(slices)}")
    if found:
        pytest.skip(
            "e2e: the cluster already has objects the suite would create or clobber: " + "; ".join(found)
        )
    nodes = [md(n)["name"] for n in kube.list("/api/v1/nodes")]
    if nodes:
        pytest.skip(
            "e2e: expects a control plane without nodes (the suite creates its own and plays their kubelet); "
            f"found {', '.join(nodes)}"
        )
    return True


@pytest.fixture(scope="session")
def e2e_nodes(kube: Kube, kubeconfig: str, run_id: str, e2e_guard: bool) -> Iterator[list[str]]:
    """NODE_COUNT Ready Nodes (the first labelled dra-gitops.io/canary=true), deleted afterwards."""
    names = [f"{run_id}-node-{i}" for i in range(NODE_COUNT)]
    try:
        for i, name in enumerate(names):
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                RUN_LABEL: run_id,
            }
            if i == 0:
                labels["dra-gitops.io/canary"] = "true"
            kube.create(
                "/api/v1/nodes",
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels},
                    "spec": {},
                },
            )
            renew_node(kube, name, i)  # Lease and Ready status, as the kubelet's first heartbeat

        def schedulable() -> bool:
            for name in names:
                node = kube.get(f"/api/v1/nodes/{name}") or {}
                taints = (node.get("spec") or {}).get("taints") or []
                if condition(node, "Ready") != "True" or any(
                    t.get("key") == "node.kubernetes.io/not-ready" for t in taints
                ):
                    return False
            return True

        wait_for("the e2e nodes to be Ready without the not-ready taint", schedulable, timeout=60)
        yield names
    finally:
        for name in names:
            kube.delete(f"/api/v1/nodes/{name}")
            kube.delete(f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{name}")


@pytest.fixture(scope="session")
def fake_kubelet(kubeconfig: str, run_id: str, e2e_nodes: list[str]) -> Iterator[FakeKubelet]:
    # $DRA_GITOPS_E2E_CRASH_IMAGE: comma-separated image substrings the fake kubelet crash-loops
    crash = tuple(i for i in os.environ.get("DRA_GITOPS_E2E_CRASH_IMAGE", "").split(",") if i)
    kubelet = FakeKubelet(kubeconfig, run_id, e2e_nodes, crash_images=crash)
    kubelet.heartbeat()
    kubelet.start()
    yield kubelet
    kubelet.stop()


@pytest.fixture(scope="session")
def fake_driver(kubeconfig: str, run_id: str, e2e_nodes: list[str]) -> Iterator[FakeDriver]:
    driver = FakeDriver(kubeconfig, run_id, e2e_nodes, preinstalled=False)
    driver.start()
    try:
        yield driver
    finally:
        driver.stop()
        driver.cleanup()


@pytest.fixture(scope="session")
def e2e_cluster(
    kube: Kube,
    kubeconfig: str,
    run_id: str,
    e2e_guard: bool,
    e2e_nodes: list[str],
    fake_kubelet: FakeKubelet,
    fake_driver: FakeDriver,
) -> Iterator[E2ECluster]:
    """The cluster with the suite's nodes, driver and kubelet; the example's objects removed at the end."""
    cluster = E2ECluster(
        kubeconfig=kubeconfig,
        kube=kube,
        run_id=run_id,
        nodes=e2e_nodes,
        driver=fake_driver,
        kubelet=fake_kubelet,
        state_namespace=f"{run_id}-state",
    )
    try:
        yield cluster
    finally:
        problems = []
        for undo in reversed(cluster.extra_cleanup):
            try:
                undo()
            except Exception as exc:  # noqa: BLE001 - clean up the rest regardless
                problems.append(str(exc))
        left = delete_example_state(kube, state_namespace=cluster.state_namespace)
        if left or problems:
            warnings.warn(f"e2e cleanup incomplete: left {left}; errors {problems}", stacklevel=1)


@pytest.fixture
def fresh_example(e2e_cluster: E2ECluster) -> E2ECluster:
    """No object of the example on the cluster (deleted and waited for)."""
    left = delete_example_state(e2e_cluster.kube, state_namespace=e2e_cluster.state_namespace)
    assert not left, f"could not remove the example's objects: {left}"
    return e2e_cluster
