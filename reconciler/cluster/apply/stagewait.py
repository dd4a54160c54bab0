"""Waiting for one applied stage: readiness per object, fail-fast signals, driver slices, the deadline."""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from reconciler.cluster.apply.changeset import WorkItem, error_text
from reconciler.cluster.client import ClusterClient
from reconciler.cluster.readiness import (
    Health,
    current_pods,
    health_of,
    idle_canary_reason,
    idle_main_driver_reason,
    node_selector,
    pod_failure,
    rollout_context,
    template_changed,
)
from reconciler.errors import DraGitopsError
from reconciler.model import dra
from reconciler.model.dra import DRA_GROUP
from reconciler.model.plan import Change
from reconciler.model.stages import DRIVERS

FailFast = Callable[[int, Sequence[Change]], str | None]

POLL_START = 0.05
POLL_MAX = 1.0
SLICE_GRACE = 60.0


def _selector(body: dict[str, Any]) -> str | None:
    """A label selector string from a workload's spec.selector (matchLabels and simple expressions)."""
    selector = (body.get("spec") or {}).get("selector")
    if not isinstance(selector, dict):
        return None
    parts = [f"{k}={v}" for k, v in sorted((selector.get("matchLabels") or {}).items())]
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In":
            parts.append(f"{key} in ({','.join(values)})")
        elif op == "NotIn":
            parts.append(f"{key} notin ({','.join(values)})")
        elif op == "Exists":
            parts.append(str(key))
        elif op == "DoesNotExist":
            parts.append(f"!{key}")
    return ",".join(parts) or None


def _expected_pods(live: dict[str, Any]) -> int | None:
    """How many current pods a settled workload runs (None: not a replicated workload we know)."""
    kind = live.get("kind")
    if kind == "DaemonSet":
        desired = (live.get("status") or {}).get("desiredNumberScheduled")
        return desired if isinstance(desired, int) else None
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        replicas = (live.get("spec") or {}).get("replicas", 1)
        return replicas if isinstance(replicas, int) else 1
    return None


