"""The `gate-settings` rule: a change is judged by the gate's settings on the protected side (pure).

The settings that decide how a revision is judged live in the repository itself: the policies' `params`,
the config's `paths` and `exclude`, the charts' `canaryFor`, and the waiver annotations
(`policy.dra-gitops.io/waive-<rule>`) on the objects. A change must not loosen them and profit in the same
commit, so a revision is judged by the settings of its base (a pull request's base, the loop's last good
revision), and the change's own new settings take effect from the next commit. Each setting the change
loosens, and each waiver it adds or edits, is a `gate-settings` finding that names it: a denial where a
person reviews the change (the pull-request check; the base's `gate_settings_deny: false` makes it a
warning), a warning where a merged commit is delivered (the loop, `apply`). Tightening is silent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model.objects import Manifest
from reconciler.policy.result import Finding, RuleInfo, Severity

WAIVER_PREFIX = "policy.dra-gitops.io/waive-"

GATE_RULE = RuleInfo(
    id="gate-settings",
    title="The gate's settings change only on their own",
    description="A revision is judged by the settings of its base (params, paths, exclude, canaryFor, "
    "waivers); a change that loosens one, or adds or edits a waiver, is named so that its review is explicit "
    "(a denial in the pull-request check, a warning when a merged commit is delivered). The new setting "
    "takes effect from the next commit: land it first.",
    severity="deny",
    source="reconciler/policy/gate.py",
)


def _turned_off(old: Any, new: Any) -> bool:
    return bool(old) and not bool(new)


def _turned_on(old: Any, new: Any) -> bool:
    return not bool(old) and bool(new)


# How a param loosens the gate; a param not listed loosens it by any change (its direction is unknown).
PARAM_LOOSENS: dict[str, Callable[[Any, Any], bool]] = {
    "capacity_deny": _turned_off,
    "capacity_deny_at_risk": _turned_off,
    "canary_warn_unrestricted": _turned_off,
    "deprecated_versions_warn": _turned_off,
    "gate_settings_deny": _turned_off,
    "recreate_immutable": _turned_on,
}


@dataclass(frozen=True)
class GateSettings:
    """The settings of one revision that decide how it is judged."""

    params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    paths: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    canary_for: Mapping[str, str] = dataclasses.field(default_factory=dict)  # release -> its main release
    where: str = ""  # the repository config, `dra-gitops.yaml`


@dataclass(frozen=True)
class SettingChange:
    setting: str  # `params.capacity_deny`, `exclude`, `charts[gpu-canary].canaryFor`, `waiver …`
    old: str
    new: str
    loosens: bool

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def setting_changes(
    base: GateSettings,
    head: GateSettings,
    defaults: Mapping[str, Any],
    newly_skipped: Sequence[str] = (),
) -> list[SettingChange]:
    """Every setting the head changes from the base; `loosens` says whether it makes the gate laxer.

    `paths` and `exclude` loosen it only when they leave out manifest files the base's settings checked
    (`newly_skipped`): what they drop from the desired state is judged as deleted anyway."""
    out: list[SettingChange] = []
    for name in sorted(set(base.params) | set(head.params)):
        old, new = base.params.get(name, defaults.get(name)), head.params.get(name, defaults.get(name))
        if old != new:
            loosens = PARAM_LOOSENS.get(name, lambda _o, _n: True)(old, new)
            out.append(SettingChange(f"params.{name}", _show(old), _show(new), loosens))
    hidden = bool(newly_skipped)
    added = [p for p in head.exclude if p not in base.exclude]
    if added or len(head.exclude) != len(base.exclude):
        old_exclude, new_exclude = _show(list(base.exclude)), _show(list(head.exclude))
        out.append(SettingChange("exclude", old_exclude, new_exclude, bool(added) and hidden))
    if set(head.paths) != set(base.paths):
        out.append(SettingChange("paths", _show(list(base.paths)), _show(list(head.paths)), hidden))
    for release in sorted(set(base.canary_for) | set(head.canary_for)):
        old, new = base.canary_for.get(release, ""), head.canary_for.get(release, "")
        if old != new:
            out.append(SettingChange(f"charts[{release}].canaryFor", _show(old), _show(new), True))
    return out


def _listed(paths: Sequence[str]) -> str:
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _show(value: Any) -> str:
    if value is None or value == "":
        return "(unset)"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def new_waivers(head: Sequence[Manifest], base: Sequence[Manifest]) -> dict[tuple[str, str], str]:
    """{(object ref, rule): reason} of the waivers the head adds or whose reason it edits."""
    before = {(str(m.ref), rule): reason for m in base for rule, reason in _waivers_of(m).items()}
    return {
        (str(m.ref), rule): reason
        for m in head
        for rule, reason in _waivers_of(m).items()
        if before.get((str(m.ref), rule)) != reason
    }


def _waivers_of(manifest: Manifest) -> dict[str, str]:
    annotations = (manifest.body.get("metadata") or {}).get("annotations") or {}
    return {
        str(key).removeprefix(WAIVER_PREFIX): str(value).strip()
        for key, value in annotations.items()
        if isinstance(key, str) and key.startswith(WAIVER_PREFIX)
    }


@dataclass(frozen=True)
class GateVerdict:
    findings: list[Finding]  # the `gate-settings` findings
    judged: list[Finding]  # the policies' findings, new waivers not honoured
    changes: list[SettingChange]


def judge_gate(
    findings: Sequence[Finding],
    base: GateSettings,
    head: GateSettings,
    head_manifests: Sequence[Manifest],
    base_manifests: Sequence[Manifest],
    *,
    defaults: Mapping[str, Any],
    reviewed: bool,
    newly_skipped: Sequence[str] = (),
) -> GateVerdict:
    """The gate's view of a change: its setting changes, the findings they bring, and the policies'
    findings with the waivers the change itself adds set aside (they count from the next commit)."""
    changes = setting_changes(base, head, defaults, newly_skipped)
    waivers = new_waivers(head_manifests, base_manifests)
    deny = reviewed and bool({**defaults, **base.params}.get("gate_settings_deny", True))
    severity: Severity = "deny" if deny else "warn"
    where = head.where or base.where
    out = [
        Finding(
            GATE_RULE.id,
            severity,
            f"{change.setting}: {change.old} → {change.new} loosens the gate"
            + (f" (leaves out {_listed(newly_skipped)})" if change.setting in ("paths", "exclude") else "")
            + f"; this change is judged by the base's setting ({change.old}): land the setting in a commit "
            "of its own first, it takes effect from the next commit",
            where,
            where,
            1 if where else 0,
        )
        for change in changes
        if change.loosens
    ]
    by_ref = {str(m.ref): m for m in head_manifests}
    for (ref, rule), reason in sorted(waivers.items()):
        manifest = by_ref.get(ref)
        out.append(
            Finding(
                GATE_RULE.id,
                severity,
                f"{ref}: waiver {WAIVER_PREFIX}{rule} added in this change (reason: {reason or '(none)'}); "
                f"it is honoured from the next commit once reviewed: land the waiver first",
                ref,
                manifest.path if manifest else "",
                manifest.line if manifest else 0,
                via=manifest.rendered_by if manifest else "",
            )
        )
    judged = [
        dataclasses.replace(f, waived=None) if f.waived is not None and (f.ref, f.rule) in waivers else f
        for f in findings
    ]
    return GateVerdict(out, judged, changes)
