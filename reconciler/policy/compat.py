"""What OPA refuses that the embedded engine (regorus) accepts: the known differences, found in the parse
tree of a policy directory before a bundle of it reaches an OPA server.

OPA compiles every rule of every module when it loads a bundle, and refuses the whole bundle on one error;
regorus reports most of the same errors only when the rule in question is evaluated, and has no strict
mode. docs/policy-guide.md ("OPA and the embedded engine") lists each difference with what OPA says;
tests/policy/test_compat.py pins each one.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from reconciler.policy.engine import Module, load_policy_set
from reconciler.policy.rego_ast import parse_module, ref_parts, walk

# Removed from OPA 1.0 (deprecated before; `opa check --strict` refused them already).
REMOVED_BUILTINS = frozenset(
    {"any", "all", "re_match", "set_diff", "net.cidr_overlap"}
    | {f"cast_{t}" for t in ("array", "set", "string", "boolean", "null", "object")}
)
_SPECIAL_IMPORTS = ("rego", "future")


@dataclass(frozen=True)
class Difference:
    code: str
    where: str  # path:line
    message: str
    opa_says: str  # what OPA reports for it

    def render(self) -> str:
        return f"{self.where}: OPA would refuse this ({self.code}): {self.message} [OPA: {self.opa_says}]"

    def to_json(self) -> dict[str, str]:
        return {"code": self.code, "where": self.where, "message": self.message, "opa_says": self.opa_says}


def _line(node: dict[str, Any]) -> int:
    for value in node.values():
        if isinstance(value, dict) and "span" in value:
            return int(value["span"]["line"])
        if isinstance(value, dict) and "line" in value:
            return int(value["line"])
    return int((node.get("span") or {}).get("line") or 0)


def _vars(node: Any) -> Iterator[tuple[str, int]]:
    """(name, line) of every variable in a subtree."""
    for item in walk(node):
        if "Var" in item and isinstance(item["Var"], dict) and "value" in item["Var"]:
            yield str(item["Var"]["value"]), int(item["Var"]["span"]["line"])


def _import_names(module: Module, ast: dict[str, Any]) -> list[tuple[str, tuple[str, ...], int]]:
    """(name it binds, imported path, line) of each import; `rego.v1` and `future.*` are not bindings."""
    found = []
    encoded = module.text.encode()
    for imported in ast.get("imports") or []:
        path, _ = ref_parts(imported["refr"])
        if path[0] in _SPECIAL_IMPORTS:
            continue
        alias = imported.get("as")
        name = encoded[alias["start"] : alias["end"]].decode() if isinstance(alias, dict) else path[-1]
        found.append((name, tuple(path), int(imported["span"]["line"])))
    return found


def _imports(module: Module, ast: dict[str, Any]) -> Iterator[Difference]:
    used = {name for name, _ in _vars(ast.get("rules") or [])}
    seen: set[tuple[str, ...]] = set()
    for name, path, line in _import_names(module, ast):
        where = f"{module.path}:{line}"
        if path in seen:
            yield Difference(
                "duplicate-import",
                where,
                f"import {'.'.join(path)} appears twice",
                "rego_compile_error (strict)",
            )
        seen.add(path)
        if name not in used:
            yield Difference(
                "unused-import",
                where,
                f"import {'.'.join(path)} is never used",
                "rego_compile_error (strict)",
            )


def _assigned(lhs: dict[str, Any]) -> Iterator[tuple[str, int]]:
    if "Var" in lhs:
        yield str(lhs["Var"]["value"]), int(lhs["Var"]["span"]["line"])
    for item in (lhs.get("Array") or {}).get("items") or []:
        yield from _assigned(item)


def _unused_assignments(module: Module, rule: dict[str, Any]) -> Iterator[Difference]:
    counts: dict[str, int] = {}
    for name, _ in _vars(rule):
        counts[name] = counts.get(name, 0) + 1
    for node in walk(rule):
        assign = node.get("AssignExpr")
        if not isinstance(assign, dict) or assign.get("op") != "ColEq":
            continue
        for name, line in _assigned(assign["lhs"]):
            if not name.startswith("_") and counts.get(name, 0) == 1:
                yield Difference(
                    "unused-assignment",
                    f"{module.path}:{line}",
                    f"local {name} is assigned with := and never used",
                    "rego_compile_error: assigned var unused (strict)",
                )


@cache
def _regorus_knows(name: str) -> bool:
    """Whether regorus has a builtin of this name (asked by calling it with no arguments)."""
    import regorus

    engine = regorus.Engine()
    try:
        engine.add_policy("probe.rego", f"package probe\n\nx := {name}()\n")
        try:
            engine.eval_rule("data.probe.x")
        except RuntimeError as exc:
            return "could not find function" not in str(exc)
        return True
    finally:
        del engine  # unsendable: dropped in this thread (see EmbeddedEngine)


def _calls(
    module: Module, ast: dict[str, Any], functions: dict[tuple[str, ...], set[int]]
) -> Iterator[Difference]:
    aliases = {name: path for name, path, _ in _import_names(module, ast)}
    for node in walk(ast.get("rules") or []):
        call = node.get("Call")
        if not isinstance(call, dict):
            continue
        names, _ = ref_parts(call["fcn"])
        where = f"{module.path}:{call['span']['line']}"
        dotted = ".".join(names)
        if dotted in REMOVED_BUILTINS:
            yield Difference(
                "removed-builtin",
                where,
                f"{dotted} was removed in OPA 1.0",
                "rego_type_error: undefined function",
            )
            continue
        user_ref = names[0] in aliases or names[0] == "data"
        if names[0] in aliases:
            target: tuple[str, ...] = (*aliases[names[0]][1:], *names[1:])
        elif names[0] == "data":
            target = tuple(names[1:])
        else:
            target = (*module.package_path, *names)
        arities = functions.get(target)
        if arities is not None:
            if len(call["params"]) not in arities:
                yield Difference(
                    "function-arity",
                    where,
                    f"{dotted} is called with {len(call['params'])} arguments; it takes "
                    + " or ".join(str(a) for a in sorted(arities)),
                    "rego_type_error: function has arity mismatch",
                )
        elif user_ref or not _regorus_knows(dotted):
            yield Difference(
                "undefined-function",
                where,
                f"{dotted} is neither a builtin nor a function of these policies",
                "rego_type_error: undefined function",
            )


def _literal_comprehension_keys(module: Module, rule: dict[str, Any]) -> Iterator[Difference]:
    """`f(x) := {k: x | some k in ["a", "b"]}`: OPA 1.9's type checker refuses an object comprehension in a
    function whose key comes from `some k in` a literal array (rego_type_error: match error)."""
    head = (rule.get("Spec") or {}).get("head") or {}
    if "Func" not in head:
        return
    for node in walk(rule):
        compr = node.get("ObjectCompr")
        if not isinstance(compr, dict) or "Var" not in compr["key"]:
            continue
        key = compr["key"]["Var"]["value"]
        for stmt in compr["query"]["stmts"]:
            some_in = stmt["literal"].get("SomeIn")
            if (
                isinstance(some_in, dict)
                and some_in.get("key") is None
                and (some_in.get("value") or {}).get("Var", {}).get("value") == key
                and "Array" in some_in["collection"]
            ):
                yield Difference(
                    "object-comprehension-over-literal",
                    f"{module.path}:{compr['span']['line']}",
                    f"object comprehension keyed by `some {key} in [...]` inside function "
                    f"{'.'.join(ref_parts(head['Func']['refr'])[0])}: write the object out literally",
                    "rego_type_error: match error",
                )


def _shadowing(module: Module, rule: dict[str, Any]) -> Iterator[Difference]:
    """`f(data) := ...`, `some input in ...`: declaring a variable named `input` or `data`."""
    head = (rule.get("Spec") or {}).get("head") or {}
    declared = list((head.get("Func") or {}).get("args") or [])
    for node in walk(rule):
        some_in = node.get("SomeIn")
        if isinstance(some_in, dict):
            declared += [some_in.get("key") or {}, some_in.get("value") or {}]
        assign = node.get("AssignExpr")
        if isinstance(assign, dict) and assign.get("op") == "ColEq":
            declared.append(assign["lhs"])
    for name, line in (item for term in declared for item in _vars(term)):
        if name in ("input", "data"):
            yield Difference(
                "shadowed-input-data",
                f"{module.path}:{line}",
                f"a variable named {name} hides the document of that name",
                f"rego_compile_error: variables must not shadow {name} (strict)",
            )


def _outside_root(module: Module) -> Iterator[Difference]:
    if module.package_path[:1] != ("dra",):
        yield Difference(
            "outside-bundle-root",
            f"{module.path}:1",
            f"package {module.package} is not under `dra`, the root of the bundle dra-gitops builds",
            "bundle activation error: manifest roots do not permit the package",
        )


def module_differences(modules: Iterable[Module]) -> list[Difference]:
    """Every known difference in these modules (the functions they define are known to each other)."""
    modules = list(modules)
    functions: dict[tuple[str, ...], set[int]] = {}
    for module in modules:
        for rule in module.rules:
            if rule.kind.startswith("function/"):
                functions.setdefault(rule.path, set()).add(int(rule.kind.split("/")[1]))
    found: list[Difference] = []
    for module in modules:
        ast = parse_module(module.path, module.text).ast
        found += _outside_root(module)
        found += _imports(module, ast)
        found += _calls(module, ast, functions)
        for rule in ast.get("rules") or []:
            found += _unused_assignments(module, rule)
            found += _literal_comprehension_keys(module, rule)
            found += _shadowing(module, rule)
    return sorted(set(found), key=lambda d: (d.where, d.code))


def check_compatibility(dirs: list[Path]) -> list[Difference]:
    """The known differences in the modules and test modules under `dirs`."""
    policy_set = load_policy_set(dirs, include_bundled=False)
    return module_differences([*policy_set.modules, *policy_set.tests])
