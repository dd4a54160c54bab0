"""What a Rego module declares, read by a real Rego parser (regorus's), not by pattern-matching text.

`package dra.x # comment`, `package dra["x"]` and `x.deny contains ...` inside `package dra` all declare
rules under `data.dra.x`; only the parser's reference tree says so for every spelling. A module that does
not parse raises `PolicyError` at `file:line:col`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from reconciler.errors import PolicyError

os.environ.setdefault("RUST_BACKTRACE", "0")

_LOCATION_RE = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<line>\d+):(?P<col>\d+)")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class RuleHead:
    """One rule definition: its full path under `data` (package and head reference), kind and place."""

    path: tuple[str, ...]
    kind: str  # "single-value", "multi-value", "function/<arity>" or "default"
    line: int

    @property
    def dotted(self) -> str:
        return ".".join(self.path)


@dataclass(frozen=True)
class ParsedModule:
    path: str
    text: str
    package: tuple[str, ...]
    rules: tuple[RuleHead, ...]
    ast: dict[str, Any]  # regorus's module tree (`package`, `imports`, `rules`)


def parse_error(exc: Exception, where: str) -> PolicyError:
    """A regorus error as a PolicyError at `file:line:col` with regorus's own message."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    message = (errors[-1] if errors else (lines[-1] if lines else "policy error")).removeprefix("error:")
    match = _LOCATION_RE.search(text)
    if match:
        return PolicyError(message.strip(), where=f"{match['file']}:{match['line']}:{match['col']}")
    return PolicyError(message.strip(), where=where)


def ref_parts(node: dict[str, Any]) -> tuple[list[str], bool]:
    """A reference as its names, and whether it ends in a non-literal key (a multi-value object rule)."""
    if "Var" in node:
        return [str(node["Var"]["value"])], False
    if "RefDot" in node:
        names, dynamic = ref_parts(node["RefDot"]["refr"])
        return [*names, str(node["RefDot"]["field"][1])], dynamic
    if "RefBrack" in node:
        names, dynamic = ref_parts(node["RefBrack"]["refr"])
        index = node["RefBrack"]["index"]
        if "String" in index and not dynamic:
            return [*names, str(index["String"]["value"])], False
        return names, True
    return ["?"], False


def _head(rule: dict[str, Any], package: tuple[str, ...]) -> RuleHead:
    if "Default" in rule:
        names, _ = ref_parts(rule["Default"]["refr"])
        span = rule["Default"]["span"]
        return RuleHead((*package, *names), "default", span["line"])
    ((head_kind, head),) = rule["Spec"]["head"].items()
    names, dynamic = ref_parts(head["refr"])
    if head_kind == "Func":
        kind = f"function/{len(head['args'])}"
    elif head_kind == "Set" or dynamic:
        kind = "multi-value"
    else:
        kind = "single-value"
    return RuleHead((*package, *names), kind, head["span"]["line"])


def parse_module(path: str, text: str) -> ParsedModule:
    """Parse one Rego v1 module; raises PolicyError at the place regorus names."""
    import regorus  # imported here so `--help` stays fast

    engine = regorus.Engine()
    engine.set_rego_v0(False)
    try:
        engine.add_policy(path, text)
    except RuntimeError as exc:
        error = parse_error(exc, f"{path}:1:1")
        # regorus engines are unsendable: one kept alive by this frame in the error's traceback could be
        # collected on another thread (PyO3 then leaks it with an unraisable RuntimeError).
        del engine
        raise error from exc
    (module,) = json.loads(engine.get_ast_as_json())
    del engine  # before anything below raises with this frame in its traceback
    ast = module["ast"]
    names, dynamic = ref_parts(ast["package"]["refr"])
    if dynamic or names[0] == "?":
        span = ast["package"]["span"]
        raise PolicyError("package path must be names and strings", where=f"{path}:{span['line']}:1")
    package = tuple(names)
    rules = tuple(_head(rule, package) for rule in ast["rules"])
    return ParsedModule(path, text, package, rules, ast)


def rego_ref(path: tuple[str, ...] | list[str]) -> str:
    """`data.dra.x` for names that are identifiers, `data.dra["x-y"]` for those that are not."""
    out = "data"
    for part in path:
        out += f".{part}" if _IDENTIFIER.match(part) else f"[{json.dumps(part)}]"
    return out


def walk(node: Any) -> Iterator[dict[str, Any]]:
    """Every mapping in an AST subtree, depth first."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)
