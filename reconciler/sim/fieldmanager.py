"""Field ownership (``metadata.managedFields``) and server-side apply, after structured-merge-diff.

The field sets of each manager are :mod:`reconciler.sim.fieldsets`.

Server-side apply follows the real order: merge the applied configuration into the live object, detect
conflicts by comparing that merge with the live object *before* defaulting (which is why a second
manager conflicts on a defaulted atomic list), then remove fields the manager stopped applying that
nobody else owns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.sim.fieldsets import (
    FieldSet,
    Path,
    fieldset,
    from_fields_v1,
    item_key,
    path_string,
    to_fields_v1,
    value_at,
)
from reconciler.sim.schema import ATOMIC_MAPS, list_kind
from reconciler.sim.storebase import Obj, now


class ApplyConflict(DraGitopsError):
    """Conflicts of an apply without force: (manager entry, path) pairs (the API answers 409)."""

    def __init__(self, conflicts: list[tuple[dict[str, Any], Path]]) -> None:
        self.conflicts = conflicts
        super().__init__(conflict_message(conflicts))


# ---------------------------------------------------------------------- managed fields entries


@dataclass
class Entry:
    manager: str
    operation: str
    api_version: str
    time: str
    fields: FieldSet
    subresource: str = ""

    @property
    def ident(self) -> tuple[str, str, str]:
        return (self.manager, self.operation, self.subresource)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "manager": self.manager,
            "operation": self.operation,
            "apiVersion": self.api_version,
            "time": self.time,
            "fieldsType": "FieldsV1",
            "fieldsV1": to_fields_v1(self.fields),
        }
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def read_entries(obj: Obj | None) -> list[Entry]:
    if obj is None:
        return []
    out = []
    for m in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(m, dict):
            continue
        out.append(
            Entry(
                manager=str(m.get("manager", "")),
                operation=str(m.get("operation", "Update")),
                api_version=str(m.get("apiVersion", "")),
                time=str(m.get("time", "")),
                fields=from_fields_v1(m.get("fieldsV1") or {}),
                subresource=str(m.get("subresource", "")),
            )
        )
    return out


def write_entries(obj: Obj, entries: list[Entry]) -> None:
    md = obj.setdefault("metadata", {})
    kept = [e.to_json() for e in entries if e.fields]
    if kept:
        md["managedFields"] = kept
    else:
        md.pop("managedFields", None)


def _owned_by(entry: Entry, path: Path) -> Path | None:
    """The path (or its atomic ancestor) the entry owns, if any."""
    if path in entry.fields:
        return path
    for i in range(len(path) - 1, 0, -1):
        if path[:i] in entry.fields:
            return path[:i]
    return None


def conflict_message(conflicts: list[tuple[dict[str, Any], Path]]) -> str:
    if len(conflicts) == 1:
        m, p = conflicts[0]
        return f"Apply failed with 1 conflict: conflict with {print_manager(m)}: {path_string(p)}"
    by_mgr: dict[str, list[Path]] = {}
    for m, p in conflicts:
        by_mgr.setdefault(print_manager(m), []).append(p)
    lines = []
    for mgr in sorted(by_mgr):
        lines.append(f"conflicts with {mgr}:")
        lines.extend(f"- {path_string(p)}" for p in by_mgr[mgr])
    return f"Apply failed with {len(conflicts)} conflicts: " + "\n".join(lines)


def print_manager(m: dict[str, Any]) -> str:
    s = json.dumps(m["manager"])
    if m.get("subresource"):
        s += f" with subresource {json.dumps(m['subresource'])}"
    if m.get("operation") == "Update":
        s += f" using {m.get('apiVersion')}"
        if m.get("time"):
            s += f" at {m['time']}"
    return s


# ---------------------------------------------------------------------- merge


def merge(live: Any, config: Any, path: Path = ()) -> Any:
    """Merge an apply configuration into the live value at ``path`` (new structure; inputs untouched)."""
    name = path[-1][2:] if path and path[-1].startswith("f:") else ""
    if isinstance(config, dict) and isinstance(live, dict) and name not in ATOMIC_MAPS:
        out = dict(live)
        for k, v in config.items():
            if v is None:
                out.pop(k, None)
            else:
                out[k] = merge(live.get(k), v, path + ("f:" + k,))
        return out
    if isinstance(config, list) and isinstance(live, list):
        kind, keys = list_kind(path[:-1], name)
        if kind == "set":
            return list(live) + [v for v in config if v not in live]
        if kind == "map" and all(item_key(i, keys) for i in config + live):
            result = list(live)
            index = {item_key(i, keys): n for n, i in enumerate(result)}
            for item in config:
                k = item_key(item, keys)
                if k in index:
                    result[index[k]] = merge(result[index[k]], item, path + (str(k),))
                else:
                    index[k] = len(result)
                    result.append(item)
            return result
    return config


def remove_path(obj: Any, path: Path) -> None:
    """Remove the field, list item or set value at ``path``; drop maps left empty on the way."""
    if not path:
        return
    parent = value_at(obj, path[:-1]) if len(path) > 1 else obj
    el = path[-1]
    if el.startswith("f:") and isinstance(parent, dict):
        parent.pop(el[2:], None)
    elif el.startswith("k:") and isinstance(parent, list):
        want = json.loads(el[2:])
        parent[:] = [
            i for i in parent if not (isinstance(i, dict) and all(i.get(k) == v for k, v in want.items()))
        ]
    elif el.startswith("v:") and isinstance(parent, list):
        want = json.loads(el[2:])
        parent[:] = [i for i in parent if i != want]
    if len(path) > 1 and parent in ({}, []) and path[-2].startswith("f:"):
        remove_path(obj, path[:-1])


def _unshare(obj: Any, path: Path) -> Any:
    """Copy the containers along ``path`` so that removing there leaves shared live data alone."""
    cur = obj
    for el in path[:-1]:
        if el.startswith("f:") and isinstance(cur, dict) and isinstance(cur.get(el[2:]), dict | list):
            child = cur[el[2:]]
            cur[el[2:]] = child = dict(child) if isinstance(child, dict) else list(child)
            cur = child
        elif el.startswith("k:") and isinstance(cur, list):
            want = json.loads(el[2:])
            for n, item in enumerate(cur):
                if isinstance(item, dict) and all(item.get(k) == v for k, v in want.items()):
                    cur[n] = dict(item)
                    cur = cur[n]
                    break
            else:
                return obj
        else:
            return obj
    if path and path[-1].startswith("f:") and isinstance(cur, dict):
        child = cur.get(path[-1][2:])
        if isinstance(child, list):
            cur[path[-1][2:]] = list(child)
    return obj


# ---------------------------------------------------------------------- apply and update


def apply(
    live: Obj | None,
    config: Obj,
    *,
    manager: str,
    force: bool,
    scope: str,
    has_status: bool,
    api_version: str,
) -> Obj:
    """Server-side apply: the new object (before defaulting) with its managedFields. Raises ApplyConflict."""
    subresource = "status" if scope == "status" else ""
    entries = read_entries(live)
    cfg = dict(config)
    if scope == "status":
        cfg = {k: v for k, v in cfg.items() if k in ("status", "apiVersion", "kind")}
        cfg["metadata"] = {}
    elif has_status:
        cfg.pop("status", None)
    cfg_fields = fieldset(cfg, scope, has_status)
    if live is None:
        merged: Obj = merge({}, cfg)
        ours = Entry(manager, "Apply", api_version, now(), cfg_fields, subresource)
        write_entries(merged, [ours])
        return merged
    merged = merge(live, cfg)
    merged["metadata"] = dict(merged.get("metadata") or {})
    changed = [p for p in cfg_fields if value_at(live, p) != value_at(merged, p)]
    me = (manager, "Apply", subresource)
    conflicts: list[tuple[dict[str, Any], Path]] = []
    for e in entries:
        if e.ident == me:
            continue
        for p in changed:
            owned = _owned_by(e, p)
            if owned is not None:
                conflicts.append((e.to_json(), owned))
    if conflicts:
        if not force:
            raise ApplyConflict(sorted(conflicts, key=lambda c: (c[0]["manager"], c[1])))
        for e in entries:
            if e.ident != me:
                e.fields -= {p for _, p in conflicts}
                e.fields -= set(changed)
    prev = next((e for e in entries if e.ident == me), None)
    if prev is not None:
        dropped = sorted(prev.fields - cfg_fields, key=len, reverse=True)
        others = [e for e in entries if e.ident != me]
        for p in dropped:
            if any(_owned_by(e, p) or any(q[: len(p)] == p for q in e.fields) for e in others):
                continue
            if any(q[: len(p)] == p and q != p for q in cfg_fields):
                continue  # an item we still apply fields of
            _unshare(merged, p)
            remove_path(merged, p)
    object_changed = _without_mf(merged) != _without_mf(live)
    if prev is None:
        entries.append(Entry(manager, "Apply", api_version, now(), cfg_fields, subresource))
    elif prev.fields != cfg_fields or object_changed:
        prev.fields = cfg_fields
        prev.time = now()
        prev.api_version = api_version
    write_entries(merged, entries)
    return merged


def _without_mf(obj: Obj) -> Obj:
    out = dict(obj)
    out["metadata"] = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return out


def update(
    old: Obj | None,
    new: Obj,
    *,
    manager: str,
    scope: str,
    has_status: bool,
    api_version: str,
) -> None:
    """Record an Update by ``manager`` in ``new``'s managedFields: it takes the fields it changed."""
    subresource = "status" if scope == "status" else ""
    md = new.setdefault("metadata", {})
    sent = md.get("managedFields")
    entries = read_entries(old)
    if sent and old is not None and sent != (old.get("metadata") or {}).get("managedFields"):
        entries = read_entries(new)  # the client replaced managedFields on purpose
    new_f = fieldset(new, scope, has_status)
    if old is None:
        changed, removed = new_f, set()
    else:
        old_f = fieldset(old, scope, has_status)
        changed = {p for p in new_f if value_at(old, p) != value_at(new, p)}
        removed = old_f - new_f
    if not changed and not removed:
        write_entries(new, entries)
        return
    me = (manager, "Update", subresource)
    mine = None
    for e in entries:
        if e.ident == me:
            mine = e
        else:
            e.fields -= changed | removed
    if mine is None:
        mine = Entry(manager, "Update", api_version, now(), set(), subresource)
        entries.append(mine)
    mine.fields = (mine.fields - removed) | changed
    mine.time = now()
    mine.api_version = api_version
    write_entries(new, entries)
