"""OPA's compiler as the stand-in applies it when a bundle is activated (see opa_standin.py).

Refuses, as OPA's compiler does and regorus (which evaluates in the stand-in) does not at load time:
rules conflicting across modules (function against rule, single- against multi-value, two defaults, a
rule where a package is), a call of a function that does not exist or with the wrong number of arguments
(rego_type_error), and OPA's type checker's "match error" on an object comprehension keyed by
`some k in [literal array]` inside a function (observed with OPA 1.9, issue 30).
"""

from __future__ import annotations

import json
import re
from functools import cache
from typing import Any

from reconciler.policy.rego_ast import ref_parts, walk

_LOCATION = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<row>\d+):(?P<col>\d+)")


def message_of(exc: Exception) -> str:
    """regorus's own message (`error: ...`), without its source excerpt or a Rust backtrace."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return next(
        (line.removeprefix("error:").strip() for line in lines if line.startswith("error:")), lines[-1]
    )


class RegoRejected(Exception):
    def __init__(self, code: str, message: str, module_id: str, row: int = 0, col: int = 0) -> None:
        super().__init__(f"{module_id}:{row}: {code}: {message}")
        self.error = {
            "code": code,
            "message": message,
            "location": {"file": module_id, "row": row, "col": col},
        }


def parse(module_id: str, text: str) -> dict[str, Any]:
    import regorus

    engine = regorus.Engine()
    engine.set_rego_v0(False)
    try:
        engine.add_policy(module_id, text)
    except RuntimeError as exc:
        match = _LOCATION.search(str(exc))
        row, col = (int(match["row"]), int(match["col"])) if match else (0, 0)
        raise RegoRejected("rego_parse_error", message_of(exc), module_id, row, col) from None
    (module,) = json.loads(engine.get_ast_as_json())
    return dict(module["ast"])


def _rules(ast: dict[str, Any]) -> tuple[str, list[tuple[str, str, int]]]:
    """The package and (rule path, kind, line) of every rule."""
    package = ".".join(ref_parts(ast["package"]["refr"])[0])
    rules = []
    for rule in ast["rules"]:
        if "Default" in rule:
            names, _ = ref_parts(rule["Default"]["refr"])
            kind, line = "default", rule["Default"]["span"]["line"]
        else:
            ((head_kind, head),) = rule["Spec"]["head"].items()
            names, dynamic = ref_parts(head["refr"])
            line = head["span"]["line"]
            if head_kind == "Func":
                kind = f"function/{len(head['args'])}"
            elif head_kind == "Set" or dynamic:
                kind = "multi-value"
            else:
                kind = "single-value"
        rules.append((".".join([package, *names]), kind, line))
    return package, rules


def _check_conflicts(parsed: dict[str, tuple[str, list[tuple[str, str, int]]]]) -> None:
    kinds: dict[str, set[str]] = {}
    defaults: dict[str, int] = {}
    packages = {package for package, _ in parsed.values()}
    for _, rules in parsed.values():
        for path, kind, _ in rules:
            if kind == "default":
                defaults[path] = defaults.get(path, 0) + 1
                kind = "single-value"
            kinds.setdefault(path, set()).add(kind)
    for module_id, (_package, rules) in parsed.items():
        for path, kind, line in rules:
            if len(kinds[path]) > 1:
                raise RegoRejected(
                    "rego_type_error", f"conflicting rules data.{path} found", module_id, line, 1
                )
            if kind == "default" and defaults[path] > 1:
                raise RegoRejected(
                    "rego_type_error", f"multiple default rules data.{path} found", module_id, line, 1
                )
            if any(p.startswith(path + ".") or p == path for p in packages):
                raise RegoRejected(
                    "rego_type_error", f"rule data.{path} conflicts with a package", module_id, line, 1
                )


@cache
def _builtin(name: str) -> bool:
    import regorus

    engine = regorus.Engine()
    engine.add_policy("probe.rego", f"package probe\n\nx := {name}()\n")
    try:
        engine.eval_rule("data.probe.x")
    except RuntimeError as exc:
        return "could not find function" not in str(exc)
    return True


def _type_check(module_id: str, ast: dict[str, Any], functions: dict[str, set[int]]) -> None:
    package = ".".join(ref_parts(ast["package"]["refr"])[0])
    for rule in ast["rules"]:
        head = (rule.get("Spec") or {}).get("head") or {}
        for node in walk(rule):
            if "Call" in node and isinstance(node["Call"], dict):
                call = node["Call"]
                names, _ = ref_parts(call["fcn"])
                line = call["span"]["line"]
                path = ".".join(names[1:]) if names[0] == "data" else f"{package}.{'.'.join(names)}"
                if path in functions:
                    if len(call["params"]) not in functions[path]:
                        raise RegoRejected(
                            "rego_type_error", f"data.{path}: arity mismatch", module_id, line, 1
                        )
                elif names[0] == "data" or not _builtin(".".join(names)):
                    raise RegoRejected(
                        "rego_type_error", f"undefined function {'.'.join(names)}", module_id, line, 1
                    )
            compr = node.get("ObjectCompr")
            if "Func" in head and isinstance(compr, dict) and "Var" in compr["key"]:
                for stmt in compr["query"]["stmts"]:
                    some_in = stmt["literal"].get("SomeIn") or {}
                    value = (some_in.get("value") or {}).get("Var", {}).get("value")
                    if "Array" in (some_in.get("collection") or {}) and value == compr["key"]["Var"]["value"]:
                        raise RegoRejected(
                            "rego_type_error", "match error", module_id, compr["span"]["line"], 1
                        )


def compile_modules(modules: dict[str, str]) -> None:
    """Raise RegoRejected for the first module OPA's compiler would refuse in this set."""
    asts = {module_id: parse(module_id, text) for module_id, text in modules.items()}
    parsed = {module_id: _rules(ast) for module_id, ast in asts.items()}
    _check_conflicts(parsed)
    functions: dict[str, set[int]] = {}
    for _, rules in parsed.values():
        for path, kind, _ in rules:
            if kind.startswith("function/"):
                functions.setdefault(path, set()).add(int(kind.split("/")[1]))
    for module_id, ast in asts.items():
        _type_check(module_id, ast, functions)
