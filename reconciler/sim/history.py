"""The store's watch history and change fan-out: resourceVersions, subscribers, delivery after commit.

:class:`History` is the base of :class:`reconciler.sim.store.Store`. It owns the store lock and the
write nesting (:meth:`History._locked`), so that subscribers are called in commit order, outside the
lock, only after the outermost write of a thread has finished.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from reconciler.sim.storebase import Change, Gone, Obj, ResourceType, clone


class History:
    """Watch history and subscribers of the store (see the module docstring)."""

    HISTORY = 100_000  # watch events kept for resuming from an older resourceVersion

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._notify_lock = threading.RLock()
        self._local = threading.local()
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=self.HISTORY)
        self._pending: deque[Change] = deque()
        self._subscribers: dict[int, Callable[[Change], None]] = {}
        self._next_sub = 0

    def subscribe(self, callback: Callable[[str, ResourceType, dict], None]) -> Callable[[], None]:
        """Call ``callback(event, type, obj_copy)`` after every committed change, outside the lock.

        Callbacks run on the writing thread, in commit order; they should be quick (hand work to a
        queue) but may write to the store themselves.
        """

        def raw(change: Change) -> None:
            callback(change[1], change[2], clone(change[3]))

        return self.subscribe_raw(raw)

    def subscribe_raw(self, callback: Callable[[Change], None]) -> Callable[[], None]:
        """Like :meth:`subscribe` but passes the stored object itself (do not mutate it)."""
        with self._lock:
            sub_id = self._next_sub
            self._next_sub += 1
            self._subscribers[sub_id] = callback

        def unsubscribe() -> None:
            with self._lock:
                self._subscribers.pop(sub_id, None)

        return unsubscribe

    def watch_from(self, callback: Callable[[Change], None], since: int | None) -> Callable[[], None]:
        """Subscribe and atomically replay the history after ``since`` (410 Gone if already dropped).

        The replay and live deliveries may overlap; consumers skip changes whose rv they have seen.
        """
        with self._lock:
            if since is not None and since < self._rv:
                oldest = self._history[0][0] if self._history else self._rv + 1
                if since + 1 < oldest:
                    raise Gone(f"too old resource version: {since} ({oldest - 1})")
                for change in self._history:
                    if change[0] > since:
                        callback(change)
            return self.subscribe_raw(callback)

    # ------------------------------------------------------------------ internal writes

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store lock, tracking nesting so notifications are sent only after the outermost write."""
        with self._lock:
            depth = getattr(self._local, "depth", 0)
            self._local.depth = depth + 1
            try:
                yield
            finally:
                self._local.depth = depth
            if depth == 0:
                self._after_write()

    def _after_write(self) -> None:
        """Called under the lock once the outermost write of a thread has finished (compaction)."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the lock across several internal calls; notifications go out when it ends."""
        with self._locked():
            yield
        self._drain()

    def _record(self, rtype: ResourceType, obj: Obj, event: str) -> None:
        change: Change = (self._rv, event, rtype, obj)
        self._history.append(change)
        if self._subscribers:
            self._pending.append(change)

    def _drain(self) -> None:
        """Deliver pending changes in commit order, unless this thread is inside a write or a delivery."""
        if getattr(self._local, "depth", 0) or getattr(self._local, "draining", False):
            return
        self._local.draining = True
        try:
            with self._notify_lock:
                while True:
                    with self._lock:
                        if not self._pending:
                            return
                        change = self._pending.popleft()
                        subs = list(self._subscribers.values())
                    for cb in subs:
                        try:
                            cb(change)
                        except Exception:  # noqa: BLE001 - one broken subscriber must not stop the others
                            import logging

                            logging.getLogger("reconciler.sim.store").exception("store subscriber failed")
        finally:
            self._local.draining = False
