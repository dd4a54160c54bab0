"""Shared plumbing of the simulated control-plane components: a background loop woken by store events."""

from __future__ import annotations

import json
import logging
import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

from reconciler.sim.controlplane.objects import md, now, now_micro
from reconciler.sim.storebase import Edit, Obj

log = logging.getLogger("reconciler.sim.controlplane")

EVENT_CACHE_SIZE = 4096  # client-go's maxLruCacheEntries


class Component:
    """A background loop: ``reconcile()`` runs when a watched kind changes and every ``interval`` s."""

    name = "component"
    watches: frozenset[tuple[str, str]] = frozenset()  # (group, plural); empty: every change
    interval = 0.2

    def __init__(self) -> None:
        self.store: Any = None
        self._stop = threading.Event()
        self._outer_stop: threading.Event | None = None
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self.passes = 0
        self.errors = 0
        # event key -> name of the Event recording it (client-go's EventCorrelator cache)
        self._recorded_events: dict[str, str] = {}
        self._events_lock = threading.Lock()

    def start(self, store: Any, stop_event: threading.Event | None = None) -> None:
        if self._thread is not None:
            return
        self.store = store
        self._outer_stop = stop_event
        self._stop.clear()
        raw = getattr(store, "subscribe_raw", None)
        if callable(raw):  # no per-event copy of the object: we only look at its type
            self._unsubscribe = raw(lambda change: self._on_change(change[1], change[2], change[3]))
        else:
            self._unsubscribe = store.subscribe(self._on_change)
        self._thread = threading.Thread(target=self._run, name=f"sim-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(timeout=5)
        self._thread = None

    def kick(self) -> None:
        self._wake.set()

    def _on_change(self, event: str, rtype: Any, obj: dict) -> None:
        if (
            not self.watches
            or (getattr(rtype, "group", None), getattr(rtype, "plural", None)) in self.watches
        ):
            self._wake.set()

    def _stopping(self) -> bool:
        return self._stop.is_set() or (self._outer_stop is not None and self._outer_stop.is_set())

    def _run(self) -> None:
        while not self._stopping():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stopping():
                break
            try:
                self.reconcile()
                self.passes += 1
            except Exception:  # noqa: BLE001 - a controller must survive one bad pass
                self.errors += 1
                log.exception("%s: reconcile pass failed", self.name)

    def reconcile(self) -> None:  # pragma: no cover - overridden
        raise NotImplementedError

    # ------------------------------------------------------------------ store helpers

    def try_create(self, group: str, plural: str, obj: Obj) -> Obj | None:
        try:
            return dict(self.store.create(group, plural, obj))
        except Exception as exc:  # noqa: BLE001 - AlreadyExists, namespace terminating, ...
            log.debug("%s: create %s failed: %s", self.name, plural, exc)
            return None

    def try_delete(self, group: str, plural: str, namespace: str, name: str) -> None:
        try:
            self.store.delete(group, plural, namespace, name)
        except Exception as exc:  # noqa: BLE001
            log.debug("%s: delete %s/%s failed: %s", self.name, plural, name, exc)

    def try_mutate(
        self, group: str, plural: str, namespace: str, name: str, fn: Edit, *, status: bool = False
    ) -> Obj | None:
        try:
            out = self.store.mutate(group, plural, namespace, name, fn, status=status)
        except Exception as exc:  # noqa: BLE001
            log.debug("%s: mutate %s/%s failed: %s", self.name, plural, name, exc)
            return None
        return dict(out) if out is not None else None

    def emit_event(
        self,
        involved: Mapping[str, Any],
        reason: str,
        message: str,
        *,
        type_: str = "Warning",
        component: str = "",
        host: str = "",
        action: str = "",
        api_version: str = "v1",
        kind: str = "Pod",
    ) -> None:
        """Record an Event as client-go's recorder does: a repeat of the same event (same object, reason,
        message, type and source) bumps ``count``/``series`` and ``lastTimestamp`` of the one Event."""
        m = md(involved)
        source: dict[str, Any] = {"component": component}
        if host:
            source["host"] = host
        involved_ref = {
            "apiVersion": api_version,
            "kind": kind,
            "name": m.get("name"),
            "namespace": m.get("namespace"),
            "uid": m.get("uid"),
        }
        key = json.dumps([involved_ref, reason, message, type_, source], sort_keys=True)
        namespace = m.get("namespace") or "default"
        with self._events_lock:
            known = self._recorded_events.get(key)
            if known is not None and self.try_mutate("", "events", namespace, known, _observed_again):
                self._recorded_events[key] = self._recorded_events.pop(key)  # most recently used last
                return
            ts = now()
            event = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{m.get('name')}.{secrets.token_hex(8)}", "namespace": namespace},
                "involvedObject": dict(involved_ref, resourceVersion=m.get("resourceVersion")),
                "reason": reason,
                "message": message,
                "type": type_,
                "source": source,
                "reportingComponent": component,
                "reportingInstance": f"{component}-sim" if component else "",
                "firstTimestamp": ts,
                "lastTimestamp": ts,
                "count": 1,
            }
            if action:
                event["action"] = action
            created = self.try_create("", "events", event)
            if created is not None:
                if len(self._recorded_events) >= EVENT_CACHE_SIZE:  # the recorder's cache is an LRU
                    self._recorded_events.pop(next(iter(self._recorded_events)))
                self._recorded_events[key] = md(created)["name"]


def _observed_again(event: Obj) -> None:
    count = int(event.get("count") or 1) + 1
    event["count"] = count
    event["lastTimestamp"] = now()
    event["series"] = {"count": count, "lastObservedTime": now_micro()}
