"""The simulated cluster's object store: one thread-safe map of objects in their storage version.

The HTTP API server and the simulated control plane both go through this class, so every controller
sees every API write (and vice versa) through :meth:`Store.subscribe`.

Stored objects are never mutated in place: each write stores a fresh dict. That lets internal readers
(the HTTP layer, watch streams) share references without copying, while the public methods hand out
deep copies that callers may edit freely.
"""

from __future__ import annotations

import builtins
import secrets
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from reconciler.sim import graceful, selectors

Obj = dict[str, Any]
ObjList = list[Obj]  # spelled out here because Store.list shadows the builtin inside the class
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


@dataclass(frozen=True)
class ResourceType:
    """One kind the server knows (for resource.k8s.io, ``version`` is the storage version v1)."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool
    subresources: tuple[str, ...] = ()
    singular: str = ""
    short_names: tuple[str, ...] = ()
    has_generation: bool = True
    verbs: tuple[str, ...] = (
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    )
    categories: tuple[str, ...] = field(default=())

    @property
    def group_resource(self) -> str:
        """``resourceclaims.resource.k8s.io`` as real error messages spell it (core: just the plural)."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


class StoreError(Exception):
    """Base of the store's errors; ``message`` is what the API server puts into the Status."""

    reason = "InternalError"
    code = 500

    def __init__(self, message: str, *, causes: list[dict[str, str]] | None = None, name: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.causes = causes or []
        self.name_hint = name  # the object's name, for the Status details


class NotFound(StoreError):
    reason = "NotFound"
    code = 404


class AlreadyExists(StoreError):
    reason = "AlreadyExists"
    code = 409


class Conflict(StoreError):
    reason = "Conflict"
    code = 409


class Invalid(StoreError):
    reason = "Invalid"
    code = 422


class Forbidden(StoreError):
    reason = "Forbidden"
    code = 403


class Gone(StoreError):
    reason = "Expired"
    code = 410


def clone(o: Any) -> Any:
    """Deep copy of JSON-like data, several times faster than copy.deepcopy."""
    t = type(o)
    if t is dict:
        return {k: clone(v) for k, v in o.items()}
    if t is list:
        return [clone(v) for v in o]
    return o


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _gen_suffix() -> str:
    # the alphabet real generateName uses (no vowels, no confusable digits)
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(secrets.choice(alphabet) for _ in range(5))


# (resourceVersion, "ADDED"|"MODIFIED"|"DELETED", type, stored object)
Change = tuple[int, str, ResourceType, Obj]
Admit = Callable[[ResourceType, Obj, "Obj | None"], None]
NOT_FOUND_NS = "namespaces"


class Store:
    """Thread-safe object store. See the module docstring for the sharing rules."""

    HISTORY = 100_000  # watch events kept for resuming from an older resourceVersion

    def __init__(self, types: list[ResourceType] | None = None, admit: Admit | None = None) -> None:
        self._lock = threading.RLock()
        # What `GET pods/NAME/log` answers: lines the simulated kubelet and driver write per container.
        self._logs: dict[tuple[str, str, str], list[str]] = {}
        self._notify_lock = threading.RLock()
        self._local = threading.local()
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        self._uids: dict[str, tuple[ResourceType, Key]] = {}
        self._dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids
        self._rv = 0
        self._history: deque[Change] = deque(maxlen=self.HISTORY)
        self._pending: deque[Change] = deque()
        self._subscribers: dict[int, Callable[[Change], None]] = {}
        self._next_sub = 0
        if admit is None:
            from reconciler.sim.validation import admit as default_admit

            admit = default_admit
        self._admit: Admit = admit
        if types is None:
            from reconciler.sim.resources import builtin_types

            types = builtin_types()
        for t in types:
            self.register_type(t)

    def add_admission(self, admit: Admit) -> None:
        """Run ``admit`` after the existing admission of every create and update (RBAC's escalation check)."""
        first = self._admit

        def chained(rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
            first(rtype, obj, old)
            admit(rtype, obj, old)

        self._admit = chained

    # ------------------------------------------------------------------ types

    def register_type(self, rtype: ResourceType) -> None:
        with self._lock:
            self._types[(rtype.group, rtype.plural)] = rtype
            self._objects.setdefault((rtype.group, rtype.plural), {})

    def unregister_type(self, group: str, plural: str) -> None:
        with self._locked():
            self._types.pop((group, plural), None)

    def resource_type(self, group: str, plural: str) -> ResourceType:
        try:
            return self._types[(group, plural)]
        except KeyError:
            raise NotFound(f"the server could not find the requested resource ({plural}.{group})") from None

    def types(self) -> list[ResourceType]:
        with self._lock:
            return list(self._types.values())

    @property
    def resource_version(self) -> str:
        return str(self._rv)

    # ------------------------------------------------------------------ public reads (copies)

    def get(self, group: str, plural: str, namespace: str, name: str) -> dict | None:
        obj = self.get_ref(group, plural, namespace, name)
        return clone(obj) if obj is not None else None

    def list(
        self,
        group: str,
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> ObjList:
        return [clone(o) for o in self.list_ref(group, plural, namespace, label_selector)[0]]

    # ------------------------------------------------------------------ internal reads (shared refs)

    def get_ref(self, group: str, plural: str, namespace: str, name: str) -> Obj | None:
        """The stored object itself: callers must not mutate it."""
        self.resource_type(group, plural)
        with self._lock:
            return self._objects[(group, plural)].get((namespace, name))

    def list_ref(
        self,
        group: str,
        plural: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
    ) -> tuple[ObjList, str]:
        """Stored objects (not copies) sorted by namespace/name, and the list's resourceVersion."""
        self.resource_type(group, plural)
        match = selectors.compile_selectors(label_selector, field_selector)
        with self._lock:
            objs = self._objects[(group, plural)]
            if namespace:
                items = [o for (ns, _), o in objs.items() if ns == namespace]
            else:
                items = list(objs.values())
            rv = str(self._rv)
        if match is not None:
            items = [o for o in items if match(o)]
        items.sort(key=lambda o: (o["metadata"].get("namespace", ""), o["metadata"]["name"]))
        return items, rv

    # ------------------------------------------------------------------ writes

    def create(self, group: str, plural: str, obj: dict, *, dry_run: bool = False) -> dict:
        """Store a new object; fills uid, resourceVersion, creationTimestamp, generation."""
        return clone(self.create_ref(group, plural, clone(obj), dry_run=dry_run))

    def update(
        self, group: str, plural: str, obj: dict, *, status: bool = False, dry_run: bool = False
    ) -> dict:
        """Replace an object (status=False: all but status; status=True: only status)."""
        md = obj.get("metadata") or {}
        rtype = self.resource_type(group, plural)
        ns = md.get("namespace", "") if rtype.namespaced else ""
        new = clone(obj)
        with self._locked():
            old = self._objects[(group, plural)].get((ns, md.get("name", "")))
            if old is None:
                raise NotFound(f'{rtype.group_resource} "{md.get("name", "")}" not found')
            rv = md.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise self.conflict(rtype, md.get("name", ""))
            out = self.replace_ref(rtype, old, new, status=status, dry_run=dry_run)
        self._drain()
        return clone(out)

    def mutate(
        self,
        group: str,
        plural: str,
        namespace: str,
        name: str,
        fn: Callable[[dict], None],
        *,
        status: bool = False,
    ) -> dict | None:
        """Read-modify-write under the lock: ``fn`` edits a copy; None if the object is missing.

        Like :meth:`update`, status=False keeps the stored status and status=True keeps everything
        but the status, for kinds with a status subresource.
        """
        rtype = self.resource_type(group, plural)
        with self._locked():
            old = self._objects[(group, plural)].get((namespace if rtype.namespaced else "", name))
            if old is None:
                return None
            new = clone(old)
            fn(new)
            out = self.replace_ref(rtype, old, new, status=status)
        self._drain()
        return clone(out)

    def delete(
        self,
        group: str,
        plural: str,
        namespace: str,
        name: str,
        *,
        propagation: str = "Background",
        dry_run: bool = False,
        precondition_uid: str | None = None,
        precondition_rv: str | None = None,
        grace_period: int | None = None,
    ) -> dict | None:
        """Delete an object; with finalizers it only gets a deletionTimestamp. None if missing.

        A pod bound to a node is deleted gracefully, as by a real apiserver: it gets a deletionTimestamp
        ``grace_period`` seconds ahead (default: its ``terminationGracePeriodSeconds``, else 30) and
        stays until its kubelet deletes it again with a grace period of 0.
        """
        rtype = self.resource_type(group, plural)
        with self._locked():
            key = (namespace if rtype.namespaced else "", name)
            old = self._objects[(group, plural)].get(key)
            if old is None:
                return None
            md = old["metadata"]
            if precondition_uid and precondition_uid != md.get("uid"):
                raise Conflict(
                    f"Precondition failed: UID in precondition: {precondition_uid}, UID in object meta: "
                    f"{md.get('uid')}"
                )
            if precondition_rv and precondition_rv != md.get("resourceVersion"):
                raise Conflict(
                    f"Precondition failed: ResourceVersion in precondition: {precondition_rv}, "
                    f"ResourceVersion in object meta: {md.get('resourceVersion')}"
                )
            out = self._delete_locked(rtype, key, old, propagation, dry_run, grace_period)
        self._drain()
        return clone(out)

    def append_log(self, namespace: str, pod: str, container: str, line: str) -> None:
        """Add a line to a container's log (kept until the pod's namespace is gone; bounded)."""
        with self._lock:
            lines: builtins.list[str] = self._logs.setdefault((namespace, pod, container), [])
            lines.append(f"{_log_time()} {line}")
            del lines[:-1000]

    def read_log(self, namespace: str, pod: str, container: str | None = None) -> builtins.list[str] | None:
        """The log of one container (the first with lines when none is named); None for an unknown pod."""
        with self._lock:
            if container is not None:
                return list(self._logs.get((namespace, pod, container), []))
            for (ns, name, _), lines in self._logs.items():
                if (ns, name) == (namespace, pod):
                    return list(lines)
            return []

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

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Hold the lock across several internal calls; notifications go out when it ends."""
        with self._locked():
            yield
        self._drain()

    def conflict(self, rtype: ResourceType, name: str) -> Conflict:
        return Conflict(
            f'Operation cannot be fulfilled on {rtype.group_resource} "{name}": the object has been '
            "modified; please apply your changes to the latest version and try again",
            name=name,
        )

    def create_ref(self, group: str, plural: str, obj: Obj, *, dry_run: bool = False) -> Obj:
        """Create from ``obj`` (owned by the store from now on) and return the stored object."""
        rtype = self.resource_type(group, plural)
        with self._locked():
            out = self._create_locked(rtype, obj, dry_run)
        self._drain()
        return out

    def _create_locked(self, rtype: ResourceType, obj: Obj, dry_run: bool) -> Obj:
        md = obj.get("metadata")
        if not isinstance(md, dict):
            md = obj["metadata"] = {}
        if not md.get("name") and md.get("generateName"):
            md["name"] = md["generateName"] + _gen_suffix()
        if rtype.namespaced:
            ns = md.get("namespace") or ""
            if not ns:
                raise Invalid("metadata.namespace: Required value", causes=[_cause("metadata.namespace")])
            nsobj = self._objects[("", NOT_FOUND_NS)].get(("", ns))
            if nsobj is None:
                raise NotFound(f'namespaces "{ns}" not found')
            if nsobj["metadata"].get("deletionTimestamp"):
                raise Forbidden(
                    f'{rtype.plural} "{md.get("name", "")}" is forbidden: unable to create new content in '
                    f"namespace {ns} because it is being terminated"
                )
        else:
            md.pop("namespace", None)
        obj["apiVersion"] = rtype.api_version
        obj["kind"] = rtype.kind
        for k in ("resourceVersion", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"):
            md.pop(k, None)
        self._admit(rtype, obj, None)
        key = (md.get("namespace", "") if rtype.namespaced else "", md["name"])
        if key in self._objects[(rtype.group, rtype.plural)]:
            raise AlreadyExists(f'{rtype.group_resource} "{md["name"]}" already exists', name=md["name"])
        md["uid"] = str(uuid.uuid4())
        md["creationTimestamp"] = now()
        if rtype.has_generation:
            md["generation"] = 1
        if not md.get("managedFields"):
            md.pop("managedFields", None)
        if dry_run:
            md["resourceVersion"] = str(self._rv)
            return obj
        self._commit(rtype, key, obj, "ADDED")
        return obj

    def replace_ref(
        self, rtype: ResourceType, old: Obj, new: Obj, *, status: bool = False, dry_run: bool = False
    ) -> Obj:
        """Store ``new`` (owned by the store from now on) in place of ``old``; caller holds the lock.

        Server-owned metadata is kept from ``old``; with a status subresource the stored status (or,
        for status writes, everything but the status) is kept too. No change, no new resourceVersion.
        """
        with self._locked():
            return self._replace_locked(rtype, old, new, status=status, dry_run=dry_run)

    def _replace_locked(self, rtype: ResourceType, old: Obj, new: Obj, *, status: bool, dry_run: bool) -> Obj:
        omd = old["metadata"]
        if status:
            merged = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                merged["status"] = new["status"]
            merged["metadata"] = dict(omd)
            sent_mf = (new.get("metadata") or {}).get("managedFields")
            if sent_mf is not None:
                merged["metadata"]["managedFields"] = sent_mf  # the status writer's ownership entry
            new = merged
        else:
            if "status" in rtype.subresources:
                new.pop("status", None)
                if "status" in old:
                    new["status"] = old["status"]
            md = new.get("metadata")
            if not isinstance(md, dict):
                md = new["metadata"] = {}
            for k in ("name", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"):
                if k in omd:
                    md[k] = omd[k]
                else:
                    md.pop(k, None)
            if rtype.namespaced:
                md["namespace"] = omd["namespace"]
            else:
                md.pop("namespace", None)
            if "managedFields" not in md and "managedFields" in omd:
                md["managedFields"] = omd["managedFields"]
            elif not md.get("managedFields"):
                md.pop("managedFields", None)
            if md.get("finalizers") == []:
                del md["finalizers"]
        new["apiVersion"] = rtype.api_version
        new["kind"] = rtype.kind
        md = new["metadata"]
        md["resourceVersion"] = omd["resourceVersion"]
        md.pop("generation", None)
        if "generation" in omd:
            md["generation"] = omd["generation"]
        if not status:
            self._admit(rtype, new, old)
        if new == old:
            return old
        if rtype.has_generation and not status and _spec_changed(old, new):
            md["generation"] = omd.get("generation", 0) + 1
        key = (omd.get("namespace", ""), omd["name"])
        if (
            omd.get("deletionTimestamp")
            and not md.get("finalizers")
            and not omd.get("deletionGracePeriodSeconds")
        ):
            # the last finalizer is gone: the pending deletion completes now (a graceful one waits for
            # its grace-0 DELETE)
            if dry_run:
                return new
            self._remove(rtype, key, new)
            return new
        if dry_run:
            return new
        self._commit(rtype, key, new, "MODIFIED")
        return new

    def _delete_locked(
        self,
        rtype: ResourceType,
        key: Key,
        old: Obj,
        propagation: str,
        dry_run: bool,
        grace_period: int | None = None,
    ) -> Obj:
        md = old["metadata"]
        finalizers = list(md.get("finalizers") or [])
        uid = md["uid"]
        if rtype.group == "" and rtype.plural == NOT_FOUND_NS:
            return self._delete_namespace(rtype, key, old, dry_run)
        grace = graceful.grace_period(rtype.group, rtype.plural, old, grace_period)
        if grace > 0:
            return self._delete_gracefully(rtype, key, old, grace, dry_run)
        if propagation == "Orphan" and not dry_run:
            for dep_uid in list(self._dependents.get(uid, ())):
                self._orphan(dep_uid, uid)
        if propagation == "Foreground" and self._dependents.get(uid) and not dry_run:
            finalizers.append("foregroundDeletion")
        if finalizers:
            pending = md.get("deletionTimestamp") and not md.get("deletionGracePeriodSeconds")
            if pending and finalizers == md.get("finalizers"):
                return old  # already being deleted
            new = dict(old)
            new["metadata"] = nmd = dict(md)
            nmd["finalizers"] = finalizers
            nmd.setdefault("deletionTimestamp", now())
            nmd["deletionGracePeriodSeconds"] = 0  # a graceful deletion ends here: its finalizers remain
            if rtype.has_generation:
                nmd["generation"] = md.get("generation", 0) + 1
            if dry_run:
                return new
            self._commit(rtype, key, new, "MODIFIED")
            if "foregroundDeletion" in finalizers:
                for dep_uid in list(self._dependents.get(uid, ())):
                    self._delete_by_uid(dep_uid, "Foreground")
                self._finish_foreground(uid)
            return self._objects[(rtype.group, rtype.plural)].get(key, new)
        if dry_run:
            return old
        return self._remove(rtype, key, old)

    def _delete_gracefully(self, rtype: ResourceType, key: Key, old: Obj, grace: int, dry_run: bool) -> Obj:
        new = graceful.mark_terminating(old, grace, has_generation=rtype.has_generation)
        if new is None or dry_run:
            return new or old
        self._commit(rtype, key, new, "MODIFIED")
        return new

    def _delete_namespace(self, rtype: ResourceType, key: Key, old: Obj, dry_run: bool) -> Obj:
        if dry_run:
            return old
        name = key[1]
        if not old["metadata"].get("deletionTimestamp"):
            new = clone(old)
            new["metadata"]["deletionTimestamp"] = now()
            new["metadata"]["deletionGracePeriodSeconds"] = 0
            new.setdefault("status", {})["phase"] = "Terminating"
            self._commit(rtype, key, new, "MODIFIED")
        for (group, plural), objs in list(self._objects.items()):
            t = self._types.get((group, plural))
            if t is None or not t.namespaced:
                continue
            for okey, obj in list(objs.items()):
                if okey[0] == name:
                    self._delete_locked(t, okey, obj, "Background", False)
        current = self._objects[("", NOT_FOUND_NS)].get(key)
        if current is None:  # removed as its last object went
            return old
        return self._maybe_finish_namespace(name) or current

    def _maybe_finish_namespace(self, name: str) -> Obj | None:
        nst = self._types[("", NOT_FOUND_NS)]
        nsobj = self._objects[("", NOT_FOUND_NS)].get(("", name))
        if nsobj is None or not nsobj["metadata"].get("deletionTimestamp"):
            return None
        for (group, plural), objs in self._objects.items():
            t = self._types.get((group, plural))
            if t is not None and t.namespaced and any(k[0] == name for k in objs):
                return None
        return self._remove(nst, ("", name), nsobj)

    def _remove(self, rtype: ResourceType, key: Key, obj: Obj) -> Obj:
        """Drop the object for good, then collect its dependents (background GC)."""
        objs = self._objects[(rtype.group, rtype.plural)]
        if key not in objs:
            return obj
        del objs[key]
        obj = dict(obj)
        obj["metadata"] = md = dict(obj["metadata"])
        uid = md["uid"]
        self._rv += 1
        md["resourceVersion"] = str(self._rv)
        self._uids.pop(uid, None)
        self._index_owners(uid, md, None)
        self._record(rtype, obj, "DELETED")
        for dep_uid in list(self._dependents.get(uid, ())):
            entry = self._uids.get(dep_uid)
            if entry is None:
                continue
            dep = self._objects[(entry[0].group, entry[0].plural)].get(entry[1])
            refs = (dep or {}).get("metadata", {}).get("ownerReferences") or []
            if all(r.get("uid") not in self._uids for r in refs):
                self._delete_by_uid(dep_uid, "Background")
        self._dependents.pop(uid, None)
        for ref in md.get("ownerReferences") or []:
            self._finish_foreground(ref.get("uid", ""))
        if rtype.namespaced:
            self._maybe_finish_namespace(key[0])
        return obj

    def _delete_by_uid(self, uid: str, propagation: str) -> None:
        entry = self._uids.get(uid)
        if entry is None:
            return
        rtype, key = entry
        obj = self._objects[(rtype.group, rtype.plural)].get(key)
        if obj is not None and not obj["metadata"].get("deletionTimestamp"):
            self._delete_locked(rtype, key, obj, propagation, False)

    def _orphan(self, dep_uid: str, owner_uid: str) -> None:
        entry = self._uids.get(dep_uid)
        if entry is None:
            return
        rtype, key = entry
        old = self._objects[(rtype.group, rtype.plural)][key]
        new = clone(old)
        refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") != owner_uid]
        if refs:
            new["metadata"]["ownerReferences"] = refs
        else:
            new["metadata"].pop("ownerReferences", None)
        self._commit(rtype, key, new, "MODIFIED")

    def _finish_foreground(self, owner_uid: str) -> None:
        entry = self._uids.get(owner_uid)
        if entry is None or self._dependents.get(owner_uid):
            return
        rtype, key = entry
        owner = self._objects[(rtype.group, rtype.plural)].get(key)
        if owner is None or "foregroundDeletion" not in (owner["metadata"].get("finalizers") or []):
            return
        new = clone(owner)
        fins = [f for f in new["metadata"]["finalizers"] if f != "foregroundDeletion"]
        new["metadata"]["finalizers"] = fins
        if fins:
            self._commit(rtype, key, new, "MODIFIED")
        else:
            del new["metadata"]["finalizers"]
            self._remove(rtype, key, new)

    def _index_owners(self, uid: str, md: Obj, new_md: Obj | None) -> None:
        for ref in md.get("ownerReferences") or []:
            deps = self._dependents.get(ref.get("uid", ""))
            if deps is not None:
                deps.discard(uid)
        if new_md is not None:
            for ref in new_md.get("ownerReferences") or []:
                self._dependents.setdefault(ref.get("uid", ""), set()).add(uid)

    def _commit(self, rtype: ResourceType, key: Key, obj: Obj, event: str) -> None:
        objs = self._objects[(rtype.group, rtype.plural)]
        old = objs.get(key)
        self._rv += 1
        md = obj["metadata"]
        md["resourceVersion"] = str(self._rv)
        uid = md["uid"]
        self._index_owners(uid, old["metadata"] if old is not None else {}, md)
        objs[key] = obj
        self._uids[uid] = (rtype, key)
        self._record(rtype, obj, event)

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

                            logging.getLogger(__name__).exception("store subscriber failed")
        finally:
            self._local.draining = False


def _spec_changed(old: Obj, new: Obj) -> bool:
    keys = (set(old) | set(new)) - {"metadata", "status", "apiVersion", "kind"}
    return any(old.get(k) != new.get(k) for k in keys) or bool(
        new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp")
    )


def _cause(field: str, message: str = "Required value", reason: str = "FieldValueRequired") -> dict[str, str]:
    return {"reason": reason, "message": message, "field": field}


def _log_time() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
