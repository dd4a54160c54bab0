"""Graceful pod deletion as a real apiserver does it (the pod strategy's ``CheckGracefulDelete``).

A pod bound to a node and not finished is not removed by a DELETE: it gets a ``deletionTimestamp`` its
grace period ahead and ``deletionGracePeriodSeconds``; its kubelet stops the containers and deletes it
again with a grace period of 0, which removes it. Unbound or finished pods, and grace 0, go at once.
"""

from __future__ import annotations

import time
from typing import Any

DEFAULT_GRACE_PERIOD = 30  # what the apiserver defaults terminationGracePeriodSeconds to

Obj = dict[str, Any]


def grace_period(group: str, plural: str, obj: Obj, requested: int | None) -> int:
    """Seconds the deletion of ``obj`` waits: the request's, else ``terminationGracePeriodSeconds``,
    else 30; 0 for anything but a pod bound to a node and still running."""
    if group != "" or plural != "pods":
        return 0
    spec = obj.get("spec") or {}
    if not spec.get("nodeName") or (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
        return 0
    if requested is None:
        requested = spec.get("terminationGracePeriodSeconds")
    return max(int(requested), 0) if isinstance(requested, int) else DEFAULT_GRACE_PERIOD


def mark_terminating(old: Obj, grace: int, *, has_generation: bool) -> Obj | None:
    """``old`` with its deletion scheduled in ``grace`` seconds; None when it is already terminating no
    later than that (a longer grace period never extends a deletion)."""
    md = old["metadata"]
    current = md.get("deletionGracePeriodSeconds")
    if md.get("deletionTimestamp") and isinstance(current, int) and grace >= current:
        return None
    new = dict(old)
    new["metadata"] = nmd = dict(md)
    nmd["deletionTimestamp"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + grace))
    nmd["deletionGracePeriodSeconds"] = grace
    if has_generation:
        nmd["generation"] = md.get("generation", 0) + 1
    return new
