"""Policy sets and the engines that evaluate them.

A `PolicySet` is the bundled pack plus any user directories: Rego modules, merged `data.json` params and
the rule metadata from each module's `# METADATA` block. An `Engine` evaluates a policy input document
and returns the raw `deny`/`warn` sets of every `dra.*` package; `evaluate()` turns them into findings
and applies waivers. The embedded engine (regorus) is the default; `reconciler.policy.opa` talks to an
OPA server and must give identical results.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Protocol

import orjson
import yaml

from reconciler.errors import PolicyError
from reconciler.policy.headcache import module_heads
from reconciler.policy.rego_ast import RuleHead, parse_error, parse_module, rego_ref
from reconciler.policy.result import Finding, RuleInfo, Severity

os.environ.setdefault("RUST_BACKTRACE", "0")  # regorus errors must be one readable message, not a trace

WAIVER_PREFIX = "policy.dra-gitops.io/waive-"


def bundled_policy_dir() -> Path:
    """The policy pack shipped inside the package (a link to the repository's `policies/`)."""
    return Path(str(resources.files("reconciler") / "bundled_policies"))


@dataclass(frozen=True)
class Module:
    path: str  # shown to users in errors and SARIF
    text: str
    package: str
    # Which root it came from and where under it (`bundled/capacity/capacity.rego`,
    # `policy-1/limits/limits.rego`): the same from any working directory, so a server-side id.
    source_id: str
    rules: tuple[RuleHead, ...] = ()  # every rule it defines, with its full path under `data`
    package_path: tuple[str, ...] = ()


@dataclass
class PolicySet:
    modules: list[Module] = field(default_factory=list)
    tests: list[Module] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    rules: dict[str, RuleInfo] = field(default_factory=dict)
    rule_of_package: dict[str, str] = field(default_factory=dict)


def parse_metadata(text: str, where: str) -> dict[str, Any]:
    """The first `# METADATA` block of a Rego module, as YAML."""
    lines = text.splitlines()
    for index, line in enumerate(lines):
        if line.strip() != "# METADATA":
            continue
        block = []
        for following in lines[index + 1 :]:
            stripped = following.strip()
            if not stripped.startswith("#"):
                break
            block.append(stripped[2:] if stripped.startswith("# ") else stripped[1:])
        try:
            data = yaml.safe_load("\n".join(block)) or {}
        except yaml.YAMLError as exc:
            raise PolicyError(f"invalid METADATA block: {exc}", where=f"{where}:{index + 1}") from exc
        if not isinstance(data, dict):
            raise PolicyError("METADATA block must be a mapping", where=f"{where}:{index + 1}")
        return data
    return {}


def _display(path: Path) -> str:
    try:
        return path.resolve().relative_to(Path.cwd().resolve()).as_posix()
    except ValueError:
        return path.as_posix()


def _merge(into: dict[str, Any], data: dict[str, Any]) -> None:
    for key, value in data.items():
        if isinstance(value, dict) and isinstance(into.get(key), dict):
            _merge(into[key], value)
        else:
            into[key] = value


def rule_packages(policy_set: PolicySet) -> list[tuple[str, ...]]:
    """The paths under `data.dra` that hold a `deny` or `warn` rule of the policy set's modules: whatever
    spelling declares them (`package dra.x`, `package dra["x"]`, `x.deny contains ...` in `package dra`)."""
    found = {
        rule.path[:-1]
        for module in policy_set.modules
        for rule in module.rules
        if len(rule.path) > 2 and rule.path[0] == "dra" and rule.path[-1] in ("deny", "warn")
    }
    return sorted(found)


def _root_labels(roots: list[Path]) -> list[str]:
    """`bundled` for the bundled pack, `policy-<n>` for the n-th other directory."""
    bundled = bundled_policy_dir().resolve()
    labels, other = [], 0
    for root in roots:
        if root.resolve() == bundled:
            labels.append("bundled")
        else:
            other += 1
            labels.append(f"policy-{other}")
    return labels


def load_policy_set(directories: Iterable[Path], *, include_bundled: bool = True) -> PolicySet:
    """Read every Rego module and `data.json` under the directories (bundled pack first)."""
    roots = ([bundled_policy_dir()] if include_bundled else []) + list(directories)
    policy_set = PolicySet()
    sources: list[tuple[Path, str, str, str]] = []  # path, shown, text, source id
    for root, label in zip(roots, _root_labels(roots), strict=True):
        if not root.is_dir():
            raise PolicyError("policy directory does not exist", where=str(root))
        for path in sorted(root.rglob("*")):
            if path.name == "data.json":
                shown = _display(path)
                try:
                    data = json.loads(path.read_text(encoding="utf-8"))
                except json.JSONDecodeError as exc:
                    raise PolicyError(
                        f"invalid JSON: {exc.msg}", where=f"{shown}:{exc.lineno}:{exc.colno}"
                    ) from exc
                if not isinstance(data, dict):
                    raise PolicyError("data.json must hold an object", where=shown)
                _merge(
                    policy_set.params, data.get("params", {}) if isinstance(data.get("params"), dict) else {}
                )
            elif path.suffix == ".rego":
                shown = _display(path)
                text = path.read_text(encoding="utf-8")
                sources.append((path, shown, text, f"{label}/{path.relative_to(root).as_posix()}"))

    def parse(index: int) -> tuple[tuple[str, ...], tuple[RuleHead, ...]]:
        parsed = parse_module(sources[index][1], sources[index][2])
        return parsed.package, parsed.rules

    heads = module_heads([text for _, _, text, _ in sources], parse)
    for (path, shown, text, source_id), (package, rules) in zip(sources, heads, strict=True):
        _add_module(policy_set, path, shown, text, source_id, package, rules)
    return policy_set


def _add_module(
    policy_set: PolicySet,
    path: Path,
    shown: str,
    text: str,
    source_id: str,
    package: tuple[str, ...],
    rules: tuple[RuleHead, ...],
) -> None:
    module = Module(shown, text, ".".join(package), source_id, rules, package)
    if path.stem.endswith("_test"):
        policy_set.tests.append(module)
        return
    policy_set.modules.append(module)
    meta = parse_metadata(text, shown)
    custom = meta.get("custom") if isinstance(meta.get("custom"), dict) else {}
    assert isinstance(custom, dict)
    if not module.package.startswith("dra."):
        return  # helper libraries may live anywhere; only dra.* packages hold rules
    rule_id = str(custom.get("id") or module.package.removeprefix("dra.").replace("_", "-"))
    severity: Severity = "warn" if custom.get("severity") == "warn" else "deny"
    policy_set.rules[rule_id] = RuleInfo(
        id=rule_id,
        title=str(meta.get("title") or rule_id),
        description=str(meta.get("description") or "").strip(),
        severity=severity,
        source=shown,
    )
    policy_set.rule_of_package[module.package] = rule_id


def encode_input(input_doc: dict[str, Any]) -> str:
    """The input as JSON; orjson because a 10,000-object input is ~17 MB and `json` spends 0.3 s on it.

    YAML can yield values JSON has no type for (an explicit `!!binary` or `!!timestamp`); they become
    strings, as the Kubernetes API would render them.
    """
    try:  # the common input has string keys only: orjson is a third faster when it need not look
        return orjson.dumps(input_doc, default=str).decode()
    except orjson.JSONEncodeError:  # a key YAML read as a number, a date: as a string, as kubectl would
        return orjson.dumps(input_doc, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def rego_error(exc: Exception) -> PolicyError:
    """Turn a regorus error into a PolicyError that starts with `file:line:col`."""
    return parse_error(exc, "")


class Engine(Protocol):
    """Evaluates a policy input document; returns {package: {"deny": [...], "warn": [...]}}."""

    name: str

    def evaluate(self, input_doc: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]: ...

    def close(self) -> None:
        """Let go of what the engine holds; it evaluates no more."""


class EmbeddedEngine:
    """regorus in-process: no server, compiled once per policy set.

    regorus engines are unsendable: one dropped on another thread is leaked by PyO3 with an unraisable
    RuntimeError. An engine left in a frame of an exception's traceback is freed by the cyclic collector
    when something keeps the exception (`raise ... from exc` does), on whichever thread collects: so the
    engine is dropped in its thread, by `close()` and at the end of `evaluate`, whatever is raised.
    """

    name = "embedded"

    def __init__(self, policy_set: PolicySet) -> None:
        import regorus  # imported here so `--help` stays fast

        engine = regorus.Engine()
        self._packages = rule_packages(policy_set)
        for module in policy_set.modules:
            try:
                engine.add_policy(module.path, module.text)
            except RuntimeError as exc:
                error = rego_error(exc)
                del engine  # unsendable: never left for the collector of another thread (see the class)
                raise error from exc
        self._engine: Any = engine

    def evaluate(self, input_doc: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        if self._engine is None:
            raise PolicyError("the embedded engine was closed")
        engine = self._engine.clone()
        try:
            engine.set_input_json(encode_input(input_doc))
            found: dict[str, dict[str, list[dict[str, Any]]]] = {}
            # Ask for deny and warn only: evaluating `data.dra` whole would also serialise every helper rule.
            for package in self._packages:
                sets: dict[str, list[dict[str, Any]]] = {}
                for name in ("deny", "warn"):
                    try:
                        answer = json.loads(engine.eval_query_as_json(rego_ref([*package, name])))
                    except RuntimeError as exc:
                        raise rego_error(exc) from exc
                    results = answer.get("result") or []
                    sets[name] = list(results[0]["expressions"][0]["value"]) if results else []
                found[".".join(package)] = sets
            return found
        finally:
            del engine  # not left in this frame for a traceback to keep

    def close(self) -> None:
        self._engine = None  # dropped here, in the thread that closes


def _waivers(objects: Sequence[dict[str, Any]]) -> dict[str, dict[str, str]]:
    """{object ref: {rule id: reason}} from waiver annotations on the checked objects."""
    waivers: dict[str, dict[str, str]] = {}
    for obj in objects:
        annotations = (obj.get("metadata") or {}).get("annotations") or {}
        for key, value in annotations.items():
            if key.startswith(WAIVER_PREFIX):
                waivers.setdefault(obj["_dra"]["ref"], {})[key.removeprefix(WAIVER_PREFIX)] = str(
                    value
                ).strip()
    return waivers


def evaluate(engine: Engine, policy_set: PolicySet, input_doc: dict[str, Any]) -> list[Finding]:
    """Run the policies and apply waivers; a waiver without a reason is itself a denial."""
    raw = engine.evaluate(input_doc)
    objects = [*input_doc["objects"], *input_doc["base_objects"]]
    # A deleted object is only in the base; its waiver can only be there. The head version wins otherwise.
    waivers = {**_waivers(input_doc["base_objects"]), **_waivers(input_doc["objects"])}
    findings: set[Finding] = set()
    by_ref = {obj["_dra"]["ref"]: obj["_dra"] for obj in objects}
    for package, sets in raw.items():
        default_rule = policy_set.rule_of_package.get(package, package.removeprefix("dra."))
        for severity in ("deny", "warn"):
            for violation in sets.get(severity, []):
                if not isinstance(violation, dict):
                    violation = {"msg": str(violation)}
                rule = str(violation.get("rule") or default_rule)
                ref = str(violation.get("ref") or "")
                reason = waivers.get(ref, {}).get(rule)
                findings.add(
                    Finding(
                        rule=rule,
                        severity="deny" if severity == "deny" else "warn",
                        msg=str(violation.get("msg") or ""),
                        ref=ref,
                        path=str(violation.get("path") or ""),
                        line=int(violation.get("line") or 0),
                        waived=reason or None,
                        via=str(by_ref.get(ref, {}).get("rendered_by") or ""),
                    )
                )
    for ref, rules in waivers.items():
        for rule, reason in rules.items():
            if not reason:
                where = by_ref.get(ref, {})
                findings.add(
                    Finding(
                        rule="waiver-reason",
                        severity="deny",
                        msg=f"waiver annotation {WAIVER_PREFIX}{rule} needs a reason as its value",
                        ref=ref,
                        path=str(where.get("path", "")),
                        line=int(where.get("line", 0)),
                    )
                )
    return sorted(findings, key=lambda f: (f.path, f.line, f.rule, f.ref, f.msg))


WAIVER_RULE = RuleInfo(
    id="waiver-reason",
    title="Waivers need a reason",
    description="A policy.dra-gitops.io/waive-<rule> annotation must give the waiver's reason as its value.",
    severity="deny",
    source="reconciler/policy/engine.py",
)
