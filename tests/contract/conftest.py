"""Fixtures for the Kubernetes API contract suite (see README.md).

Server selection:
  KUBE_CONTRACT_URL=http://127.0.0.1:PORT     plain http, no auth (a test double)
  KUBE_CONTRACT_KUBECONFIG=/path/kubeconfig   that kubeconfig's current context (a real cluster)
  neither                                     a SimCluster started for the session on 127.0.0.1

A plain $KUBECONFIG does not pick the target: a shell pointed at some cluster would otherwise send the
suite there on every `pytest` run.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kubernetes import client, config
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import NotFoundError
from kubernetes.dynamic.resource import Resource

from reconciler.sim.server import SimCluster


@pytest.fixture(scope="session")
def kube_configuration() -> Iterator[client.Configuration]:
    url = os.environ.get("KUBE_CONTRACT_URL")
    kubeconfig = os.environ.get("KUBE_CONTRACT_KUBECONFIG")
    if url:
        yield client.Configuration(host=url.rstrip("/"))
    elif kubeconfig:
        cfg = client.Configuration()
        config.load_kube_config(config_file=kubeconfig, client_configuration=cfg)
        yield cfg
    else:
        # The namespace controller takes its time, as a real one does (tests/contract/test_contract_namespaces.py).
        with SimCluster(namespace_content_delay=0.5) as cluster:
            yield client.Configuration(host=cluster.url)


@pytest.fixture
def dyn(kube_configuration: client.Configuration, tmp_path: Path) -> Iterator[DynamicClient]:
    api = client.ApiClient(kube_configuration)
    # Per-test discovery cache: by default DynamicClient shares $TMPDIR/osrcp-<md5(host)>.json
    # between runs, which would hide what the server under test serves right now.
    d = DynamicClient(api, cache_file=str(tmp_path / "discovery.json"))
    yield d
    api.close()


@pytest.fixture
def rc_api(dyn: DynamicClient) -> Resource:
    return dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")


def _release_finalizers(dyn: DynamicClient, namespace: str) -> None:
    """Best effort: a claim left with finalizers would keep its namespace Terminating."""
    try:
        rc = dyn.resources.get(api_version="resource.k8s.io/v1", kind="ResourceClaim")
        for item in rc.get(namespace=namespace).to_dict().get("items") or []:
            if item["metadata"].get("finalizers"):
                rc.patch(
                    name=item["metadata"]["name"],
                    namespace=namespace,
                    content_type="application/merge-patch+json",
                    body={"metadata": {"finalizers": None}},
                )
    except Exception:  # noqa: BLE001 - cleanup must not mask the test result
        pass


@pytest.fixture
def make_namespace(dyn: DynamicClient, request: pytest.FixtureRequest) -> Iterator[Callable[[], str]]:
    """Factory: creates a fresh Namespace (name unique per call), deleted after the test."""
    ns_api = dyn.resources.get(api_version="v1", kind="Namespace")
    base = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower().removeprefix("test_"))[:40].strip("-")
    created: list[str] = []

    def make() -> str:
        name = f"kc-{base}-{uuid.uuid4().hex[:6]}"
        ns_api.create(
            body={
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": name, "labels": {"kube-contract": "true"}},
            }
        )
        created.append(name)
        return name

    yield make
    for name in created:
        _release_finalizers(dyn, name)
        with contextlib.suppress(NotFoundError):
            ns_api.delete(name=name)


@pytest.fixture
def ns(make_namespace: Callable[[], str]) -> str:
    return make_namespace()
