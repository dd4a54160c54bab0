"""Fixtures of the Git source tests: a real bare "server" repository plus a working clone, in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from gitrepos import Remote


@pytest.fixture
def remote(tmp_path: Path) -> Iterator[Remote]:
    yield Remote(tmp_path / "remote")
