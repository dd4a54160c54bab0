"""The one way our generators end: write the generated file, or with `--check` say whether it is current."""

from __future__ import annotations

import sys
from pathlib import Path


def write_or_check(target: Path, text: str, script: str) -> int:
    """Write `text` to `target`; with `--check`, exit 1 (naming `script` to run) when the file differs."""
    if "--check" in sys.argv[1:]:
        if not target.exists() or target.read_text(encoding="utf-8") != text:
            print(f"{target} is out of date: run python {script}", file=sys.stderr)
            return 1
        return 0
    target.write_text(text, encoding="utf-8")
    return 0
