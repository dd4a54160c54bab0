"""Which nodes a DaemonSet runs on, and why none: the node predicate of kube-controller-manager's daemon
controller.

The controller runs a daemon pod on every node whose labels match the template's nodeSelector and its
required node affinity and whose NoSchedule/NoExecute taints the template tolerates, counting the
tolerations it adds to every daemon pod (NodeShouldRunDaemonPod, AddOrUpdateDaemonPodTolerations). A
driver DaemonSet that fits no node desires 0 pods: its rollout is complete at once and it verifies
nothing. `no_node` says why, naming the nodeSelector, the affinity's terms or the taints.

PURE: a pod spec and live Nodes in, reasons out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.dra.nodematch import daemon_pod_tolerations, node_selector_matches, untolerated_taint
from reconciler.model.readers import as_dict, as_list

_SHOWN = 5


def daemon_tolerations(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    own = [as_dict(t) for t in as_list(pod_spec.get("tolerations"))]
    return daemon_pod_tolerations(own, bool(pod_spec.get("hostNetwork")))


def _name(node: Mapping[str, Any]) -> str:
    return str(as_dict(node.get("metadata")).get("name") or "")


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(as_dict(node.get("metadata")).get("labels")).items()}


def _taints(node: Mapping[str, Any]) -> list[Any]:
    return as_list(as_dict(node.get("spec")).get("taints"))


def _selector(pod_spec: Mapping[str, Any]) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(pod_spec.get("nodeSelector")).items()}


def _terms(pod_spec: Mapping[str, Any]) -> list[dict[str, Any]] | None:
    """The required node affinity's terms (ORed); None when there is none, so every node qualifies."""
    affinity = as_dict(as_dict(pod_spec.get("affinity")).get("nodeAffinity"))
    required = affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return None
    return [as_dict(t) for t in as_list(required.get("nodeSelectorTerms"))]


def _requirements(term: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("matchExpressions", as_dict(e)) for e in as_list(term.get("matchExpressions"))] + [
        ("matchFields", as_dict(e)) for e in as_list(term.get("matchFields"))
    ]


