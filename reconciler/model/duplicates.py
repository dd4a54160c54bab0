"""The same object defined twice: once with identical content it is loaded once, else refused.

Real repositories declare a shared Namespace in two teams' folders; applying it once is what the author
meant. Two different bodies for one object are refused: which one wins would depend on file order.
"Identical" is judged on the parsed bodies, so comments, key order, quoting and flow or block style do not
count; list order and every value do.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reconciler.errors import ManifestError
from reconciler.model.objects import Manifest, ObjRef

__all__ = ["Duplicate", "deduplicate", "first_difference"]


@dataclass(frozen=True)
class Duplicate:
    """A repeat of an object with the same content as its first definition: loaded once, reported."""

    ref: ObjRef
    path: str  # where the repeat is
    line: int
    first: str  # `path:line` of the definition that is loaded

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def message(self) -> str:
        return f"{self.ref} is defined twice with the same content (first at {self.first}); applied once"


def deduplicate(manifests: Iterable[Manifest]) -> tuple[list[Manifest], list[Duplicate]]:
    """The manifests with identical repeats left out, and the repeats; a differing repeat is an error."""
    seen: dict[ObjRef, Manifest] = {}
    kept: list[Manifest] = []
    repeats: list[Duplicate] = []
    for manifest in manifests:
        first = seen.setdefault(manifest.ref, manifest)
        if first is manifest:
            kept.append(manifest)
        elif first.body == manifest.body:
            repeats.append(Duplicate(manifest.ref, manifest.path, manifest.line, first.where))
        else:
            differ = first_difference(first.body, manifest.body)
            raise ManifestError(
                f"{manifest.ref} is defined twice with different content (first at {first.where}): "
                f"they differ at {differ or 'the top level'}",
                where=manifest.where,
            )
    return kept, repeats


def first_difference(a: Any, b: Any, path: str = "") -> str:
    """The dotted path of the first place two parsed bodies differ ("" when they differ as a whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            if key not in a or key not in b or a[key] != b[key]:
                inner = f"{path}.{key}" if path else str(key)
                if key in a and key in b:
                    return first_difference(a[key], b[key], inner)
                return inner
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for index, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return first_difference(x, y, f"{path}[{index}]")
    return path
