"""The policy check pipeline: load → plan → input document → engine → findings.

This module wires the pure core to the edges (local files, Git, through `delivery/desired.py`); the CLI
only parses flags and prints.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.delivery.desired import DesiredState, load_directories, load_git_revisions
from reconciler.delivery.findings import (
    DUPLICATE_RULE,
    NAMESPACE_RULE,
    NOTHING_CHECKED_RULE,
    duplicate_findings,
    missing_namespaces,
    nothing_checked,
    uninspected_objects,
)
from reconciler.model import dra
from reconciler.model.compare import live_driver_base
from reconciler.model.loader import Limits, LoadResult
from reconciler.model.objects import Manifest
from reconciler.model.openapi import minor_of
from reconciler.model.plan import Plan, compute_plan
from reconciler.model.repoconfig import DriverDecl, allowing_no_nodes, declared_workloads, rollouts_of
from reconciler.model.scope import unknown_scope_notice
from reconciler.policy.engine import WAIVER_RULE, EmbeddedEngine, Engine, PolicySet, evaluate, load_policy_set
from reconciler.policy.gate import GATE_RULE, GateSettings, judge_gate
from reconciler.policy.inputdoc import ClusterFacts, Revision, build_input
from reconciler.policy.result import ChangeSummary, CheckResult, Finding
from reconciler.policy.schema import SCHEMA_RULE, SchemaCheck, check_schemas
from reconciler.render.capabilities import Capabilities, cluster_capabilities, from_served

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


@dataclass
class CheckOptions:
    policy_dirs: Sequence[Path] = ()
    opa_url: str | None = None
    opa_token: str | None = None
    opa_timeout: float = 30.0  # seconds to wait for the OPA server's answer
    params: dict[str, Any] = field(default_factory=dict)
    limits: Limits = field(default_factory=Limits)
    progress: Progress = _quiet
    # The Kubernetes release whose schemas validate the objects ("1.36"); the cluster's when one is given,
    # else the newest bundled.
    kubernetes_version: str | None = None
    # A person reviews what is checked (a pull request): a loosened gate setting is a denial; a merged
    # commit the loop or `apply` delivers was reviewed: a warning.
    reviewed: bool = True


@dataclass
class CheckRun:
    """A finished check: the result to report plus what was computed on the way (for plan output, timings)."""

    result: CheckResult
    plan: Plan
    input_doc: dict[str, Any]
    timings: dict[str, float]


def make_engine(policy_set: PolicySet, options: CheckOptions) -> Engine:
    if options.opa_url:
        from reconciler.policy.opa import OpaServerEngine

        return OpaServerEngine(
            options.opa_url, policy_set, token=options.opa_token, timeout=options.opa_timeout
        )
    return EmbeddedEngine(policy_set)


def _merge_params(*layers: dict[str, Any]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for layer in layers:
        merged.update(layer)
    return merged


def _kubernetes_version(
    options: CheckOptions, repo_params: dict[str, Any], cluster: ClusterFacts | None
) -> str | None:
    """The release objects are validated for: the cluster's, the one asked for, the repository config's
    `kubernetes_version` param, else None (the newest bundled)."""
    if cluster is not None and cluster.version:
        return cluster.version
    asked = (
        options.kubernetes_version
        or options.params.get("kubernetes_version")
        or repo_params.get("kubernetes_version")
    )
    return str(asked) if asked is not None else None


def run_check(
    head: LoadResult,
    base: LoadResult | None,
    options: CheckOptions,
    *,
    revision: Revision = Revision(),
    base_sha: str | None = None,
    repo_params: dict[str, Any] | None = None,
    cluster: ClusterFacts | None = None,
    timings: dict[str, float] | None = None,
    drivers: tuple[DriverDecl, ...] = (),
    pruned: Sequence[Manifest] = (),
    settings: tuple[GateSettings, GateSettings] | None = None,
) -> CheckRun:
    """Policies judge `head` (against `base`, or the cluster's driver workloads); driver workloads are
    recognized with what the desired state, the base and the cluster say of drivers (`dra.hints_of`).
    With `settings` (the base's, the head's), the head is judged by the base's and `gate-settings` names
    what the change loosens."""
    seen = [*head.manifests, *(base.manifests if base else ()), *(cluster.objects if cluster else ())]
    hints = dra.hints_of(seen, declared_workloads(drivers), allowing_no_nodes(drivers), rollouts_of(drivers))
    with dra.driver_hints(hints):
        return _run_check(
            head,
            base,
            options,
            revision=revision,
            base_sha=base_sha,
            repo_params=repo_params,
            cluster=cluster,
            timings=timings,
            pruned=pruned,
            settings=settings,
        )


def _run_check(
    head: LoadResult,
    base: LoadResult | None,
    options: CheckOptions,
    *,
    revision: Revision = Revision(),
    base_sha: str | None = None,
    repo_params: dict[str, Any] | None = None,
    cluster: ClusterFacts | None = None,
    timings: dict[str, float] | None = None,
    pruned: Sequence[Manifest] = (),
    settings: tuple[GateSettings, GateSettings] | None = None,
) -> CheckRun:
    """Judge `head` (against `base` when given). Without a base, `pruned` are the live objects a one-shot
    apply will delete (what it last delivered and `head` no longer has): the policies see them as deletes."""
    timings = dict(timings or {})
    started = time.perf_counter()
    base_manifests = _policy_base(head, base, cluster, pruned)
    plan = compute_plan(base_manifests, head.manifests)
    timings["plan"] = time.perf_counter() - started
    options.progress(
        f"policy input: {len(head.manifests)} object(s), {_against(base, base_sha, base_manifests, plan)}"
    )
    notice = unknown_scope_notice(head.unscoped, cluster is not None)
    if notice:
        options.progress(notice)
    if settings is not None:
        # The protected side's settings judge the change: its own take effect from the next commit.
        repo_params = dict(settings[0].params)
    judged = _judge(head, base, base_manifests, plan, options, revision, base_sha, repo_params or {}, cluster)
    timings.update(judged.timings)
    started = time.perf_counter()
    findings, changed = judged.findings, judged.changed
    gate = None
    if settings is not None and base is not None:
        gate = judge_gate(
            findings,
            *settings,
            head.manifests,
            base.manifests,
            defaults=judged.policy_set.params,
            reviewed=options.reviewed,
            newly_skipped=_left_out_by_settings(head, base),
        )
        findings = gate.judged + gate.findings
    # What the API server would reject comes first: no policy verdict matters for an object it refuses.
    findings = judged.schema.findings + findings + duplicate_findings(head, base)
    findings += nothing_checked(head)
    findings += [f for f in missing_namespaces(head, cluster) if changed is None or f.ref in changed]
    timings["policy"] = timings.get("policy", 0.0) + time.perf_counter() - started
    rules = dict(judged.policy_set.rules)
    for extra in (WAIVER_RULE, DUPLICATE_RULE, SCHEMA_RULE, NOTHING_CHECKED_RULE, NAMESPACE_RULE, GATE_RULE):
        if any(f.rule == extra.id for f in findings):
            rules[extra.id] = extra
    result = CheckResult(
        findings=findings,
        rules=rules,
        objects_checked=len(head.manifests),
        files_checked=len(head.files),
        changes=ChangeSummary(plan.count("create"), plan.count("update"), plan.count("delete")),
        engine=judged.engine,
        skipped=list(head.skipped),
        capacity=judged.capacity,
        uninspected=uninspected_objects(head.manifests, changed),
        unvalidated=judged.schema.unvalidated,
        settings_changes=[c.to_json() for c in gate.changes] if gate is not None else [],
    )
    options.progress(
        f"policy: {len(result.denials)} denied, {len(result.warnings)} warnings ({judged.engine} engine)"
    )
    return CheckRun(result=result, plan=plan, input_doc=judged.input_doc, timings=timings)


def _policy_base(
    head: LoadResult, base: LoadResult | None, cluster: ClusterFacts | None, pruned: Sequence[Manifest]
) -> list[Manifest]:
    """What the change is judged against: the base revision, else what the cluster runs of the head's driver
    workloads (and the config their pods read) plus what a one-shot apply will prune."""
    if base is not None:
        return base.manifests
    live = live_driver_base(head.manifests, cluster.objects, cluster.configs) if cluster is not None else []
    return live + list(pruned)


def _against(
    base: LoadResult | None, base_sha: str | None, base_manifests: list[Manifest], plan: Plan
) -> str:
    """The policies' view (head against base) in the progress line, not what an apply would write."""
    if base is not None:
        base_name = f"base {base_sha[:12]}" if base_sha else "the base"
        return f"changes against {base_name}: {plan.summary()}"
    if base_manifests:
        return f"no base revision; driver workloads and pruned objects against the cluster: {plan.summary()}"
    return "no base revision"


@dataclass
class _Judged:
    """What the policy engine and the offline schema said of a change."""

    policy_set: PolicySet
    engine: str
    input_doc: dict[str, Any]
    findings: list[Finding]
    schema: SchemaCheck
    changed: set[str] | None  # the refs a check against a base judges; None: every object
    capacity: dict[str, Any] | None
    timings: dict[str, float]


def _judge(
    head: LoadResult,
    base: LoadResult | None,
    base_manifests: list[Manifest],
    plan: Plan,
    options: CheckOptions,
    revision: Revision,
    base_sha: str | None,
    repo_params: dict[str, Any],
    cluster: ClusterFacts | None,
) -> _Judged:
    """The policy input built and evaluated, and every object validated against its schema. The engine is
    closed in this thread whatever is raised (a regorus engine is unsendable: see EmbeddedEngine)."""
    timings: dict[str, float] = {}
    started = time.perf_counter()
    policy_set = load_policy_set(options.policy_dirs)
    engine = make_engine(policy_set, options)
    try:
        params = _merge_params(policy_set.params, repo_params, options.params)
        capacity = None
        changed_classes: list[dict[str, Any]] = []
        if cluster is not None:
            # Imported here: it brings the CEL runtime, which an offline check never needs (~0.1 s at start-up).
            from reconciler.dra.capacity import capacity_input
            from reconciler.dra.class_change import class_changes

            capacity = capacity_input(plan, head.manifests, cluster.objects)
            changed_classes = class_changes(head.manifests, cluster.objects)
        input_doc = build_input(
            head=head.manifests,
            base=base_manifests,
            plan=plan,
            revision=revision,
            base_sha=base_sha,
            has_base=base is not None,
            cluster=cluster,
            capacity=capacity,
            class_changes=changed_classes,
            params=params,
        )
        timings["input"] = time.perf_counter() - started
        started = time.perf_counter()
        changed = {str(change.ref) for change in plan.changes} if base is not None else None
        version = _kubernetes_version(options, repo_params, cluster)
        schema = check_schemas(head.manifests, minor_of(version), changed)
        timings["schema"] = time.perf_counter() - started
        started = time.perf_counter()
        findings = evaluate(engine, policy_set, input_doc)
    finally:
        engine.close()
    if changed is not None:
        # A check against a base judges the change: objects it leaves untouched keep their old findings out.
        findings = [f for f in findings if f.ref in changed]
    timings["policy"] = time.perf_counter() - started
    return _Judged(policy_set, engine.name, input_doc, findings, schema, changed, capacity, timings)


def recognized_drivers(run: CheckRun) -> list[str]:
    """One line per driver workload of the checked state: what it is and how it was recognized (`-v`)."""
    lines = []
    for obj in run.input_doc.get("objects") or []:
        info = obj["_dra"]
        if info["role"] not in ("driver", "driver-canary"):
            continue
        what = "canary " if info["role"] == "driver-canary" else ""
        lines.append(
            f"driver workload {info['ref']} ({what}{info['driver_role']}, driver {info['driver'] or '?'}): "
            f"recognized by {info['recognized_by']}"
        )
    return lines


def _capabilities_of(cluster: ClusterFacts | None) -> Capabilities | None:
    """Charts render with the `.Capabilities` of the cluster the check is given."""
    if cluster is None:
        return None
    return from_served(cluster.version, cluster.kinds, f"the cluster, {cluster.version}", cluster.namespaced)


def _skipped_note(loaded: LoadResult) -> str:
    count = len(loaded.skipped)
    return f" ({count} manifest file{'s' if count != 1 else ''} skipped)" if count else ""


@contextmanager
def collection_paused() -> Iterator[None]:
    """The cyclic garbage collector held off while a check loads and judges its objects: 10,000 manifests
    make some hundred thousand dicts and lists that live to the end of the check, and each collection of
    the older generations walks them all again (~0.2 s of a 2.5 s check, for nothing: they are no garbage).
    Reference counting still frees what is dropped; cycles left are collected once the block ends."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def check_paths(
    paths: Sequence[Path], options: CheckOptions, cluster: ClusterFacts | None = None
) -> CheckRun:
    """`check PATH...`: the desired state on disk against no base (everything is a create)."""
    with collection_paused():
        return _check_paths(paths, options, cluster)


def _check_paths(paths: Sequence[Path], options: CheckOptions, cluster: ClusterFacts | None) -> CheckRun:
    started = time.perf_counter()
    with cluster_capabilities(_capabilities_of(cluster)):
        desired = load_directories(paths, options.limits)
    head = desired.manifests
    timings = {"load": time.perf_counter() - started}
    options.progress(
        f"loaded {len(head.manifests)} objects from {len(head.files)} files{_skipped_note(head)}"
    )
    return run_check(
        head,
        None,
        options,
        repo_params=desired.params,
        cluster=cluster,
        timings=timings,
        drivers=desired.drivers,
    )


def check_git(
    repo_dir: Path,
    base_rev: str,
    head_rev: str,
    subdir: str,
    options: CheckOptions,
    cluster: ClusterFacts | None = None,
) -> CheckRun:
    """`check --repo --base --head`: both trees read from Git, only the change between them judged."""
    with collection_paused():
        return _check_git(repo_dir, base_rev, head_rev, subdir, options, cluster)


def _check_git(
    repo_dir: Path,
    base_rev: str,
    head_rev: str,
    subdir: str,
    options: CheckOptions,
    cluster: ClusterFacts | None,
) -> CheckRun:
    started = time.perf_counter()
    with cluster_capabilities(_capabilities_of(cluster)):
        head_state, base_state = load_git_revisions(repo_dir, [head_rev, base_rev], subdir, options.limits)
    head, base = head_state.manifests, base_state.manifests
    timings = {"load": time.perf_counter() - started}
    head_sha, base_sha = head_state.revision.sha or "", base_state.revision.sha or ""
    options.progress(
        f"loaded {len(head.manifests)} objects at {head_sha[:12]}, {len(base.manifests)} at {base_sha[:12]}"
        f"{_skipped_note(head)}"
    )
    return run_check(
        head,
        base,
        options,
        revision=head_state.revision,
        base_sha=base_sha,
        repo_params=head_state.params,
        cluster=cluster,
        timings=timings,
        drivers=head_state.drivers,
        settings=_settings(base_state, head_state),
    )


def _left_out_by_settings(head: LoadResult, base: LoadResult) -> list[str]:
    """Manifest files the head's `paths` or `exclude` leave out that the base's checked."""
    by_settings = ("outside the `paths` of", "matches the `exclude` of")
    left_out = {f.path for f in head.skipped if f.reason.startswith(by_settings)}
    return sorted(left_out - {f.path for f in base.skipped})


def _settings(base: DesiredState, head: DesiredState) -> tuple[GateSettings, GateSettings] | None:
    """The gate settings of a base and a head read from Git (None when either is not)."""
    if base.settings is None or head.settings is None:
        return None
    return base.settings, head.settings
