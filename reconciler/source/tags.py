"""Which tag to follow: the newest of those matching a pattern, in semantic-version order.

Pure functions (no Git) so the ordering is easy to test on its own.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

_SEMVER = re.compile(
    r"^v?(?P<major>0|[1-9]\d*)\.(?P<minor>0|[1-9]\d*)\.(?P<patch>0|[1-9]\d*)"
    r"(?:-(?P<pre>[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
_DIGITS = re.compile(r"(\d+)")

# A pre-release sorts before its release (1.0.0-rc.1 < 1.0.0); numeric identifiers compare as numbers and
# before alphanumeric ones (semver.org, rule 11).
_PreKey = tuple[tuple[int, int, str], ...]


def _pre_key(pre: str | None) -> tuple[int, _PreKey]:
    if pre is None:
        return (1, ())
    parts = tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in pre.split("."))
    return (0, parts)


def semver_key(tag: str) -> tuple[int, int, int, tuple[int, _PreKey]] | None:
    """Sort key of a semantic version tag (`v1.2.3`, `1.2.3-rc.1`), or None when `tag` is not one."""
    match = _SEMVER.match(tag)
    if match is None:
        return None
    return (int(match["major"]), int(match["minor"]), int(match["patch"]), _pre_key(match["pre"]))


def is_prerelease(tag: str) -> bool:
    match = _SEMVER.match(tag)
    return match is not None and match["pre"] is not None


def _natural_key(tag: str) -> tuple[tuple[int, int, str], ...]:
    return tuple((0, int(p), "") if p.isdigit() else (1, 0, p) for p in _DIGITS.split(tag) if p)


def newest_tag(tags: Iterable[str], pattern: str) -> str | None:
    """The newest tag matching the fnmatch `pattern`.

    Semantic versions outrank other names and compare by semver precedence; other names compare in natural
    order (`build-10` after `build-9`). As with Flux's semver ranges, pre-releases are followed only when
    the pattern asks for them (contains a `-`, as in `v*-rc*`).
    """
    want_pre = "-" in pattern
    matching = [
        tag for tag in tags if fnmatch.fnmatchcase(tag, pattern) and (want_pre or not is_prerelease(tag))
    ]
    if not matching:
        return None
    versions = [(key, tag) for tag in matching if (key := semver_key(tag)) is not None]
    if versions:
        return max(versions)[1]
    return max(matching, key=_natural_key)
