"""Watch in the simulated kube-apiserver: an initial list when asked, then the store's changes."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

from reconciler.sim.apibase import (
    WATCH_DEFAULT_TIMEOUT,
    ApiBase,
    ApiError,
    Request,
    Response,
    Route,
    json_bytes,
    status_body,
)
from reconciler.sim.resources import Served
from reconciler.sim.selectors import SelectorError, compile_selectors
from reconciler.sim.storebase import Change, Obj, StoreError


class Watch(ApiBase):
    def watch(self, req: Request, served: Served, route: Route) -> Response:
        label, fieldsel = self._selectors(req, served)
        try:
            match = compile_selectors(label, fieldsel)
        except SelectorError as e:
            raise ApiError(400, str(e)) from e
        try:
            timeout = float(req.query.get("timeoutSeconds") or WATCH_DEFAULT_TIMEOUT)
        except ValueError as exc:
            raise ApiError(400, "invalid timeoutSeconds") from exc
        rv_param = req.query.get("resourceVersion") or ""
        if rv_param and not rv_param.isdigit():
            raise ApiError(400, f'resourceVersion: Invalid value: "{rv_param}": must be a number')
        t = served.rtype
        ns = route.namespace
        q: queue.Queue[Change | None] = queue.Queue()

        def on_change(change: Change) -> None:
            ctype = change[2]
            if ctype.group != t.group or ctype.plural != t.plural:
                return
            md = change[3]["metadata"]
            if ns and md.get("namespace") != ns:
                return
            if match is not None and not match(change[3]):
                return
            q.put(change)

        initial: list[Obj] = []
        since: int | None
        with self.store.transaction():
            if rv_param in ("", "0"):
                initial, list_rv = self.store.list_ref(t.group, t.plural, ns or None, label, fieldsel)
                since = int(list_rv)
            else:
                since = int(rv_param)
            try:
                unsubscribe = self.store.watch_from(on_change, since)
            except StoreError as e:
                gone = status_body(410, e.message, "Expired")

                def send_gone(write: Callable[[bytes], None]) -> None:
                    write(json_bytes({"type": "ERROR", "object": gone}) + b"\n")

                return Response(200, stream=send_gone)

        def stream(write: Callable[[bytes], None]) -> None:
            deadline = time.monotonic() + timeout
            last = since or 0
            try:
                for o in initial:
                    write(json_bytes({"type": "ADDED", "object": self.render(served, o)}) + b"\n")
                while not self.stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    try:
                        change = q.get(timeout=min(remaining, 0.25))
                    except queue.Empty:
                        continue
                    if change is None or change[0] <= last:
                        continue
                    last = change[0]
                    write(json_bytes({"type": change[1], "object": self.render(served, change[3])}) + b"\n")
            finally:
                unsubscribe()

        return Response(200, stream=stream)
