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
from dataclasses import dataclass

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
from reconciler.sim.selectors import Matcher, SelectorError, compile_selectors
from reconciler.sim.storebase import Change, Obj, StoreError


@dataclass(frozen=True)
class WatchAsk:
    """A watch's parameters, validated as kube-apiserver does."""

    label: str | None
    fieldsel: str | None
    match: Matcher | None
    timeout: float
    rv: str
    send_initial: str | None

    @property
    def watch_list(self) -> bool:
        return self.send_initial == "true"


class Watch(ApiBase):
    def _watch_ask(self, req: Request, served: Served) -> WatchAsk:
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
        return WatchAsk(label, fieldsel, match, timeout, rv_param, send_initial)

    def watch(self, req: Request, served: Served, route: Route) -> Response:
        ask = self._watch_ask(req, served)
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
            if ask.match is not None and not ask.match(change[3]):
                return
            q.put(change)

        initial: list[Obj] = []
        since: int | None
        with self.store.transaction():
            if ask.watch_list or (ask.send_initial is None and ask.rv in ("", "0")):
                initial, list_rv = self.store.list_ref(t.group, t.plural, ns or None, ask.label, ask.fieldsel)
                since = int(list_rv)
            elif ask.rv in ("", "0"):  # sendInitialEvents=false: from now, nothing before
                _, list_rv = self.store.list_ref(t.group, t.plural, ns or None, ask.label, ask.fieldsel)
                since = int(list_rv)
            else:
                since = int(ask.rv)
            try:
                unsubscribe = self.store.watch_from(on_change, since)
            except StoreError as e:
                gone = status_body(410, e.message, "Expired")

                def send_gone(write: Callable[[bytes], None]) -> None:
                    write(json_bytes({"type": "ERROR", "object": gone}) + b"\n")

                return Response(200, stream=send_gone)
        return Response(200, stream=self._streamer(served, ask, initial, since, q, unsubscribe))

    def _streamer(
        self,
        served: Served,
        ask: WatchAsk,
        initial: list[Obj],
        since: int | None,
        q: queue.Queue[Change | None],
        unsubscribe: Callable[[], None],
    ) -> Callable[[Callable[[bytes], None]], None]:
        """The events of a watch: the initial list (and its bookmark), then the changes until the timeout."""

        def stream(write: Callable[[bytes], None]) -> None:
            deadline = time.monotonic() + ask.timeout
            last = since or 0
            try:
                for o in initial:
                    write(json_bytes({"type": "ADDED", "object": self.render(served, o)}) + b"\n")
                if ask.watch_list:
                    end = {
                        "apiVersion": served.api_version,
                        "kind": served.kind or served.rtype.kind,
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

        return stream


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
