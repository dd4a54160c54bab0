"""docs/cli.md is generated from the click commands; it must match them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_cli_reference_is_current() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "cli_reference.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr


def test_every_command_is_documented() -> None:
    text = (REPO / "docs" / "cli.md").read_text(encoding="utf-8")
    for command in (
        "check",
        "plan",
        "apply",
        "inventory",
        "diagnose",
        "checklist",
        "policy test",
        "sim serve",
        "ui",
    ):
        assert f"## `dra-gitops {command}`" in text
