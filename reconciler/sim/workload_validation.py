"""Selector validation of workloads, in kube-apiserver's words (pkg/apis/apps/validation, batch/validation).

apps/v1 Deployments, ReplicaSets, DaemonSets and StatefulSets, and Jobs whose ``manualSelector`` is true:

* ``spec.selector`` required (``Required value``; a DaemonSet says only that the template does not match);
  an empty one is ``empty selector is invalid for deployment`` (ReplicaSets say "deployment" too),
  ``daemonset``, ``statefulset``; bad operators and values as ``ValidateLabelSelector`` words them.
* the template's labels must match it: ``spec.template.metadata.labels: Invalid value:
  map[string]string{"app":"web"}: `selector` does not match template `labels```.
* on update the selector is immutable (``spec.selector: Invalid value: v1.LabelSelector{...}: field is
  immutable``, the registry strategies of apps/v1 and batch/v1); a StatefulSet may change only some of its
  spec (``spec: Forbidden: updates to statefulset spec for fields other than ...``, worded as 1.27+ do).

Bad values are printed as Go's ``%#v`` prints them (the internal types behind a pointer, dereferenced).
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.sim.causes import required
from reconciler.sim.storebase import Obj

MISMATCH = "`selector` does not match template `labels`"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
STATEFULSET_MUTABLE = (
    "replicas",
    "ordinals",
    "template",
    "updateStrategy",
    "persistentVolumeClaimRetentionPolicy",
    "minReadySeconds",
)
STATEFULSET_FORBIDDEN = (
    "updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', "
    "'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"
)
_EMPTY_NAME = {
    "deployments": "deployment",
    "replicasets": "deployment",
    "daemonsets": "daemonset",
    "statefulsets": "statefulset",
}


def _q(s: Any) -> str:
    return json.dumps(str(s), ensure_ascii=False)


def go_labels(labels: Any) -> str:
    """A ``map[string]string`` as ``%#v`` prints it: keys sorted, ``(nil)`` when absent."""
    if labels is None:
        return "map[string]string(nil)"
    items = sorted(labels.items()) if isinstance(labels, dict) else []
    return "map[string]string{" + ", ".join(f"{_q(k)}:{_q(v)}" for k, v in items) + "}"


def _go_strings(values: Any) -> str:
    if values is None:
        return "[]string(nil)"
    return "[]string{" + ", ".join(_q(v) for v in values) + "}"


def go_selector(selector: dict[str, Any]) -> str:
    """A ``metav1.LabelSelector`` as ``%#v`` prints it."""
    exprs = selector.get("matchExpressions")
    if exprs is None:
        printed = "[]v1.LabelSelectorRequirement(nil)"
    else:
        printed = (
            "[]v1.LabelSelectorRequirement{"
            + ", ".join(
                f"v1.LabelSelectorRequirement{{Key:{_q(e.get('key', ''))}, Operator:{_q(e.get('operator', ''))}, "
                f"Values:{_go_strings(e.get('values'))}}}"
                for e in exprs
                if isinstance(e, dict)
            )
            + "}"
        )
    return f"v1.LabelSelector{{MatchLabels:{go_labels(selector.get('matchLabels'))}, MatchExpressions:{printed}}}"


