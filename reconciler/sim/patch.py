"""JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

All functions return new structures and leave their inputs alone (inputs may be stored objects).
"""

from __future__ import annotations

from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.sim.schema import ATOMIC_MAPS, LIST_KEYS, SET_LISTS
from reconciler.sim.storebase import clone


class PatchError(DraGitopsError):
    """A patch that cannot be applied (the API answers 422 or 400)."""


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


# ---------------------------------------------------------------------- JSON patch


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise PatchError(f"invalid JSON pointer: {path!r}")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise PatchError("json patch must be a list of operations")
    doc = clone(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op:
            raise PatchError("invalid operation")
        kind = op["op"]
        path = _pointer(str(op.get("path", "")))
        if kind == "add":
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "remove":
            doc, _ = _remove(doc, path)
        elif kind == "replace":
            doc, _ = _remove(doc, path)
            doc = _add(doc, path, clone(op.get("value")))
        elif kind == "move":
            doc, val = _remove(doc, _pointer(str(op.get("from", ""))))
            doc = _add(doc, path, val)
        elif kind == "copy":
            doc = _add(doc, path, clone(_get(doc, _pointer(str(op.get("from", ""))))))
        elif kind == "test":
            if _get(doc, path) != op.get("value"):
                raise PatchError(f"testing value {op.get('path')} failed")
        else:
            raise PatchError(f"Unexpected kind: {kind}")
    return doc


def _get(doc: Any, path: list[str]) -> Any:
    cur = doc
    for p in path:
        if isinstance(cur, dict) and p in cur:
            cur = cur[p]
        elif isinstance(cur, list) and p.isdigit() and int(p) < len(cur):
            cur = cur[int(p)]
        else:
            raise PatchError(f"doc is missing path: /{'/'.join(path)}")
    return cur


def _add(doc: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif last.isdigit() and int(last) <= len(parent):
            parent.insert(int(last), value)
        else:
            raise PatchError(f"add operation does not apply: doc is missing path: /{'/'.join(path)}")
    else:
        raise PatchError(f"add operation does not apply: doc is missing path: /{'/'.join(path)}")
    return doc


def _remove(doc: Any, path: list[str]) -> tuple[Any, Any]:
    if not path:
        return None, doc
    parent = _get(doc, path[:-1])
    last = path[-1]
    if isinstance(parent, dict) and last in parent:
        return doc, parent.pop(last)
    if isinstance(parent, list) and last.isdigit() and int(last) < len(parent):
        return doc, parent.pop(int(last))
    raise PatchError(f"remove operation does not apply: doc is missing path: /{'/'.join(path)}")


# ---------------------------------------------------------------------- strategic merge patch


def strategic_merge(target: Any, patch: Any, name: str = "") -> Any:
    """Strategic merge: lists with a merge key merge item by item, ``finalizers`` merge as sets.

    Supports the ``$patch: delete|replace`` directives, ``$deleteFromPrimitiveList/<field>`` and
    ignores ``$setElementOrder/<field>`` and ``$retainKeys``.
    """
    if not isinstance(patch, dict):
        return patch
    if patch.get("$patch") == "replace":
        return {k: v for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    if name in ATOMIC_MAPS:
        return merge_patch(target, patch)
    out = dict(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if k.startswith("$setElementOrder/") or k == "$retainKeys":
            continue
        if k.startswith("$deleteFromPrimitiveList/"):
            field = k.split("/", 1)[1]
            if isinstance(out.get(field), list) and isinstance(v, list):
                out[field] = [i for i in out[field] if i not in v]
            continue
        if v is None:
            out.pop(k, None)
        elif isinstance(v, dict):
            merged = strategic_merge(out.get(k), v, k)
            if merged is None:
                out.pop(k, None)
            else:
                out[k] = merged
        elif isinstance(v, list):
            out[k] = _merge_list(out.get(k), v, k)
        else:
            out[k] = v
    return out


def _merge_list(live: Any, patch: list[Any], name: str) -> list[Any]:
    if not isinstance(live, list):
        live = []
    if name in SET_LISTS:
        return list(live) + [v for v in patch if v not in live]
    keys = ("containerPort",) if name == "ports" else LIST_KEYS.get(name)
    if not keys or not all(isinstance(i, dict) for i in patch):
        return [i for i in patch if not (isinstance(i, dict) and i.get("$patch"))]
    key = keys[0]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [i for i in patch if not i.get("$patch")]
    result = list(live)
    for item in patch:
        if key not in item and "port" in item and name == "ports":
            key = "port"
        idx = next(
            (n for n, i in enumerate(result) if isinstance(i, dict) and i.get(key) == item.get(key)), None
        )
        if item.get("$patch") == "delete":
            if idx is not None:
                result.pop(idx)
            continue
        if idx is None:
            result.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            result[idx] = strategic_merge(result[idx], item)
    return result
