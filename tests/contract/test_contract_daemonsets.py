"""DaemonSet update strategies as kube-controller-manager's daemon controller applies them.

From the Kubernetes docs ("Perform a Rolling Update on a DaemonSet", DaemonSet Update Strategy): with
``OnDelete``, "after you update a DaemonSet template, new DaemonSet pods will only be created when you
manually delete old DaemonSet pods"; with ``RollingUpdate`` (the default), "after you update a DaemonSet
template, old DaemonSet pods will be killed, and new DaemonSet pods will be created automatically". A pod
the controller makes carries the ``controller-revision-hash`` label of the DaemonSet's current
ControllerRevision (named ``<daemonset>-<hash>``) and ``pod-template-generation``.

These need a cluster that runs pods (``workload_configuration`` in conftest.py). Every wait is on a
condition with a deadline.
"""

from __future__ import annotations

from typing import Any

import pytest
from contract_support import until
from kubernetes.dynamic import DynamicClient

HASH = "controller-revision-hash"
GENERATION = "pod-template-generation"
IMAGE = "registry.k8s.io/pause:3.10"


def daemonset(name: str, strategy: dict[str, Any] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": name}},
        "template": {
            "metadata": {"labels": {"app": name}},
            "spec": {
                "terminationGracePeriodSeconds": 0,
                "containers": [{"name": "pause", "image": IMAGE, "env": [{"name": "REV", "value": "1"}]}],
            },
        },
    }
    if strategy is not None:
        spec["updateStrategy"] = strategy
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name}, "spec": spec}


def ds_object(dyn: DynamicClient, ns: str, name: str) -> dict[str, Any]:
    api = dyn.resources.get(api_version="apps/v1", kind="DaemonSet")
    return dict(api.get(name=name, namespace=ns).to_dict())


def live_pods(dyn: DynamicClient, ns: str, name: str) -> dict[str, dict[str, Any]]:
    """node name -> the DaemonSet's pod there (pods being deleted left out)."""
    pods = dyn.resources.get(api_version="v1", kind="Pod").get(namespace=ns, label_selector=f"app={name}")
    out: dict[str, dict[str, Any]] = {}
    for p in pods.to_dict()["items"]:
        if p["metadata"].get("deletionTimestamp"):
            continue
        node = (p.get("spec") or {}).get("nodeName")
        if node:
            out[node] = p
    return out


def settled(dyn: DynamicClient, ns: str, name: str) -> dict[str, Any] | None:
    """The DaemonSet once its controller has seen its generation and every desired pod is ready."""
    ds = ds_object(dyn, ns, name)
    st = ds.get("status") or {}
    if st.get("observedGeneration") != ds["metadata"]["generation"]:
        return None
    desired = st.get("desiredNumberScheduled") or 0
    if desired and st.get("numberReady") == desired:
        return ds
    return None


def start(
    dyn: DynamicClient, ns: str, name: str, strategy: dict[str, Any] | None
) -> dict[str, dict[str, Any]]:
    dyn.resources.get(api_version="apps/v1", kind="DaemonSet").create(
        body=daemonset(name, strategy), namespace=ns
    )
    try:
        until(lambda: settled(dyn, ns, name), 90, f"DaemonSet {name} ready on its nodes")
    except AssertionError:
        if not (ds_object(dyn, ns, name).get("status") or {}).get("desiredNumberScheduled"):
            pytest.skip("no node of this cluster runs DaemonSet pods")
        raise
    return live_pods(dyn, ns, name)


def change_template(dyn: DynamicClient, ns: str, name: str) -> int:
    """A new pod template (the REV env value): returns the DaemonSet's new generation."""
    api = dyn.resources.get(api_version="apps/v1", kind="DaemonSet")
    body = {
        "spec": {
            "template": {
                "spec": {
                    "containers": [{"name": "pause", "image": IMAGE, "env": [{"name": "REV", "value": "2"}]}]
                }
            }
        }
    }
    got = api.patch(name=name, namespace=ns, body=body, content_type="application/merge-patch+json")
    return int(got.metadata.generation)


def newest_revision(dyn: DynamicClient, ns: str, ds: dict[str, Any]) -> dict[str, Any]:
    api = dyn.resources.get(api_version="apps/v1", kind="ControllerRevision")
    uid = ds["metadata"]["uid"]
    owned = [
        r
        for r in api.get(namespace=ns).to_dict()["items"]
        if any(
            o.get("uid") == uid and o.get("controller") for o in r["metadata"].get("ownerReferences") or []
        )
    ]
    assert owned, "the DaemonSet has no ControllerRevision"
    return max(owned, key=lambda r: int(r["revision"]))