def _invalid(field: str, printed: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueInvalid", "message": f"Invalid value: {printed}: {detail}", "field": field}


def _check_requirements(selector: dict[str, Any]) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    for i, e in enumerate(selector.get("matchExpressions") or []):
        path = f"spec.selector.matchExpressions[{i}]"
        op, values = (e or {}).get("operator"), (e or {}).get("values")
        if op in ("In", "NotIn") and not values:
            causes.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist") and values:
            causes.append(
                {
                    "reason": "FieldValueForbidden",
                    "message": "Forbidden: may not be specified when `operator` is 'Exists' or 'DoesNotExist'",
                    "field": f"{path}.values",
                }
            )
        elif op not in OPERATORS:
            causes.append(_invalid(f"{path}.operator", _q(op), "not a valid selector operator"))
    return causes


def _matches(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        present = key in labels
        if (
            (op == "In" and (not present or labels[key] not in values))
            or (op == "NotIn" and present and labels[key] in values)
            or (op == "Exists" and not present)
            or (op == "DoesNotExist" and present)
        ):
            return False
    return True


def check_selector(plural: str, spec: Any) -> list[dict[str, str]]:
    """The causes for a workload's ``spec.selector`` and its template's labels (ValidateXSpec)."""
    if not isinstance(spec, dict):
        return []
    selector = spec.get("selector")
    template = spec.get("template")
    meta = template.get("metadata") if isinstance(template, dict) else None
    labels = meta.get("labels") if isinstance(meta, dict) else None
    causes: list[dict[str, str]] = []
    empty = not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    )
    if selector is None:
        if plural != "daemonsets":
            causes.append(required("spec.selector"))
    elif isinstance(selector, dict):
        causes.extend(_check_requirements(selector))
        if empty and plural in _EMPTY_NAME:
            detail = f"empty selector is invalid for {_EMPTY_NAME[plural]}"
            causes.append(_invalid("spec.selector", go_selector(selector), detail))
    if any(c["field"].endswith(".operator") for c in causes):
        # LabelSelectorAsSelector fails: Deployments and ReplicaSets say so, StatefulSets without a detail
        printed = go_selector(selector if isinstance(selector, dict) else {})
        if plural in ("deployments", "replicasets"):
            causes.append(_invalid("spec.selector", printed, "invalid label selector"))
        elif plural == "statefulsets":
            causes.append(
                {
                    "reason": "FieldValueInvalid",
                    "message": f"Invalid value: {printed}",
                    "field": "spec.selector",
                }
            )
        return causes
    # a missing selector selects nothing, so no template matches it; an empty one selects everything
    if selector is None or (
        isinstance(selector, dict) and not _matches(selector, labels if isinstance(labels, dict) else {})
    ):
        causes.append(_invalid("spec.template.metadata.labels", go_labels(labels), MISMATCH))
    return causes


def _normal(selector: Any) -> Any:
    """Semantic equality of selectors: nil and empty maps and lists are the same."""
    if not isinstance(selector, dict):
        return None
    return {k: v for k, v in selector.items() if v}


def check_update(plural: str, spec: Any, old_spec: Any) -> list[dict[str, str]]:
    """The causes of an update that changes what the workload's kind keeps immutable."""
    if not isinstance(spec, dict) or not isinstance(old_spec, dict):
        return []
    if plural == "statefulsets":
        rest = {k: v for k, v in spec.items() if k not in STATEFULSET_MUTABLE and v not in (None, {}, [])}
        old_rest = {
            k: v for k, v in old_spec.items() if k not in STATEFULSET_MUTABLE and v not in (None, {}, [])
        }
        if _normal(rest.pop("selector", None)) != _normal(old_rest.pop("selector", None)) or rest != old_rest:
            return [
                {
                    "reason": "FieldValueForbidden",
                    "message": f"Forbidden: {STATEFULSET_FORBIDDEN}",
                    "field": "spec",
                }
            ]
        return []
    if _normal(spec.get("selector")) == _normal(old_spec.get("selector")):
        return []
    selector = spec.get("selector")
    printed = go_selector(selector) if isinstance(selector, dict) else "null"
    return [_invalid("spec.selector", printed, "field is immutable")]


def validates_selector(plural: str, obj: Obj) -> bool:
    """apps/v1 workloads always; a Job only when it chose its selector (``manualSelector: true``)."""
    if plural in ("deployments", "replicasets", "daemonsets", "statefulsets"):
        return True
    return plural == "jobs" and (obj.get("spec") or {}).get("manualSelector") is True
