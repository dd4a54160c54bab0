"""Watch in the simulated kube-apiserver: an initial list when asked, then the store's changes.

A watch list (`sendInitialEvents=true`, what client-go's reflectors and kubectl 1.37 send) gets the current
objects as ADDED events, then a BOOKMARK annotated `k8s.io/initial-events-end: "true"` at the list's
resourceVersion, then the changes; its parameters are validated as kube-apiserver does (it needs
`resourceVersionMatch=NotOlderThan` and `allowWatchBookmarks=true`).
"""

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
        send_initial = req.query.get("sendInitialEvents")
        invalid = _watch_options_errors(
            send_initial, req.query.get("resourceVersionMatch") or "", req.query.get("allowWatchBookmarks")
        )
        if invalid:
            listed = invalid[0] if len(invalid) == 1 else f"[{', '.join(invalid)}]"
            raise ApiError(422, f'ListOptions.meta.k8s.io "" is invalid: {listed}', reason="Invalid")
        watch_list = send_initial == "true"
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
            if watch_list or (send_initial is None and rv_param in ("", "0")):
                initial, list_rv = self.store.list_ref(t.group, t.plural, ns or None, label, fieldsel)
                since = int(list_rv)
            elif rv_param in ("", "0"):  # sendInitialEvents=false: from now, nothing before
                _, list_rv = self.store.list_ref(t.group, t.plural, ns or None, label, fieldsel)
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
                if watch_list:
                    end = {
                        "apiVersion": served.api_version,
                        "kind": served.kind or t.kind,
                        "metadata": {
                            "resourceVersion": str(since),
                            "annotations": {INITIAL_EVENTS_END: "true"},
                        },
                    }
                    write(json_bytes({"type": "BOOKMARK", "object": end}) + b"\n")
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


INITIAL_EVENTS_END = "k8s.io/initial-events-end"


def _watch_options_errors(send_initial: str | None, match: str, bookmarks: str | None) -> list[str]:
    """kube-apiserver's validation of a watch's list options (apimachinery's validateWatchOptions)."""
    errors: list[str] = []
    if send_initial is not None and match != "NotOlderThan":
        errors.append(
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        )
    if match:
        if send_initial is None:
            errors.append(
                "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided"
            )
        if match != "NotOlderThan":
            errors.append(
                f'resourceVersionMatch: Unsupported value: "{match}": supported values: "NotOlderThan"'
            )
        if bookmarks not in ("true", "1"):
            errors.append(
                "allowWatchBookmarks: Forbidden: allowWatchBookmarks required when resourceVersionMatch is set"
            )
    return errors
