"""What each Rego module of a policy set declares (package and rule heads), kept between runs.

Reading it takes regorus's parser and its AST as JSON, about 0.1 s for the bundled pack on every check. The
answer depends on the module's text alone: the bundled pack's ships with the package (`bundled_heads.json`,
by tools/bundled_heads.py), any other module's is kept on disk in the user's cache directory
(`$XDG_CACHE_HOME/dra-gitops`, else `~/.cache/dra-gitops`; `DRA_GITOPS_CACHE_DIR` overrides) by the digest
of each module's text, in one file per installed parser. Only modules that parsed are kept, so a broken
module is always parsed and reported. A cache that cannot be read or written (a
read-only home in a container) is passed over: it only saves time.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from reconciler.policy.rego_ast import RuleHead

FORMAT = 1
MAX_MODULES = 1000  # modules kept (a few hundred bytes each): every version of a few policy sets
Heads = tuple[tuple[str, ...], tuple[RuleHead, ...]]  # (package path, rule heads)


def cache_dir() -> Path:
    override = os.environ.get("DRA_GITOPS_CACHE_DIR")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "dra-gitops"


def _parser_version() -> str:
    """The installed parser: its extension module's path, size and time (cheaper to read than the package
    metadata, and different whenever another build is installed)."""
    from regorus import regorus as native  # the extension module (`regorus` re-exports it)

    path = str(getattr(native, "__file__", ""))
    try:
        stat = os.stat(path)
    except OSError:
        return "unknown"
    return f"{path}:{stat.st_size}:{stat.st_mtime_ns}"


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


SHIPPED = "bundled_heads.json"  # the bundled pack's heads, written by tools/bundled_heads.py


@functools.cache
def shipped() -> dict[str, Any]:
    """The heads of the bundled pack's modules, shipped with the package: a first check on a machine (a CI
    job's fresh container) parses only the user's own modules."""
    try:
        data = json.loads((resources.files("reconciler.policy") / SHIPPED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def encode_all(texts: Sequence[str], parse: Callable[[int], Heads]) -> dict[str, Any]:
    """{digest: heads} of the module texts, each parsed (what tools/bundled_heads.py writes)."""
    return {_digest(text): _encode(parse(index)) for index, text in enumerate(texts)}


def _cache_file() -> Path:
    parser = hashlib.sha256(f"{FORMAT}\0{_parser_version()}".encode()).hexdigest()[:16]
    return cache_dir() / f"rego-heads-{parser}.json"


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _decode(entry: Any) -> Heads | None:
    try:
        package = tuple(str(p) for p in entry["package"])
        rules = tuple(RuleHead(tuple(str(p) for p in r[0]), str(r[1]), int(r[2])) for r in entry["rules"])
    except (KeyError, TypeError, ValueError, IndexError):
        return None
    return package, rules


def _encode(heads: Heads) -> dict[str, Any]:
    package, rules = heads
    return {"package": list(package), "rules": [[list(r.path), r.kind, r.line] for r in rules]}


def _write(path: Path, data: dict[str, Any]) -> None:
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, delete=False, suffix=".tmp") as out:
            json.dump(data, out)
        os.replace(out.name, path)  # whole or not at all, whatever runs at the same time
    except OSError:
        return


def module_heads(texts: Sequence[str], parse: Callable[[int], Heads]) -> list[Heads]:
    """The heads of each module text, from the cache or (for those it lacks) `parse(index)`, which raises
    on a module that does not parse."""
    digests = [_digest(text) for text in texts]
    known = shipped()
    path = _cache_file()
    kept = _read(path) if any(d not in known for d in digests) else {}
    found: list[Heads] = []
    parsed: dict[str, Any] = {}
    for index, digest in enumerate(digests):
        heads = _decode(known.get(digest) or kept.get(digest))
        if heads is None:
            heads = parse(index)
            parsed[digest] = _encode(heads)
        found.append(heads)
    if parsed:  # the newest last; the oldest go when there are more than MAX_MODULES
        merged = {**{d: e for d, e in kept.items() if d not in parsed}, **parsed}
        _write(path, dict(list(merged.items())[-MAX_MODULES:]))
    return found
