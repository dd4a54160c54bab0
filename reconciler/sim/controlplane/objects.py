"""What the simulated controllers read and write on objects: metadata, owners, conditions, label selectors."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

RESOURCE = "resource.k8s.io"
CLAIM_FINALIZER = "resource.kubernetes.io/delete-protection"
POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"
SCHEDULER_NAME = "default-scheduler"
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def now_micro() -> str:
    """A MicroTime, as ``series.lastObservedTime`` carries it."""
    t = time.time()
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t)) + f".{int(t % 1 * 1_000_000):06d}Z"


def template_hash(template: Any) -> str:
    """A stable pod-template hash spelled with the alphabet Kubernetes uses (like pod-template-hash)."""
    digest = hashlib.sha256(json.dumps(template, sort_keys=True, default=str).encode()).digest()
    n = int.from_bytes(digest[:8], "big")
    out = []
    for _ in range(10):
        n, r = divmod(n, len(_ALPHABET))
        out.append(_ALPHABET[r])
    return "".join(out)


def md(obj: Mapping[str, Any]) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def ref_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    m = md(obj)
    return (str(m.get("namespace", "")), str(m.get("name", "")))


def controller_of(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    for r in md(obj).get("ownerReferences") or []:
        if isinstance(r, dict) and r.get("controller"):
            return r
    return None


def owner_ref(owner: Mapping[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    m = md(owner)
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": m.get("name"),
        "uid": m.get("uid"),
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_terminating(obj: Mapping[str, Any]) -> bool:
    return bool(md(obj).get("deletionTimestamp"))


def pod_phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def pod_done(pod: Mapping[str, Any]) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def condition(obj: Mapping[str, Any], ctype: str) -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(c, dict) and c.get("type") == ctype:
            return c
    return None


def pod_ready(pod: Mapping[str, Any]) -> bool:
    c = condition(pod, "Ready")
    return pod_phase(pod) == "Running" and c is not None and c.get("status") == "True"


def node_ready(node: Mapping[str, Any]) -> bool:
    c = condition(node, "Ready")
    return c is not None and c.get("status") == "True"


def set_condition(
    status: dict[str, Any], ctype: str, value: str, reason: str = "", message: str = ""
) -> bool:
    """Set a condition, keeping lastTransitionTime when the status does not change. True if changed."""
    conds = status.setdefault("conditions", [])
    for c in conds:
        if c.get("type") == ctype:
            if c.get("status") == value and c.get("reason", "") == reason and c.get("message", "") == message:
                return False
            if c.get("status") != value:
                c["lastTransitionTime"] = now()
            c["status"] = value
            _set_or_drop(c, "reason", reason)
            _set_or_drop(c, "message", message)
            return True
    c = {"type": ctype, "status": value, "lastProbeTime": None, "lastTransitionTime": now()}
    _set_or_drop(c, "reason", reason)
    _set_or_drop(c, "message", message)
    conds.append(c)
    return True


def _set_or_drop(d: dict[str, Any], key: str, value: str) -> None:
    if value:
        d[key] = value
    else:
        d.pop(key, None)


def labels_match(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """A metav1.LabelSelector (matchLabels + matchExpressions) against labels; empty selects all."""
    if not selector:
        return True
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True
