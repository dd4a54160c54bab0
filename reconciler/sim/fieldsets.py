"""Field sets of server-side apply (pure), after structured-merge-diff's ``fieldpath``.

Field sets are Python sets of paths; a path is a tuple of the ``fieldsV1`` path elements
(``f:spec``, ``k:{"name":"c"}`` for an associative-list item, ``v:"x"`` for a set item). A set holds
leaves (scalars, atomic lists and maps, empty maps) and the members of associative lists and sets.
:func:`fieldset` reads one from an object, :func:`to_fields_v1` and :func:`from_fields_v1` convert it
to and from ``managedFields[].fieldsV1``; :mod:`reconciler.sim.fieldmanager` tracks who owns which.
"""

from __future__ import annotations

import json
from typing import Any

from reconciler.sim.schema import ATOMIC_MAPS, SERVER_META, list_kind
from reconciler.sim.storebase import Obj

__all__ = [
    "FieldSet",
    "Path",
    "fieldset",
    "from_fields_v1",
    "item_key",
    "path_string",
    "to_fields_v1",
    "value_at",
]

Path = tuple[str, ...]
FieldSet = set[Path]

_MISSING = object()  # value_at of a path the object does not have


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True)


# List-map keys the schema gives a default: an applied item without one is keyed with the default, as the
# server keys the defaulted live item (a container port applied without protocol is the live TCP port).
KEY_DEFAULTS = {"protocol": "TCP"}


def item_key(item: Any, keys: tuple[str, ...]) -> str | None:
    """The ``k:`` path element of an associative-list item; None when it has none of the keys."""
    if not isinstance(item, dict) or not any(k in item for k in keys):
        return None
    key = {k: item[k] if k in item else KEY_DEFAULTS[k] for k in keys if k in item or k in KEY_DEFAULTS}
    return "k:" + _compact(key)


# ---------------------------------------------------------------------- field sets


def fieldset(obj: Obj, scope: str, has_status: bool) -> FieldSet:
    """The fields an object (or apply configuration) sets, as ownership tracking sees them.

    ``scope`` "main" leaves out the status of kinds with a status subresource; "status" keeps only it.
    """
    out: FieldSet = set()
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if scope == "status" and key != "status":
            continue
        if scope == "main" and has_status and key == "status":
            continue
        if key == "metadata" and isinstance(value, dict):
            md = {k: v for k, v in value.items() if k not in SERVER_META}
            if md:
                _walk(md, ("f:metadata",), out)
            continue
        _walk_field(value, ("f:" + key,), key, (), out)
    return out


def _walk(value: dict[str, Any], path: Path, out: FieldSet) -> None:
    for k, v in value.items():
        _walk_field(v, path + ("f:" + k,), k, path, out)


def _walk_field(v: Any, p: Path, name: str, parent: Path, out: FieldSet) -> None:
    if isinstance(v, dict):
        if not v or name in ATOMIC_MAPS:
            out.add(p)
        else:
            _walk(v, p, out)
    elif isinstance(v, list):
        kind, keys = list_kind(parent, name)
        if kind == "set" and v:
            for item in v:
                out.add(p + ("v:" + _compact(item),))
        elif kind == "map" and v and all(item_key(i, keys) for i in v):
            for item in v:
                kp = p + (str(item_key(item, keys)),)
                out.add(kp)
                for f, iv in item.items():
                    _walk_field(iv, kp + ("f:" + f,), f, kp, out)
        else:
            out.add(p)
    else:
        out.add(p)


def value_at(obj: Any, path: Path) -> Any:
    cur = obj
    for el in path:
        if el.startswith("f:"):
            if not isinstance(cur, dict) or el[2:] not in cur:
                return _MISSING
            cur = cur[el[2:]]
        elif el.startswith("k:"):
            want = json.loads(el[2:])
            if not isinstance(cur, list):
                return _MISSING
            for item in cur:
                if isinstance(item, dict) and all(item.get(k) == v for k, v in want.items()):
                    cur = item
                    break
            else:
                return _MISSING
        elif el.startswith("v:"):
            want = json.loads(el[2:])
            if not isinstance(cur, list) or want not in cur:
                return _MISSING
            cur = want
        else:
            return _MISSING
    return cur


def to_fields_v1(paths: FieldSet) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for p in sorted(paths):
        node = root
        for el in p:
            node = node.setdefault(el, {})
    for p in paths:
        node = root
        for el in p:
            node = node[el]
        if node and "." not in node:
            node["."] = {}
    return root


def from_fields_v1(d: Any, path: Path = ()) -> FieldSet:
    out: FieldSet = set()
    if not isinstance(d, dict):
        return out
    for k, v in d.items():
        if k == ".":
            out.add(path)
        elif not v:
            out.add(path + (k,))
        else:
            out |= from_fields_v1(v, path + (k,))
    return out


def path_string(path: Path) -> str:
    """A path as structured-merge-diff prints it: ``.spec.containers[name="c"].image``."""
    parts = []
    for el in path:
        if el.startswith("f:"):
            parts.append("." + el[2:])
        elif el.startswith("k:"):
            kv = json.loads(el[2:])
            parts.append("[" + ",".join(f"{k}={json.dumps(v)}" for k, v in kv.items()) + "]")
        elif el.startswith("v:"):
            parts.append("[=" + el[2:] + "]")
    return "".join(parts)
