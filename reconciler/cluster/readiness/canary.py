"""A driver DaemonSet that runs on no node (docs/operator-guide.md "Upgrade a DRA driver with a canary").

A canary exists to try a new driver template on canary nodes. If its nodeSelector or affinity matches
no node, its DaemonSet desires 0 pods, its rollout is "complete" at once and it has verified nothing. A
canary whose template changed in the revision being applied fails its stage (1a) for that; one that is
unchanged is a warning (stage wait, `check --cluster` through the driver-canary policy, `inventory`).
A main driver DaemonSet that runs on no node verifies nothing either: it fails stage 1 (a warning when
the cluster has no nodes at all, where no selector is to blame). `nodefit` says why no node fits.

PURE: live objects in, reasons out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.cluster.readiness.nodefit import no_node
from reconciler.model import dra
from reconciler.model.readers import as_dict


def _template(workload: Mapping[str, Any] | None) -> dict[str, Any]:
    return as_dict(as_dict(as_dict(workload).get("spec")).get("template"))


def node_selector(workload: Mapping[str, Any]) -> dict[str, str]:
    spec = as_dict(_template(workload).get("spec"))
    return {str(k): str(v) for k, v in as_dict(spec.get("nodeSelector")).items()}


def has_node_affinity(workload: Mapping[str, Any]) -> bool:
    spec = as_dict(_template(workload).get("spec"))
    return bool(as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")))


def template_changed(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> bool:
    """The pod template differs between two live reads (a workload that did not exist before changed)."""
    return before is None or _template(before) != _template(after)


def nodes_matching(selector: Mapping[str, str], nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    out = []
    for node in nodes:
        labels = as_dict(as_dict(node.get("metadata")).get("labels"))
        if all(labels.get(k) == v for k, v in selector.items()):
            out.append(str(as_dict(node.get("metadata")).get("name") or ""))
    return out


def label_hint(selector: Mapping[str, str]) -> str:
    pairs = " ".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<key>=<value>"
    return f"kubectl label node <node> {pairs}"


def _observed(workload: Mapping[str, Any]) -> bool:
    generation = as_dict(workload.get("metadata")).get("generation")
    observed = as_dict(workload.get("status")).get("observedGeneration")
    return generation is None or (isinstance(observed, int) and observed >= generation)


def idle_canary_reason(
    workload: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]] | None = None
) -> str | None:
    """Why a canary DaemonSet runs on no node, or None (not a canary DaemonSet, or it runs somewhere).

    It runs nowhere when its controller, having observed its spec, desires 0 pods; or, before that (or
    with no status at all), when `nodes` are given and none matches its nodeSelector.
    """
    body = dict(workload)
    main = dra.canary_for(body)
    if main is None or workload.get("kind") != "DaemonSet":
        return None
    selector = node_selector(workload)
    status = as_dict(workload.get("status"))
    desired = status.get("desiredNumberScheduled")
    if _observed(workload) and isinstance(desired, int):
        if desired > 0:
            return None
    elif nodes is None or not selector or nodes_matching(selector, nodes):
        return None
    meta = as_dict(workload.get("metadata"))
    who = f"canary DaemonSet/{meta.get('namespace')}/{meta.get('name')} (canary for {main})"
    down = _unready(selector, nodes)
    if down:
        be = "is" if len(down) == 1 else "are"
        return (
            f"{who} runs on no node: {', '.join(down)} {be} not Ready (0 pods desired), so it verifies "
            f"nothing; bring {', '.join(down)} back (kubectl describe node {down[0]})"
        )
    unfit = no_node(as_dict(_template(workload).get("spec")), nodes) if nodes is not None else None
    if unfit is not None:
        where = unfit.why
    elif selector:
        where = (
            f"its nodeSelector {', '.join(f'{k}={v}' for k, v in sorted(selector.items()))} matches no node"
        )
    elif has_node_affinity(workload):
        where = "its node affinity matches no node"
    else:
        where = "no node accepts it (taints?)"
    return (
        f"{who} runs on no node: {where} (0 pods desired), so it verifies nothing; "
        f"label a canary node: {label_hint(selector)}"
    )


def _ready(node: Mapping[str, Any]) -> bool:
    conditions = as_dict(node.get("status")).get("conditions")
    return any(
        isinstance(c, dict) and c.get("type") == "Ready" and c.get("status") == "True"
        for c in (conditions if isinstance(conditions, list) else [])
    )


def _unready(selector: Mapping[str, str], nodes: Iterable[Mapping[str, Any]] | None) -> list[str]:
    """The canary nodes the selector matches when none of them is Ready ([] otherwise)."""
    if nodes is None or not selector:
        return []
    nodes = list(nodes)
    matching = [n for n in nodes if n.get("kind", "Node") == "Node" and nodes_matching(selector, [n])]
    if not matching or any(_ready(n) for n in matching):
        return []
    return sorted(str(as_dict(n.get("metadata")).get("name") or "") for n in matching)


def idle_main_driver_reason(workload: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> str | None:
    """Why a main (not canary) driver DaemonSet runs on no node, or None (it runs somewhere, or its
    controller has not yet counted the nodes for its current spec)."""
    body = dict(workload)
    if workload.get("kind") != "DaemonSet" or dra.canary_for(body) is not None:
        return None
    if not dra.is_driver_workload(body) or not _observed(workload):
        return None
    if as_dict(workload.get("status")).get("desiredNumberScheduled") != 0:
        return None
    nodes = list(nodes)
    unfit = no_node(as_dict(_template(workload).get("spec")), nodes)
    if unfit is None:  # a node fits by our reading: the controller's count is older than that node's labels
        return None
    meta = as_dict(workload.get("metadata"))
    fix = f"; {unfit.fix}" if unfit.fix else ""
    return (
        f"driver DaemonSet/{meta.get('namespace')}/{meta.get('name')} runs on no node: {unfit.why} "
        f"(0 pods desired), so it verifies nothing{fix}"
    )


def idle_driver_reason(
    workload: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]] | None = None
) -> str | None:
    """Why a driver DaemonSet, canary or main, runs on no node (None: it runs, or is not one)."""
    if dra.canary_for(dict(workload)) is not None:
        return idle_canary_reason(workload, nodes)
    return None if nodes is None else idle_main_driver_reason(workload, nodes)


__all__ = [
    "has_node_affinity",
    "idle_canary_reason",
    "idle_driver_reason",
    "idle_main_driver_reason",
    "label_hint",
    "node_selector",
    "nodes_matching",
    "template_changed",
]