class StageWaiter:
    """Polls one stage until every object is ready, a fail-fast signal appears, or the deadline passes.

    Pods are judged only when they belong to the workload's current template (`rollout.current_pods`): the
    previous template's pods, crash-looping or not, are what the rollout is replacing.
    """

    def __init__(
        self,
        client: ClusterClient,
        items: Sequence[WorkItem],
        pool: ThreadPoolExecutor,
        deadline: float,
        fail_fast: FailFast | None,
        slice_grace: float,
    ) -> None:
        self.client = client
        self.items = list(items)
        self.pool = pool
        self.deadline = deadline
        self.fail_fast = fail_fast
        self.slice_grace = slice_grace
        self.state: dict[int, Health] = {}
        self.rollout_done: dict[int, float] = {}
        self.warnings: list[str] = []
        self._lock = threading.Lock()

    def _pods(self, item: WorkItem) -> list[dict[str, Any]]:
        """The pods of the item's current template (the live object decides which template that is)."""
        if item.change.ref.kind == "Pod":
            return [item.after] if item.after else []
        selector = _selector(item.body)
        if selector is None or item.namespace is None or item.after is None:
            return []
        pods = self.client.list_kind("", "Pod", item.namespace, label_selector=selector)
        context = rollout_context(self.client, [item.after], pods)
        return current_pods(item.after, pods, context)

    def _idle_canary(self, item: WorkItem) -> str | None:
        """A canary whose template this revision changed but which runs on no node fails its stage; an
        unchanged one is a warning (it verified nothing this time either, but nothing new needed it)."""
        live = item.after
        if live is None or live.get("kind") != "DaemonSet" or dra.canary_for(item.body) is None:
            return None
        observed = (live.get("status") or {}).get("observedGeneration", -1) >= (
            (live.get("metadata") or {}).get("generation") or 0
        )
        idle = observed and (live.get("status") or {}).get("desiredNumberScheduled") == 0
        # Before its controller has observed it, the Nodes tell whether its nodeSelector can match; after,
        # with 0 pods desired, they say why none does.
        wanted = idle or (not observed and node_selector(live))
        nodes = self.client.list_kind("", "Node") if wanted else None
        reason = idle_canary_reason(live, nodes)
        if reason is None or template_changed(item.live, live):
            return reason
        self._warn(f"{item.result.ref}: {reason}")
        return None

    def _idle_main_driver(self, item: WorkItem) -> str | None:
        """A main driver DaemonSet whose controller, having observed it, desires 0 pods fails its stage at
        once when this revision created it or changed its template; unchanged, or in a cluster with no
        nodes at all (nothing in the DaemonSet to blame), it is a warning."""
        live = item.after
        if live is None or live.get("kind") != "DaemonSet" or dra.canary_for(item.body) is not None:
            return None
        if (live.get("status") or {}).get("desiredNumberScheduled") != 0:
            return None
        nodes = self.client.list_kind("", "Node")
        reason = idle_main_driver_reason(live, nodes)
        allowed = dra.allows_no_nodes(item.body) if reason is not None else None
        if allowed is not None:  # a pool autoscaled to zero: a notice, not a failure
            self._warn(f"{item.result.ref}: {reason}; passes: {allowed} (a node pool may scale to zero)")
            return None
        if reason is None or (nodes and template_changed(item.live, live)):
            return reason
        self._warn(f"{item.result.ref}: {reason}")
        return None

    def _warn(self, warning: str) -> None:
        with self._lock:
            if warning not in self.warnings:
                self.warnings.append(warning)

    def _driver_slices(self, driver: str) -> list[dict[str, Any]]:
        return [s for s in self.client.list_kind(DRA_GROUP, "ResourceSlice") if dra.slice_driver(s) == driver]

    def _check_one(self, index: int, item: WorkItem, refresh: bool) -> tuple[Health, str | None]:
        """(health, fail-fast reason) of one object; re-reads it when `refresh`."""
        assert item.resource is not None
        if refresh:
            item.after = self.client.get(
                item.resource, item.namespace if item.resource.namespaced else None, item.name
            )
        health = health_of(item.after)
        if health.failed:
            return health, f"{item.result.ref}: {health.message}"
        is_driver = item.change.stage == DRIVERS and dra.is_driver_workload(item.body)
        if dra.pod_spec_of(item.body) is None or item.change.ref.kind == "Pod" or item.after is None:
            return health, None
        idle = (self._idle_canary(item) or self._idle_main_driver(item)) if is_driver else None
        if idle is not None:
            return Health("failed", idle), f"{item.result.ref}: {idle}"
        # While the workload rolls, its current pods may already show a failure that will not fix itself;
        # once its controller calls it done, those same pods must also be Ready.
        pods = self._pods(item)
        role = "driver pod" if is_driver else "pod"
        for pod in pods:
            failure = pod_failure(pod)
            if failure is not None:
                name = (pod.get("metadata") or {}).get("name")
                return Health(
                    "failed", f"{role} {name}: {failure}"
                ), f"{item.result.ref}: {role} {name}: {failure}"
        if not health.current:
            return health, None
        expected = _expected_pods(item.after)
        ready = sum(1 for pod in pods if health_of(pod).current)
        if expected is not None and ready < expected:
            return Health("in-progress", f"{ready}/{expected} pods of the current template ready"), None
        if is_driver:
            return self._driver_slices_ready(index, item, pods)
        return health, None

    def _driver_slices_ready(
        self, index: int, item: WorkItem, pods: list[dict[str, Any]]
    ) -> tuple[Health, str | None]:
        driver = dra.workload_driver(item.body)
        if driver is None:
            message = f"{item.result.ref}: driver name unknown, ResourceSlices not checked"
            if message not in self.warnings:
                self.warnings.append(message)
            return Health("current", "rollout complete"), None
        nodes = {
            str((pod.get("spec") or {}).get("nodeName"))
            for pod in pods
            if (pod.get("spec") or {}).get("nodeName")
        }
        slices = self._driver_slices(driver) if nodes else []
        covered = {dra.slice_node(s) for s in slices}
        missing = sorted(n for n in nodes if n not in covered and None not in covered)
        if not missing:
            return Health("current", f"rollout complete, slices of {driver} on {len(nodes)} node(s)"), None
        with self._lock:
            since = self.rollout_done.setdefault(index, time.monotonic())
        message = f"waiting for ResourceSlices of {driver} on {', '.join(missing)}"
        if time.monotonic() - since > self.slice_grace:
            return (
                Health("failed", message),
                f"{item.result.ref}: no ResourceSlices from driver {driver} on {', '.join(missing)} after its rollout",
            )
        return Health("in-progress", message), None

    def run(self, stage: int, changes: Sequence[Change]) -> str | None:
        """None when the stage is ready, else the error (fail fast or timeout)."""
        pending = list(range(len(self.items)))
        refresh = False
        interval = POLL_START
        while True:
            # Each check runs in the caller's context: driver workloads are recognized as the delivery does.
            futures = {
                i: self.pool.submit(
                    contextvars.copy_context().run, self._check_one, i, self.items[i], refresh
                )
                for i in pending
            }
            reasons: list[str] = []
            for i, future in futures.items():
                try:
                    health, reason = future.result()
                except (DraGitopsError, OSError) as exc:
                    health, reason = Health("in-progress", f"cannot read: {error_text(exc)}"), None
                self.state[i] = health
                if reason:
                    reasons.append(reason)
                    self.items[i].result.error = health.message
            if reasons:
                return "fail fast: " + "; ".join(reasons)
            if self.fail_fast is not None:
                reason = self.fail_fast(stage, changes)
                if reason:
                    return f"fail fast: {reason}"
            pending = [i for i in pending if not self.state[i].current]
            if not pending:
                return None
            remaining = self.deadline - time.monotonic()
            if remaining <= 0:
                waiting = [f"{self.items[i].result.ref} ({self.state[i].message})" for i in pending]
                for i in pending:
                    self.items[i].result.error = f"not ready: {self.state[i].message}"
                shown = "; ".join(waiting[:5]) + (
                    f"; and {len(waiting) - 5} more" if len(waiting) > 5 else ""
                )
                return f"timed out waiting for {shown}"
            time.sleep(min(interval, remaining))
            interval = min(interval * 1.6, POLL_MAX)
            refresh = True
