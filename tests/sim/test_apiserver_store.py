"""The Store interface the simulated control plane codes against."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.sim.store import Store
from reconciler.sim.storebase import AlreadyExists, Conflict, Invalid, NotFound

RC = ("resource.k8s.io", "resourceclaims")


def claim(name: str, **md: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", **md},
        "spec": {
            "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.example.com"}}]}
        },
    }


@pytest.fixture
def store() -> Store:
    s = Store()
    s.create("", "namespaces", {"metadata": {"name": "ns"}})
    return s


def test_create_fills_server_fields_and_defaults(store: Store) -> None:
    out = store.create(*RC, claim("c"))
    md = out["metadata"]
    assert md["uid"] and md["resourceVersion"].isdigit() and md["creationTimestamp"] and md["generation"] == 1
    assert out["apiVersion"] == "resource.k8s.io/v1" and out["kind"] == "ResourceClaim"
    assert out["spec"]["devices"]["requests"][0]["exactly"]["count"] == 1
    with pytest.raises(AlreadyExists):
        store.create(*RC, claim("c"))
    with pytest.raises(NotFound, match='namespaces "other" not found'):
        store.create(*RC, dict(claim("x"), metadata={"name": "x", "namespace": "other"}))


def test_update_status_split_conflicts_and_no_op(store: Store) -> None:
    created = store.create(*RC, claim("c"))
    rv = created["metadata"]["resourceVersion"]
    same = store.update(*RC, created)
    assert same["metadata"]["resourceVersion"] == rv  # nothing changed: no new resourceVersion
    with_status = dict(created, status={"allocation": {"devices": {"results": []}}})
    assert "status" not in store.update(*RC, with_status)  # main resource ignores status
    out = store.update(*RC, with_status, status=True)
    assert out["status"]["allocation"] and out["metadata"]["generation"] == 1
    with pytest.raises(Conflict):
        store.update(*RC, created)  # stale resourceVersion
    changed = store.get(*RC, "ns", "c")
    assert changed is not None
    changed["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] = "other"
    with pytest.raises(Invalid, match="field is immutable"):
        store.update(*RC, changed)


def test_subscribe_sees_every_change_in_order(store: Store) -> None:
    seen: list[tuple[str, str, str]] = []
    unsubscribe = store.subscribe(lambda ev, t, o: seen.append((ev, t.kind, o["metadata"]["name"])))
    store.create(*RC, claim("c", finalizers=["x/y"]))
    store.mutate(*RC, "ns", "c", lambda o: o["metadata"].setdefault("labels", {}).update(a="1"))
    store.delete(*RC, "ns", "c")  # finalizer: only a deletionTimestamp
    assert store.get(*RC, "ns", "c")["metadata"]["deletionTimestamp"]  # type: ignore[index]
    store.mutate(*RC, "ns", "c", lambda o: o["metadata"].pop("finalizers"))
    unsubscribe()
    store.create(*RC, claim("d"))
    assert seen == [
        ("ADDED", "ResourceClaim", "c"),
        ("MODIFIED", "ResourceClaim", "c"),
        ("MODIFIED", "ResourceClaim", "c"),
        ("DELETED", "ResourceClaim", "c"),
    ]


def test_namespace_deletion_waits_for_finalized_content(store: Store) -> None:
    store.create(*RC, claim("c", finalizers=["x/y"]))
    store.delete("", "namespaces", "", "ns")
    ns = store.get("", "namespaces", "", "ns")
    assert ns is not None and ns["status"]["phase"] == "Terminating"
    store.mutate(*RC, "ns", "c", lambda o: o["metadata"].pop("finalizers"))
    assert store.get("", "namespaces", "", "ns") is None


def test_foreground_deletion_removes_dependents_first(store: Store) -> None:
    owner = store.create("", "configmaps", {"metadata": {"name": "owner", "namespace": "ns"}})
    ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner["metadata"]["uid"]}
    store.create("", "configmaps", {"metadata": {"name": "dep", "namespace": "ns", "ownerReferences": [ref]}})
    store.delete("", "configmaps", "ns", "owner", propagation="Foreground")
    assert store.list("", "configmaps", "ns") == []


def test_list_label_selector(store: Store) -> None:
    store.create(*RC, claim("a", labels={"tier": "x"}))
    store.create(*RC, claim("b"))
    assert [o["metadata"]["name"] for o in store.list(*RC, "ns", "tier!=x")] == ["b"]
    assert [o["metadata"]["name"] for o in store.list(*RC, None, "tier in (x)")] == ["a"]
