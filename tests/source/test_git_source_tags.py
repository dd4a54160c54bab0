"""Which tag is the newest: semantic-version precedence, patterns, pre-releases only when asked for."""

from __future__ import annotations

import pytest

from reconciler.source.tags import newest_tag, semver_key


@pytest.mark.parametrize(
    ("tags", "pattern", "expected"),
    [
        (["v1.2.0", "v1.10.0", "v1.9.9"], "v*", "v1.10.0"),
        (["v1.0.0", "v2.0.0-rc.1"], "v*", "v1.0.0"),  # pre-releases not followed by default
        (["v2.0.0-rc.1", "v2.0.0-rc.2", "v2.0.0-beta.9"], "v*-*", "v2.0.0-rc.2"),
        (["v2.0.0-rc.10", "v2.0.0-rc.9"], "v*-rc*", "v2.0.0-rc.10"),  # numeric identifiers compare as numbers
        (["1.0.0", "v0.9.0"], "*", "1.0.0"),
        (["v1.0.0", "prod-1.1.0"], "prod-*", "prod-1.1.0"),  # not semver: matched by name
        (["build-9", "build-10", "build-2"], "build-*", "build-10"),  # natural order for non-semver names
        (["build-99", "v1.0.0"], "*", "v1.0.0"),  # semantic versions outrank other names
        (["v1.0.0"], "release-*", None),
    ],
)
def test_newest_tag(tags: list[str], pattern: str, expected: str | None) -> None:
    assert newest_tag(tags, pattern) == expected


def test_semver_precedence() -> None:
    ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
    ]
    keys = [semver_key(tag) for tag in ordered]
    assert keys == sorted(keys)  # type: ignore[type-var]
    assert semver_key("v1.2") is None and semver_key("01.2.3") is None
    assert semver_key("v1.2.3+build.5") == semver_key("1.2.3")
