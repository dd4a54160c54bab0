"""The simulated cluster's store on disk (``sim serve --data-dir DIR``), so that it survives a restart.

A real API server keeps every object in etcd: a restarted kube-apiserver serves the same objects with
their uids, creationTimestamps, managedFields and resourceVersions, and the next resourceVersion is
greater than any before. Its watch cache starts empty, so a watch from an older resourceVersion gets
410 Gone ``too old resource version``; the sim keeps no watch history across a restart either.

``DIR`` holds:

* ``store.snapshot``: JSON lines, a header ``{"format": "dra-gitops-sim-store", "version": 1, "rv": N}``
  and one ``{"g": group, "r": plural, "ns": namespace, "n": name, "o": object}`` per object, as of rv N.
  Written to a temporary file, fsynced and renamed over the old one: it is whole or absent.
* ``journal.jsonl``: JSON lines after that snapshot, a header ``{"format": "dra-gitops-sim-journal", ...}``
  and one record per committed change: ``{"rv", "g", "r", "ns", "n", "o"}`` (``"o": null`` removes it).
  Each record is written with one ``write(2)`` before the write it records is answered, so a killed
  process loses no answered write. fsync policy: the journal is fsynced at most once a second (on the
  first commit after the last fsync), on every compaction and when the store is closed; a power loss can
  lose the writes of the last second, a killed process none. A torn last line (killed mid-write, never
  answered) is dropped on load.
* ``LOCK``: held (``flock``) while a sim serves the directory; a second one is refused.

Compaction replaces both files with a fresh snapshot once the journal outgrows ``COMPACT_MIN_BYTES`` and
twice the snapshot; it runs under the store lock at the end of a write, and at every start.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from reconciler.errors import EnvironmentProblem

SNAPSHOT = "store.snapshot"
JOURNAL = "journal.jsonl"
LOCK = "LOCK"
SNAPSHOT_FORMAT = "dra-gitops-sim-store"
JOURNAL_FORMAT = "dra-gitops-sim-journal"
VERSION = 1
COMPACT_MIN_BYTES = 16 * 1024 * 1024
FSYNC_INTERVAL = 1.0

Record = tuple[str, str, str, str, dict[str, Any]]  # group, plural, namespace, name, object


class DataDirError(EnvironmentProblem):
    """The data directory cannot be used (corrupt, foreign, in use); the message starts with the path."""


@dataclass
class Restored:
    """What a data directory held: the newest resourceVersion and every object."""

    rv: int = 0
    objects: dict[tuple[str, str, str, str], dict[str, Any]] = field(default_factory=dict)

    def records(self) -> list[Record]:
        return [(*k, o) for k, o in self.objects.items()]


def _line(fields: dict[str, Any], encoded: bytes | None) -> bytes:
    head = orjson.dumps(fields)[:-1]  # the object's bytes are spliced in, not encoded again
    return head + b',"o":' + (encoded if encoded is not None else b"null") + b"}\n"


class Journal:
    """The data directory of one store: load it once, then append every change and compact now and then."""

    def __init__(self, data_dir: Path) -> None:
        self.dir = data_dir
        try:
            data_dir.mkdir(parents=True, exist_ok=True)
            self._lock_fd = os.open(data_dir / LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise DataDirError(f"{data_dir}: cannot use it as the sim's data directory: {e}") from e
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(self._lock_fd)
            raise DataDirError(
                f"{data_dir / LOCK}: the data directory is in use by another simulated cluster"
            ) from exc
        self._fd: int | None = None
        self._journal_bytes = 0
        self._snapshot_bytes = 0
        self._last_sync = 0.0

    # ------------------------------------------------------------------ load

    def load(self) -> Restored:
        """Everything the directory holds (empty for a new one); DataDirError naming the bad file."""
        self._refuse_foreign()
        out = Restored()
        snap = self.dir / SNAPSHOT
        if snap.exists():
            out.rv = self._read(snap, SNAPSHOT_FORMAT, out, snapshot=True)
        journal = self.dir / JOURNAL
        if journal.exists():
            out.rv = max(out.rv, self._read(journal, JOURNAL_FORMAT, out, snapshot=False, since=out.rv))
        return out

    def _refuse_foreign(self) -> None:
        names = sorted(p.name for p in self.dir.iterdir() if p.name != LOCK and not p.name.endswith(".tmp"))
        if names and SNAPSHOT not in names and JOURNAL not in names:
            shown = ", ".join(names[:5]) + (", ..." if len(names) > 5 else "")
            raise DataDirError(
                f"{self.dir}: not a data directory of the simulated cluster (it holds {shown}, and no "
                f"{SNAPSHOT} or {JOURNAL}); give an empty or new directory"
            )

    def _read(self, path: Path, fmt: str, out: Restored, *, snapshot: bool, since: int = 0) -> int:
        rv = since
        try:
            raw = path.read_bytes()
        except OSError as e:
            raise DataDirError(f"{path}: cannot read it: {e}") from e
        lines = raw.split(b"\n")
        torn = lines.pop()  # b"" when the file ends with a newline
        if torn and snapshot:
            raise DataDirError(f"{path}: line {len(lines) + 1}: truncated (the snapshot is incomplete)")
        if torn:  # a journal record cut off by a kill: it was never answered
            with open(path, "r+b") as f:
                f.truncate(len(raw) - len(torn))
        for n, line in enumerate(lines, 1):
            rec = self._parse(path, n, line)
            if n == 1:
                rv = self._header(path, rec, fmt, rv, snapshot)
                continue
            key = self._key(path, n, rec)
            if snapshot:
                out.objects[key] = rec["o"]
                continue
            entry_rv = rec.get("rv")
            if not isinstance(entry_rv, int) or entry_rv <= 0:
                raise DataDirError(f"{path}: line {n}: corrupt: no resourceVersion")
            if entry_rv <= since:
                continue  # already in the snapshot (a compaction was cut short)
            if entry_rv <= rv:
                raise DataDirError(f"{path}: line {n}: corrupt: resourceVersion {entry_rv} after {rv}")
            rv = entry_rv
            if rec["o"] is None:
                out.objects.pop(key, None)
            else:
                out.objects[key] = rec["o"]
        if not lines:
            raise DataDirError(f"{path}: empty (no header line)")
        return rv

    @staticmethod
    def _parse(path: Path, n: int, line: bytes) -> dict[str, Any]:
        try:
            rec = orjson.loads(line)
        except orjson.JSONDecodeError as e:
            raise DataDirError(f"{path}: line {n}: corrupt: {e}") from e
        if not isinstance(rec, dict):
            raise DataDirError(f"{path}: line {n}: corrupt: not a JSON object")
        return rec

    @staticmethod
    def _header(path: Path, rec: dict[str, Any], fmt: str, rv: int, snapshot: bool) -> int:
        if rec.get("format") != fmt:
            raise DataDirError(f"{path}: line 1: not a {fmt} file (format {rec.get('format')!r})")
        if rec.get("version") != VERSION:
            raise DataDirError(
                f"{path}: line 1: format version {rec.get('version')!r}; this sim reads version {VERSION}"
            )
        header_rv = rec.get("rv")
        if not isinstance(header_rv, int) or header_rv < 0:
            raise DataDirError(f"{path}: line 1: corrupt: no resourceVersion")
        if not snapshot and header_rv > rv:
            raise DataDirError(
                f"{path}: line 1: the journal follows a snapshot at resourceVersion {header_rv}, but "
                f"{SNAPSHOT} is {'at ' + str(rv) if rv else 'missing'}"
            )
        return header_rv if snapshot else rv

    @staticmethod
    def _key(path: Path, n: int, rec: dict[str, Any]) -> tuple[str, str, str, str]:
        parts = (rec.get("g"), rec.get("r"), rec.get("ns"), rec.get("n"))
        obj = rec.get("o", False)
        if not all(isinstance(p, str) for p in parts) or not (obj is None or isinstance(obj, dict)):
            raise DataDirError(f"{path}: line {n}: corrupt: not a stored object")
        return parts  # type: ignore[return-value]

    # ------------------------------------------------------------------ write

    def append(self, rv: int, group: str, plural: str, key: tuple[str, str], encoded: bytes | None) -> None:
        """Record one change (``encoded`` the object's JSON, None for a removal) before it is made."""
        if self._fd is None:
            raise DataDirError(f"{self.dir / JOURNAL}: the journal is not open (the store was closed)")
        data = _line({"rv": rv, "g": group, "r": plural, "ns": key[0], "n": key[1]}, encoded)
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._journal_bytes += len(data)
        now = time.monotonic()
        if now - self._last_sync >= FSYNC_INTERVAL:
            os.fsync(self._fd)
            self._last_sync = now

    def compaction_due(self) -> bool:
        return self._journal_bytes > max(COMPACT_MIN_BYTES, 2 * self._snapshot_bytes)

    def compact(self, rv: int, records: Iterable[tuple[str, str, str, str, bytes]]) -> None:
        """Write a snapshot of every object at ``rv`` and start an empty journal after it."""
        header = {"format": SNAPSHOT_FORMAT, "version": VERSION, "rv": rv}
        lines = (_line({"g": g, "r": r, "ns": ns, "n": n}, o) for g, r, ns, n, o in records)
        self._snapshot_bytes = self._write_atomically(SNAPSHOT, [orjson.dumps(header) + b"\n"], lines)
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        jheader = {"format": JOURNAL_FORMAT, "version": VERSION, "rv": rv}
        self._journal_bytes = self._write_atomically(JOURNAL, [orjson.dumps(jheader) + b"\n"], iter(()))
        self._fd = os.open(self.dir / JOURNAL, os.O_WRONLY | os.O_APPEND)
        self._last_sync = time.monotonic()

    def _write_atomically(self, name: str, head: list[bytes], lines: Iterator[bytes]) -> int:
        tmp = self.dir / (name + ".tmp")
        size = 0
        with open(tmp, "wb") as f:
            for chunk in (*head, *lines):
                f.write(chunk)
                size += len(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.dir / name)
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return size

    def close(self) -> None:
        """fsync and close the journal and give up the directory's lock."""
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.fsync(self._fd)
            os.close(self._fd)
            self._fd = None
        if self._lock_fd >= 0:
            os.close(self._lock_fd)
            self._lock_fd = -1
