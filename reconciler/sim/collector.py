"""Deletion in the store: finalizers, graceful pods, namespaces, and the garbage collector.

:class:`Collector` keeps the object maps with their uid and owner-reference indexes; committing or
removing an object keeps them in step. Deleting follows ``propagationPolicy`` as kube-apiserver and
kube-controller-manager's garbage collector do: Background (dependents go once their last owner is
gone), Foreground (the ``foregroundDeletion`` finalizer holds the owner until its dependents are gone)
and Orphan (dependents lose the owner reference).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import orjson

from reconciler.sim import graceful, limits
from reconciler.sim.history import History
from reconciler.sim.persist import Journal, Record
from reconciler.sim.storebase import NOT_FOUND_NS, Key, Obj, ResourceType, clone, now


class Collector(History):
    """Object maps, owner index and deletion with propagation (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._types: dict[tuple[str, str], ResourceType] = {}
        self._objects: dict[tuple[str, str], dict[Key, Obj]] = {}
        self._uids: dict[str, tuple[ResourceType, Key]] = {}
        self._dependents: dict[str, set[str]] = {}  # owner uid -> dependent uids
        self._journal: Journal | None = None  # where committed changes go first (``sim serve --data-dir``)

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

    # Seconds the namespace controller takes before it deletes a Terminating namespace's content (a real
    # one takes seconds: discovery, then a delete per kind); 0: at once, within the DELETE.
    namespace_content_delay: float = 0.0

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
            if self.namespace_content_delay > 0:
                timer = threading.Timer(self.namespace_content_delay, self._namespace_controller, (name,))
                timer.daemon = True
                timer.start()
                return new
        elif self.namespace_content_delay > 0:
            return old  # the namespace controller is on it
        return self._delete_namespace_content(name, old)

    def _namespace_controller(self, name: str) -> None:
        """The namespace controller's turn at a Terminating namespace: its content deleted, then it."""
        with self._locked():
            nsobj = self._objects[("", NOT_FOUND_NS)].get(("", name))
            if nsobj is not None and nsobj["metadata"].get("deletionTimestamp"):
                self._delete_namespace_content(name, nsobj)
        self._drain()

    def _delete_namespace_content(self, name: str, old: Obj) -> Obj:
        key = ("", name)
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
        if not self._namespace_empty(name):
            return None
        if nsobj["metadata"].get("finalizers"):
            # The namespace controller is done (spec.finalizers emptied, as its /finalize does); the
            # namespace's own finalizers keep it Terminating until whoever set them removes them.
            if (nsobj.get("spec") or {}).get("finalizers"):
                new = clone(nsobj)
                new["spec"].pop("finalizers", None)
                self._commit(nst, ("", name), new, "MODIFIED")
            return None
        return self._remove(nst, ("", name), nsobj)

    def _namespace_empty(self, name: str) -> bool:
        for (group, plural), objs in self._objects.items():
            t = self._types.get((group, plural))
            if t is not None and t.namespaced and any(k[0] == name for k in objs):
                return False
        return True

    def _remove(self, rtype: ResourceType, key: Key, obj: Obj) -> Obj:
        """Drop the object for good, then collect its dependents (background GC)."""
        objs = self._objects[(rtype.group, rtype.plural)]
        if key not in objs:
            return obj
        self._write_ahead(rtype, key, None)
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

    # ------------------------------------------------------------------ persistence

    def restore(self, rv: int, records: Iterable[Record]) -> list[Record]:
        """Put objects read from a data directory back (no events); those of unknown types are returned."""
        left: list[Record] = []
        with self._lock:
            self._rv = max(self._rv, rv)
            for group, plural, ns, name, obj in records:
                rtype = self._types.get((group, plural))
                if rtype is None:
                    left.append((group, plural, ns, name, obj))
                    continue
                md = obj["metadata"]
                self._objects[(group, plural)][(ns, name)] = obj
                self._uids[md["uid"]] = (rtype, (ns, name))
                self._index_owners(md["uid"], {}, md)
        return left

    def persist_to(self, journal: Journal) -> None:
        """From now on every change goes to ``journal`` first; starts it with a snapshot of the store."""
        with self._lock:
            self._journal = journal
            self._compact()

    def _after_write(self) -> None:
        if self._journal is not None and self._journal.compaction_due():
            self._compact()

    def _compact(self) -> None:
        assert self._journal is not None
        records = (
            (group, plural, key[0], key[1], orjson.dumps(obj))
            for (group, plural), objs in self._objects.items()
            for key, obj in objs.items()
        )
        self._journal.compact(self._rv, records)

    def _write_ahead(self, rtype: ResourceType, key: Key, encoded: bytes | None) -> None:
        """Make the change at the next resourceVersion durable before it is made (None: a removal)."""
        if self._journal is not None:
            self._journal.append(self._rv + 1, rtype.group, rtype.plural, key, encoded)

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
        md = obj["metadata"]
        md["resourceVersion"] = str(self._rv + 1)
        encoded = orjson.dumps(obj)
        limits.check_stored_size(rtype, key, encoded)  # etcd's limit, before anything changes
        self._write_ahead(rtype, key, encoded)
        self._rv += 1
        uid = md["uid"]
        self._index_owners(uid, old["metadata"] if old is not None else {}, md)
        objs[key] = obj
        self._uids[uid] = (rtype, key)
        self._record(rtype, obj, event)
