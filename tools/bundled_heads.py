"""Write reconciler/policy/bundled_heads.json: the package and rule heads of every bundled Rego module.

`load_policy_set` needs what each module declares (regorus's parser, ~0.1 s for the bundled pack); the
bundled pack's answer ships with the package, keyed by each module's digest, so a first check parses only
the user's own modules. A module changed without running this is parsed as any other (and its test fails).

python tools/bundled_heads.py            # rewrite the file
python tools/bundled_heads.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from reconciler.policy.engine import bundled_policy_dir  # noqa: E402
from reconciler.policy.headcache import SHIPPED, encode_all  # noqa: E402
from reconciler.policy.rego_ast import parse_module  # noqa: E402

TARGET = ROOT / "reconciler" / "policy" / SHIPPED


def build() -> str:
    root = bundled_policy_dir()
    files = sorted(root.rglob("*.rego"))
    texts = [file.read_text(encoding="utf-8") for file in files]

    def parse(index: int) -> tuple[tuple[str, ...], tuple]:  # type: ignore[type-arg]
        parsed = parse_module(files[index].relative_to(root).as_posix(), texts[index])
        return parsed.package, parsed.rules

    heads = encode_all(texts, parse)
    lines = [
        f"{json.dumps(digest)}: {json.dumps(heads[digest], separators=(',', ':'))}"
        for digest in sorted(heads)
    ]
    return "{\n" + ",\n".join(lines) + "\n}\n"  # a module a line


def main() -> int:
    return write_or_check(TARGET, build(), "tools/bundled_heads.py")


if __name__ == "__main__":
    raise SystemExit(main())