def observed(dyn: DynamicClient, ns: str, name: str, generation: int) -> dict[str, Any] | None:
    ds = ds_object(dyn, ns, name)
    return ds if (ds.get("status") or {}).get("observedGeneration") == generation else None


def test_ondelete_template_change_replaces_no_pod(wdyn: DynamicClient, wns: str) -> None:
    name = "ondelete"
    before = start(wdyn, wns, name, {"type": "OnDelete"})
    old_hash = {p["metadata"]["labels"][HASH] for p in before.values()}
    assert len(old_hash) == 1

    generation = change_template(wdyn, wns, name)
    ds = until(
        lambda: observed(wdyn, wns, name, generation), 30, "the controller to observe the new template"
    )
    new_hash = newest_revision(wdyn, wns, ds)["metadata"]["labels"][HASH]
    assert new_hash not in old_hash  # a new revision exists ...

    after = live_pods(wdyn, wns, name)  # ... and no pod was replaced for it
    assert {n: p["metadata"]["uid"] for n, p in after.items()} == {
        n: p["metadata"]["uid"] for n, p in before.items()
    }
    assert {p["metadata"]["labels"][HASH] for p in after.values()} == old_hash
    assert not [p for p in after.values() if p["metadata"].get("deletionTimestamp")]
    assert not (ds.get("status") or {}).get("updatedNumberScheduled")


def test_ondelete_a_deleted_pod_comes_back_with_the_new_template(wdyn: DynamicClient, wns: str) -> None:
    name = "ondelete-replace"
    before = start(wdyn, wns, name, {"type": "OnDelete"})
    generation = change_template(wdyn, wns, name)
    ds = until(
        lambda: observed(wdyn, wns, name, generation), 30, "the controller to observe the new template"
    )
    new_hash = newest_revision(wdyn, wns, ds)["metadata"]["labels"][HASH]

    node = sorted(before)[0]
    old = before[node]
    wdyn.resources.get(api_version="v1", kind="Pod").delete(name=old["metadata"]["name"], namespace=wns)

    def replaced() -> dict[str, Any] | None:
        p = live_pods(wdyn, wns, name).get(node)
        return p if p is not None and p["metadata"]["uid"] != old["metadata"]["uid"] else None

    new = until(replaced, 60, f"a new pod of {name} on {node}")
    assert new["metadata"]["labels"][HASH] == new_hash
    assert new["metadata"]["labels"][GENERATION] == str(generation)
    assert [e["value"] for e in new["spec"]["containers"][0]["env"] if e["name"] == "REV"] == ["2"]

    others = {n: p["metadata"]["uid"] for n, p in live_pods(wdyn, wns, name).items() if n != node}
    assert others == {n: p["metadata"]["uid"] for n, p in before.items() if n != node}

    def one_updated() -> bool:
        st = ds_object(wdyn, wns, name).get("status") or {}
        return st.get("updatedNumberScheduled") == 1 and st.get("numberReady") == st.get(
            "desiredNumberScheduled"
        )

    until(one_updated, 60, "updatedNumberScheduled 1 with every pod ready")


def test_rolling_update_replaces_every_pod_by_itself(wdyn: DynamicClient, wns: str) -> None:
    name = "rolling"
    before = start(wdyn, wns, name, None)  # RollingUpdate is the default
    assert ds_object(wdyn, wns, name)["spec"]["updateStrategy"]["type"] == "RollingUpdate"
    generation = change_template(wdyn, wns, name)
    ds = until(
        lambda: observed(wdyn, wns, name, generation), 30, "the controller to observe the new template"
    )
    new_hash = newest_revision(wdyn, wns, ds)["metadata"]["labels"][HASH]

    def all_new() -> dict[str, dict[str, Any]] | None:
        pods = live_pods(wdyn, wns, name)
        done = set(pods) == set(before) and all(
            p["metadata"]["labels"][HASH] == new_hash for p in pods.values()
        )
        return pods if done else None

    after = until(all_new, 120, "every pod replaced with the new template")
    assert not {p["metadata"]["uid"] for p in after.values()} & {
        p["metadata"]["uid"] for p in before.values()
    }
