"""Namespace deletion as kube-apiserver and the namespace controller do it (issue 29, item 8): a deleted
Namespace is Terminating (deletionTimestamp, phase) while its content goes; content held by a finalizer
keeps it there; new content is refused (403); the namespace's own finalizers keep it, emptied, until they
are removed. Every wait is on a condition: a real namespace controller takes seconds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from contract_support import until
from kubernetes.dynamic import DynamicClient
from kubernetes.dynamic.exceptions import ForbiddenError, NotFoundError

HOLD = "kube-contract.example.com/hold"


def namespace(dyn: DynamicClient, name: str) -> dict[str, Any] | None:
    try:
        return dict(dyn.resources.get(api_version="v1", kind="Namespace").get(name=name).to_dict())
    except NotFoundError:
        return None


def configmap(name: str, ns: str, finalizers: list[str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": ns}
    if finalizers:
        meta["finalizers"] = finalizers
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": {"k": "v"}}


def test_a_namespace_is_terminating_while_content_held_by_a_finalizer_remains(
    dyn: DynamicClient, make_namespace: Callable[[], str]
) -> None:
    ns = make_namespace()
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    cms.create(body=configmap("held", ns, [HOLD]), namespace=ns)
    cms.create(body=configmap("free", ns), namespace=ns)
    dyn.resources.get(api_version="v1", kind="Namespace").delete(name=ns)

    live = namespace(dyn, ns)
    assert live is not None and live["metadata"].get("deletionTimestamp")
    assert live["status"]["phase"] == "Terminating"
    with pytest.raises(ForbiddenError) as refused:  # no new content in a namespace being terminated
        cms.create(body=configmap("late", ns), namespace=ns)
    assert "being terminated" in str(refused.value.body)

    # The namespace controller deletes the content: the held one only gets its deletionTimestamp.
    until(lambda: not [i for i in cms.get(namespace=ns).items if i.metadata.name == "free"], 60, "free gone")
    held = cms.get(name="held", namespace=ns)
    assert held.metadata.deletionTimestamp
    assert namespace(dyn, ns) is not None  # still Terminating: its content is not gone

    cms.patch(
        name="held",
        namespace=ns,
        content_type="application/merge-patch+json",
        body={"metadata": {"finalizers": None}},
    )
    until(lambda: namespace(dyn, ns) is None, 60, "the namespace gone once its content is")


def test_a_namespaces_own_finalizer_keeps_it_terminating_once_emptied(dyn: DynamicClient) -> None:
    ns_api = dyn.resources.get(api_version="v1", kind="Namespace")
    name = f"kc-ns-finalizer-{time.monotonic_ns() % 10**8}"
    ns_api.create(
        body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "finalizers": [HOLD]}}
    )
    try:
        dyn.resources.get(api_version="v1", kind="ConfigMap").create(
            body=configmap("c", name), namespace=name
        )
        ns_api.delete(name=name)
        # The namespace controller empties it and drops spec.finalizers ("kubernetes"); the object stays.
        done = until(
            lambda: (
                (live := namespace(dyn, name)) is not None
                and not live.get("spec", {}).get("finalizers")
                and live
            ),
            60,
            "the namespace controller done with it",
        )
        assert done["status"]["phase"] == "Terminating"
        assert done["metadata"]["finalizers"] == [HOLD]
    finally:
        ns_api.patch(
            name=name, content_type="application/merge-patch+json", body={"metadata": {"finalizers": None}}
        )
    until(lambda: namespace(dyn, name) is None, 60, "the namespace gone once its finalizer is")


def test_a_deleted_namespace_is_terminating_until_the_namespace_controller_removed_its_content(
    dyn: DynamicClient,
) -> None:
    ns_api = dyn.resources.get(api_version="v1", kind="Namespace")
    cms = dyn.resources.get(api_version="v1", kind="ConfigMap")
    name = f"kc-ns-terminating-{time.monotonic_ns() % 10**8}"
    ns_api.create(body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    cms.create(body=configmap("c", name), namespace=name)
    ns_api.delete(name=name)
    live = namespace(dyn, name)  # the controller has not finished yet: seconds on a real cluster
    assert live is not None and live["status"]["phase"] == "Terminating", live
    until(lambda: namespace(dyn, name) is None, 60, "the namespace gone with its content")
    with pytest.raises(NotFoundError):
        cms.get(name="c", namespace=name)
