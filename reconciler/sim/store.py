"""The simulated cluster's object store: one thread-safe map of objects in their storage version.

The HTTP API server and the simulated control plane both go through this class, so every controller
sees every API write (and vice versa) through :meth:`Store.subscribe`.

Stored objects are never mutated in place: each write stores a fresh dict. That lets internal readers
(the HTTP layer, watch streams) share references without copying, while the public methods hand out
deep copies that callers may edit freely.

Its parts: :mod:`reconciler.sim.storebase` (types, errors, copies), :mod:`reconciler.sim.history`
(watch history and fan-out, the lock), :mod:`reconciler.sim.collector` (deletion, owner references, GC).
"""

from __future__ import annotations

import builtins
import secrets
import uuid
from typing import Any

from reconciler.sim import selectors
from reconciler.sim.causes import required
from reconciler.sim.collector import Collector
from reconciler.sim.resources import builtin_types
from reconciler.sim.storebase import (
    NOT_FOUND_NS,
    Admit,
    AlreadyExists,
    Conflict,
    Edit,
    Forbidden,
    Invalid,
    NotFound,
    Obj,
    ObjList,
    ResourceType,
    clone,
    now,
)
from reconciler.sim.validation import admit as default_admit

__all__ = ["Store"]


def _gen_suffix() -> str:
    # the alphabet real generateName uses (no vowels, no confusable digits)
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(secrets.choice(alphabet) for _ in range(5))


class Store(Collector):
    """Thread-safe object store. See the module docstring for the sharing rules."""

    def __init__(self, types: list[ResourceType] | None = None, admit: Admit | None = None) -> None:
        super().__init__()
        # What `GET pods/NAME/log` answers: lines the simulated kubelet and driver write per container.
        self._logs: dict[tuple[str, str, str], list[str]] = {}
        self._admit: Admit = admit if admit is not None else default_admit
        for t in builtin_types() if types is None else types:
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
            # cause hidden: the KeyError of the type table says no more than this message
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
        self, group: str, plural: str, namespace: str, name: str, fn: Edit, *, status: bool = False
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
                raise Invalid("metadata.namespace: Required value", causes=[required("metadata.namespace")])
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
        if new == old or _same_but_managed_times(new, old):
            # kube-apiserver's IgnoreManagedFieldsTimestampsTransformer: a write whose only change is the
            # time of a managedFields entry (an apply re-stating its values after defaulting) is a no-op.
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
            # its grace-0 DELETE; a namespace for its content to be gone)
            if dry_run:
                return new
            if rtype.group == "" and rtype.plural == "namespaces" and not self._namespace_empty(key[1]):
                self._commit(rtype, key, new, "MODIFIED")
                return new
            self._remove(rtype, key, new)
            return new
        if dry_run:
            return new
        self._commit(rtype, key, new, "MODIFIED")
        return new


def _spec_changed(old: Obj, new: Obj) -> bool:
    keys = (set(old) | set(new)) - {"metadata", "status", "apiVersion", "kind"}
    return any(old.get(k) != new.get(k) for k in keys) or bool(
        new["metadata"].get("deletionTimestamp") and not old["metadata"].get("deletionTimestamp")
    )


def _log_time() -> str:
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _same_but_managed_times(new: Obj, old: Obj) -> bool:
    """Equal once the managedFields entries' times are left out."""
    new_mf = (new.get("metadata") or {}).get("managedFields")
    old_mf = (old.get("metadata") or {}).get("managedFields")
    if not isinstance(new_mf, list) or not isinstance(old_mf, list) or len(new_mf) != len(old_mf):
        return False

    def untimed(obj: Obj, entries: list[Any]) -> Obj:
        out = dict(obj)
        out["metadata"] = dict(obj["metadata"])
        out["metadata"]["managedFields"] = [
            {k: v for k, v in e.items() if k != "time"} if isinstance(e, dict) else e for e in entries
        ]
        return out

    return untimed(new, new_mf) == untimed(old, old_mf)
