"""Leader election per target with coordination.k8s.io/v1 Leases, the way client-go's leaderelection does.

Kubernetes is the distributed engine: every write carries the resourceVersion it read, so of two replicas
racing for a Lease one gets a Conflict and simply loses the round. Expiry follows client-go: a Lease held
by someone else is free once *we* have seen it unchanged for its leaseDurationSeconds (our own monotonic
clock, so clock skew between nodes cannot hand it over early); a released Lease (empty holder) is free at
once. A holder stops believing it holds the Lease when it has not renewed for `renew_deadline`, which is
shorter than the duration, so two replicas never both work on one target.

A webhook reaches any replica (the Service picks one). One that does not hold the target's Lease asks the
holder for a pass by stamping the Lease's `dra-gitops.io/reconcile-requested` annotation (as Flux's
`reconcile.fluxcd.io/requestedAt` does): the holder reads its Lease every retry period and starts a pass
when the stamp moves. Only metadata is written, never the election fields, and the holder's renewal
retries once on the Conflict such a write causes, so a request never costs it the Lease.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from reconciler.cluster.client import ClusterClient, Conflict, Forbidden, NotFound, ResourceInfo
from reconciler.errors import DraGitopsError

log = logging.getLogger(__name__)

LEASE_API_VERSION = "coordination.k8s.io/v1"
DEFAULT_DURATION = 15.0
DEFAULT_RENEW_DEADLINE = 10.0
DEFAULT_RETRY_PERIOD = 2.0
# client-go's JitterFactor: the renew deadline must leave room for a jittered retry.
_JITTER_FACTOR = 1.2
REQUEST_ANNOTATION = "dra-gitops.io/reconcile-requested"  # "<MicroTime> <reason>": a pass is asked for
_REQUEST_TRIES = 3
# A round at a foreign Lease's expiry runs this much after it, so the expiry test is past for certain.
EXPIRY_MARGIN = 0.01


class _NotListed:
    """The marker of a round that reads its Lease itself (a GET), rather than being handed it by a LIST."""


NOT_LISTED = _NotListed()
# A Lease as a LIST found it (None: absent), or NOT_LISTED.
Listed = dict[str, Any] | None | _NotListed


def default_identity() -> str:
    """Host (the Pod name in a cluster) plus a random part: a restarted process is a new candidate."""
    return f"{socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def format_micro_time(moment: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """The election fields of a Lease's spec."""

    holder: str
    duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def of(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


class LeaseLock:
    """One Lease, contended by `identity`."""

    def __init__(
        self,
        client: ClusterClient,
        namespace: str,
        name: str,
        identity: str,
        *,
        duration: float = DEFAULT_DURATION,
        renew_deadline: float = DEFAULT_RENEW_DEADLINE,
        retry_period: float = DEFAULT_RETRY_PERIOD,
        clock: Callable[[], float] = time.monotonic,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        """`labels` go on the Lease when this lock creates it (a replica's heartbeat is found by them)."""
        if not duration > renew_deadline > retry_period * _JITTER_FACTOR > 0:
            raise ValueError(
                f"lease timings need duration ({duration}) > renew deadline ({renew_deadline}) > "
                f"{_JITTER_FACTOR} x retry period ({retry_period}) > 0"
            )
        if duration != int(duration) or not identity:
            raise ValueError("the lease duration must be whole seconds and the identity non-empty")
        self.client = client
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self.labels = dict(labels or {})
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._renewed_at: float | None = None
        self._lock = threading.Lock()
        self._resource: ResourceInfo | None = None
        self.requested: str | None = None  # the request annotation as last read
        # Why the last round could not read or write the Lease (None when it could): readiness shows it.
        self.error: str | None = None
        self.namespace_missing = False  # the last round could not create the Lease in its namespace

    @property
    def where(self) -> str:
        return f"Lease/{self.namespace}/{self.name}"

    @property
    def held(self) -> bool:
        """True while our last successful write is younger than the renew deadline."""
        renewed = self._renewed_at
        return renewed is not None and self._clock() - renewed < self.renew_deadline

    @property
    def observed_holder(self) -> str:
        """Who held the Lease when we last read it ("" when free or never read)."""
        return self._observed.holder if self._observed else ""

    @property
    def observed(self) -> LeaseRecord | None:
        """The election fields as last read (None before the first successful read)."""
        return self._observed

    @property
    def expires_at(self) -> float | None:
        """When (on our clock) the Lease someone else holds is free for us unless its holder renews it:
        the moment we first saw its current record plus its duration. None when we hold it, nobody does,
        or it was never read."""
        record = self._observed
        if record is None or not record.holder or record.holder == self.identity:
            return None
        return self._observed_at + record.duration_seconds

    # ---- one round ------------------------------------------------------------------------------------

    def try_acquire_or_renew(self, listed: Listed = NOT_LISTED, listed_at: float | None = None) -> bool:
        """Create, renew or take over the Lease; False when someone else holds it, a race was lost or the
        API server could not be reached (the reason is logged). `listed`: the Lease as a LIST of this
        round found it (when the LIST answered: `listed_at`), instead of a GET (a stale copy only costs a
        Conflict, as any lost race)."""
        with self._lock:
            started = self._clock()
            self.namespace_missing = False
            try:
                won = self._round(started, listed, started if listed_at is None else listed_at)
            except DraGitopsError as exc:
                error = f"cannot acquire or renew the lease: {exc.detail}"
                # Said once while it lasts (a round runs every retry period), again when it changes.
                log.log(
                    logging.DEBUG if error == self.error else logging.WARNING, "%s: %s", self.where, error
                )
                self.error = error
                return False
            if self.error is not None:
                log.info("%s: the lease can be read and written again", self.where)
                self.error = None
            if won:
                # Measured from before the write: whoever sees our renewal saw it after this moment.
                self._renewed_at = started
            return won

    def look(self, lease: dict[str, Any] | None, listed_at: float) -> None:
        """Take note of the Lease as a LIST that answered at `listed_at` found it, without contending (a
        replica at its fair share): who holds it, since when unchanged (its expiry), the request stamp."""
        with self._lock:
            self.error = None  # it could be read: an earlier round's failure is over
            if lease is None:
                return
            record = LeaseRecord.of(lease)
            self._observe(record, listed_at)
            self.requested = _request_of(lease)
            if record.holder != self.identity:
                self._renewed_at = None

    def _round(self, started: float, listed: Listed, read_at: float) -> bool:
        """One round; `read_at`: when the Lease was read (the expiry clock of a changed record starts
        then: as soon as we could have seen it, never before it was written)."""
        resource = self._lease_resource()
        now = format_micro_time(datetime.now(UTC))
        lease = self._read(resource) if isinstance(listed, _NotListed) else listed
        if lease is None:
            mine = LeaseRecord(self.identity, int(self.duration), now, now, 0)
            body = {
                "apiVersion": LEASE_API_VERSION,
                "kind": "Lease",
                "metadata": {
                    "name": self.name,
                    "namespace": self.namespace,
                    **({"labels": self.labels} if self.labels else {}),
                },
                "spec": mine.spec(),
            }
            try:
                created = self.client.create(resource, body)
            except Conflict:  # another replica created it first
                return False
            except (NotFound, Forbidden):
                # The namespace may be gone or being deleted under us: the manager checks it (and
                # recreates it when it can); a Forbidden for want of rights it leaves as it is.
                self.namespace_missing = True
                raise
            self._observe(LeaseRecord.of(created), started)
            log.info("%s: acquired by %s (new lease)", self.where, self.identity)
            return True
        record = LeaseRecord.of(lease)
        self._observe(record, read_at)
        self.requested = _request_of(lease)
        ours = record.holder == self.identity
        if not ours:
            self._renewed_at = None  # whatever we believed, someone else (or nobody) holds it now
        if record.holder and not ours and started < self._observed_at + record.duration_seconds:
            return False
        if ours:
            mine = LeaseRecord(
                self.identity, int(self.duration), record.acquire_time or now, now, record.transitions
            )
        else:
            mine = LeaseRecord(self.identity, int(self.duration), now, now, record.transitions + 1)
        written = self._write(resource, lease, mine, started)
        if not written and ours:
            # A request stamp (metadata only) may have come in between: still ours, renew once more.
            fresh = self._read(resource)
            if fresh is not None and LeaseRecord.of(fresh) == record:
                self.requested = _request_of(fresh)
                written = self._write(resource, fresh, mine, started)
        if not written:
            # Someone wrote it since we read it: if it was ours, it may not be any more.
            self._renewed_at = None
            return False
        if not ours:
            previous = record.holder or "nobody (released)"
            log.info("%s: taken over by %s from %s", self.where, self.identity, previous)
        return True

    def _observe(self, record: LeaseRecord, now: float) -> None:
        # The expiry clock restarts whenever the record changes, i.e. whenever its holder renews.
        if record != self._observed:
            self._observed = record
            self._observed_at = now

    def _write(
        self, resource: ResourceInfo, lease: Mapping[str, Any], record: LeaseRecord, started: float
    ) -> bool:
        meta = lease.get("metadata") or {}
        body = {
            "apiVersion": LEASE_API_VERSION,
            "kind": "Lease",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "resourceVersion": meta.get("resourceVersion"),
                **({"labels": meta["labels"]} if meta.get("labels") else {}),
                **({"annotations": meta["annotations"]} if meta.get("annotations") else {}),
            },
            "spec": record.spec(),
        }
        try:
            written = self.client.replace(resource, body)
        except Conflict:  # someone wrote since we read: they win this round
            return False
        self._observe(LeaseRecord.of(written), started)
        return True

    # ---- asking the holder for a pass ------------------------------------------------------------------

    def request(self, reason: str) -> bool:
        """Stamp the request annotation so the holder starts a pass; False when there is no Lease yet
        (nobody holds it: whoever takes it runs a pass anyway) or it cannot be written."""
        stamp = f"{format_micro_time(datetime.now(UTC))} {reason}"
        try:
            resource = self._lease_resource()
            for _ in range(_REQUEST_TRIES):
                lease = self._read(resource)
                if lease is None:
                    return False
                meta = dict(lease.get("metadata") or {})
                meta["annotations"] = {**(meta.get("annotations") or {}), REQUEST_ANNOTATION: stamp}
                try:
                    self.client.replace(resource, {**lease, "metadata": meta})
                except Conflict:  # the holder renewed in between: read again
                    continue
                log.info("%s: asked %s for a pass (%s)", self.where, LeaseRecord.of(lease).holder, reason)
                return True
        except DraGitopsError as exc:
            log.warning("%s: cannot ask the holder for a pass: %s", self.where, exc.detail)
        return False

    # ---- release --------------------------------------------------------------------------------------

    def release(self) -> bool:
        """Give the Lease up at once (clean shutdown): empty holder, 1 s duration. True when released."""
        with self._lock:
            was_held = self.held
            self._renewed_at = None
            if not was_held:
                return False
            try:
                resource = self._lease_resource()
                lease = self._read(resource)
                if lease is None or LeaseRecord.of(lease).holder != self.identity:
                    return False
                record = LeaseRecord.of(lease)
                now = format_micro_time(datetime.now(UTC))
                released = LeaseRecord("", 1, now, now, record.transitions)
                if self._write(resource, lease, released, self._clock()):
                    log.info("%s: released by %s", self.where, self.identity)
                    return True
            except DraGitopsError as exc:
                log.warning("%s: cannot release the lease (it expires by itself): %s", self.where, exc.detail)
            return False

    def _lease_resource(self) -> ResourceInfo:
        if self._resource is None:
            self._resource = self.client.resource_for(LEASE_API_VERSION, "Lease", where=self.where)
        return self._resource

    def _read(self, resource: ResourceInfo) -> dict[str, Any] | None:
        return self.client.get(resource, self.namespace, self.name)


def _request_of(lease: Mapping[str, Any]) -> str | None:
    annotations = (lease.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(REQUEST_ANNOTATION)
    return str(value) if value else None