def _term_matches(term: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    if not _requirements(term):
        return False  # an empty term matches no node
    return node_selector_matches({"nodeSelectorTerms": [dict(term)]}, _name(node), _labels(node))


def _requirement_matches(field: str, expr: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    return _term_matches({field: [dict(expr)]}, node)


def _by_selector(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    labels = _labels(node)
    return all(labels.get(k) == v for k, v in _selector(pod_spec).items())


def _by_affinity(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    terms = _terms(pod_spec)
    return terms is None or any(_term_matches(t, node) for t in terms)


def fitting_nodes(pod_spec: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> list[str]:
    """The nodes the daemon controller would run this pod on (its desiredNumberScheduled)."""
    tolerations = daemon_tolerations(pod_spec)
    return [
        _name(n)
        for n in nodes
        if _by_selector(pod_spec, n)
        and _by_affinity(pod_spec, n)
        and untolerated_taint(_taints(n), tolerations) is None
    ]


# ---- texts


def selector_text(selector: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(selector.items()))


def _names(nodes: Sequence[Mapping[str, Any]]) -> str:
    names = sorted(_name(n) for n in nodes)
    return ", ".join(names[:_SHOWN]) + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def _values_seen(key: str, nodes: Sequence[Mapping[str, Any]]) -> list[str]:
    return sorted({labels[key] for labels in map(_labels, nodes) if key in labels})


def _selector_detail(selector: Mapping[str, str], nodes: Sequence[Mapping[str, Any]]) -> str:
    misses = []
    for key, value in sorted(selector.items()):
        if any(_labels(n).get(key) == value for n in nodes):
            continue
        seen = _values_seen(key, nodes)
        misses.append(
            f"no node has {key}={value} (seen: {', '.join(f'{key}={v}' for v in seen)})"
            if seen
            else f"no node has the label {key}"
        )
    return "; ".join(misses) or "no node has all of them"


def _requirement_text(field: str, expr: Mapping[str, Any]) -> str:
    key, op = expr.get("key"), expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    label = key if field == "matchExpressions" else f"field {key}"
    if op in ("Exists", "DoesNotExist"):
        return f"{label} {op}"
    if op in ("Gt", "Lt"):
        return f"{label} {op} {values[0] if values else '?'}"
    return f"{label} {op} [{', '.join(values)}]"


def terms_text(terms: Sequence[Mapping[str, Any]]) -> str:
    texts = [" and ".join(_requirement_text(f, e) for f, e in _requirements(t)) or "{}" for t in terms]
    if len(texts) == 1:
        return texts[0]
    return " or ".join(f"({t})" if " and " in t else t for t in texts) or "no term"


def _requirement_miss(field: str, expr: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str:
    key, op = str(expr.get("key")), expr.get("operator")
    values = [str(v) for v in as_list(expr.get("values"))]
    if field == "matchFields":
        return f"no node has {_requirement_text(field, expr)}"
    seen = _values_seen(key, nodes)
    if op in ("In", "Exists") and not seen:
        return f"no node has the label {key}"
    if op == "In":
        return f"no node has {key} in [{', '.join(values)}] (seen: {', '.join(f'{key}={v}' for v in seen)})"
    if op == "NotIn":
        return f"every node has {key} in [{', '.join(values)}]"
    if op == "DoesNotExist":
        return f"every node has the label {key}"
    if op in ("Gt", "Lt"):
        return f"no node has {key} {'greater' if op == 'Gt' else 'less'} than {values[0] if values else '?'}"
    return f"unknown operator {op!r} matches no node"


def _affinity_detail(terms: Sequence[Mapping[str, Any]], nodes: Sequence[Mapping[str, Any]]) -> str:
    if not terms:
        return "no nodeSelectorTerms, so no node"
    details: list[str] = []
    for term in terms:
        requirements = _requirements(term)
        if not requirements:
            found = "an empty term matches no node"
        else:
            misses = [
                _requirement_miss(f, e, nodes)
                for f, e in requirements
                if not any(_requirement_matches(f, e, n) for n in nodes)
            ]
            found = "; ".join(misses) or f"no node matches all of {terms_text([term])}"
        if found not in details:
            details.append(found)
    return "; ".join(details)


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint.get('value')}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


@dataclass(frozen=True)
class NoNode:
    """Why no node runs a daemon pod (`why`) and what would let one (`fix`, empty when nothing helps)."""

    why: str
    fix: str = ""


def no_node(pod_spec: Mapping[str, Any], nodes: Iterable[Mapping[str, Any]]) -> NoNode | None:
    """Why the daemon controller runs this pod on no node, or None when some node fits.

    With no nodes at all, "the cluster has no nodes": then no selector is to blame.
    """
    nodes = list(nodes)
    if not nodes:
        return NoNode("the cluster has no nodes")
    selector, terms = _selector(pod_spec), _terms(pod_spec)
    by_selector = [n for n in nodes if _by_selector(pod_spec, n)]
    by_affinity = [n for n in nodes if _by_affinity(pod_spec, n)]
    pairs = " ".join(f"{k}={v}" for k, v in sorted(selector.items()))
    label_fix = f"label the nodes that have its devices: kubectl label node <node> {pairs}"
    parts = []
    if not by_selector:
        parts.append(
            f"its nodeSelector {selector_text(selector)} matches no node ({_selector_detail(selector, nodes)})"
        )
    if not by_affinity and terms is not None:
        parts.append(f"its nodeAffinity requires {terms_text(terms)}: {_affinity_detail(terms, nodes)}")
    if parts:
        fix = label_fix if not by_selector else ""
        fix = fix or "label the nodes that have its devices so that they match, or correct the affinity"
        return NoNode("; ".join(parts), fix)
    selected = [n for n in by_selector if _by_affinity(pod_spec, n)]
    if not selected:
        return NoNode(
            f"its nodeSelector {selector_text(selector)} matches only {_names(by_selector)} and its "
            f"nodeAffinity ({terms_text(terms or [])}) only {_names(by_affinity)}",
            "make the nodeSelector and the affinity select the same nodes",
        )
    tolerations = daemon_tolerations(pod_spec)
    taints = [(n, untolerated_taint(_taints(n), tolerations)) for n in selected]
    if any(taint is None for _, taint in taints):
        return None
    which = "every node" if len(selected) == len(nodes) else f"each of the {len(selected)} node(s) it selects"
    shown = ", ".join(f"{_name(n)} ({_taint_text(t or {})})" for n, t in taints[:_SHOWN])
    more = f" and {len(taints) - _SHOWN} more" if len(taints) > _SHOWN else ""
    return NoNode(
        f"it does not tolerate a taint on {which}: {shown}{more}",
        "add tolerations for those taints, or remove them from the nodes that have its devices",
    )


__all__ = [
    "daemon_tolerations",
    "fitting_nodes",
    "NoNode",
    "no_node",
    "selector_text",
    "terms_text",
]
