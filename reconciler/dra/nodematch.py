"""Which nodes a pod or a device may use (pure): node selectors, required node affinity, taints.

The rules of Kubernetes' node predicates, one copy for every caller: the placement model and the
capacity prediction (:mod:`reconciler.dra.placement`, :mod:`reconciler.dra.capacity`), the devices a
ResourceSlice's ``nodeSelector`` serves (:mod:`reconciler.dra.devices`), the simulated control plane
(:mod:`reconciler.sim.controlplane.base`) and the daemon controller's predicate in
:mod:`reconciler.cluster.nodefit`. A NodeSelector's terms are ORed and a term's requirements ANDed; a
term without requirements matches no node (component-helpers' ``nodeaffinity.NewNodeSelector`` drops
it); an empty or missing selector matches every node.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from reconciler.model.readers import as_dict, as_list

__all__ = [
    "DAEMON_TOLERATIONS",
    "HOST_NETWORK_TOLERATION",
    "daemon_pod_tolerations",
    "label_selector_matches",
    "BLOCKING_EFFECTS",
    "node_selector_for",
    "node_selector_matches",
    "pod_selects_node",
    "tolerates",
    "untolerated_taint",
]

BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


def node_selector_matches(selector: Mapping[str, Any] | None, node: str, labels: Mapping[str, str]) -> bool:
    """A core NodeSelector against a node (name + labels): terms ORed, requirements ANDed."""
    if not selector:
        return True
    terms = as_list(selector.get("nodeSelectorTerms"))
    if not terms:
        return False
    for raw in terms:
        term = as_dict(raw)
        expressions, fields = as_list(term.get("matchExpressions")), as_list(term.get("matchFields"))
        if not expressions and not fields:
            continue  # an empty term matches no node
        ok = True
        for expr in expressions:
            ok = ok and _requirement(as_dict(expr), labels.get(str(as_dict(expr).get("key")), None))
        for expr in fields:
            value = node if as_dict(expr).get("key") == "metadata.name" else None
            ok = ok and _requirement(as_dict(expr), value)
        if ok:
            return True
    return False


def _requirement(expr: Mapping[str, Any], value: str | None) -> bool:
    op = expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    if op == "In":
        return value is not None and str(value) in values
    if op == "NotIn":
        return value is None or str(value) not in values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    if op in ("Gt", "Lt"):
        try:
            a, b = int(value or ""), int(values[0])
        except (ValueError, IndexError):
            return False
        return a > b if op == "Gt" else a < b
    return False


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels ANDed with matchExpressions) against a label set."""
    for k, v in as_dict(selector.get("matchLabels")).items():
        if labels.get(str(k)) != str(v):
            return False
    for raw in as_list(selector.get("matchExpressions")):
        expr = as_dict(raw)
        if not _requirement(expr, labels.get(str(expr.get("key")))):
            return False
    return True


def pod_selects_node(spec: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    """A PodSpec's ``nodeSelector`` and required node affinity against a node."""
    for k, v in as_dict(spec.get("nodeSelector")).items():
        if labels.get(str(k)) != str(v):
            return False
    required = as_dict(as_dict(spec.get("affinity")).get("nodeAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return node_selector_matches(required if isinstance(required, dict) else None, node, labels)


def node_selector_for(node: str) -> dict[str, Any]:
    """The NodeSelector of exactly one node, by name (an allocation's, a DaemonSet pod's)."""
    return {
        "nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]
    }


def tolerates(tol: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """One toleration against one taint: effect (empty: any), Exists (empty key: every key) or Equal."""
    if tol.get("effect") and tol.get("effect") != taint.get("effect"):
        return False
    if tol.get("operator") == "Exists":
        return not tol.get("key") or tol.get("key") == taint.get("key")
    return tol.get("key") == taint.get("key") and str(tol.get("value") or "") == str(taint.get("value") or "")


def untolerated_taint(taints: Iterable[Mapping[str, Any]], tolerations: Any) -> Mapping[str, Any] | None:
    """The first NoSchedule/NoExecute taint no toleration tolerates (other effects never block)."""
    tols = [as_dict(t) for t in as_list(tolerations)]
    for taint in taints:
        if taint.get("effect") in BLOCKING_EFFECTS and not any(tolerates(t, taint) for t in tols):
            return taint
    return None


# The tolerations the daemon controller adds to every daemon pod (AddOrUpdateDaemonPodTolerations); the
# network-unavailable one only with hostNetwork.
DAEMON_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
HOST_NETWORK_TOLERATION: dict[str, str] = {
    "key": "node.kubernetes.io/network-unavailable",
    "operator": "Exists",
    "effect": "NoSchedule",
}


def daemon_pod_tolerations(
    tolerations: Iterable[Mapping[str, Any]], host_network: bool
) -> list[dict[str, Any]]:
    """A daemon pod's tolerations: the template's, plus those of the controller it does not have already."""
    own = [dict(t) for t in tolerations]
    have = {(t.get("key"), t.get("effect")) for t in own}
    extra = [*DAEMON_TOLERATIONS, *([HOST_NETWORK_TOLERATION] if host_network else [])]
    return own + [dict(t) for t in extra if (t["key"], t["effect"]) not in have]
