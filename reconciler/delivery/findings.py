"""The check's own findings beside the policies': objects defined twice, a check that checked nothing, a
namespace nothing creates, and the objects whose pod specs no policy reads."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.model.dra_workloads import uninspected_pod_specs
from reconciler.model.loader import LoadResult
from reconciler.model.objects import Manifest
from reconciler.policy.inputdoc import ClusterFacts
from reconciler.policy.result import Finding, RuleInfo, Uninspected

DUPLICATE_RULE = RuleInfo(
    id="duplicate-object",
    title="Each object defined once",
    description="An object defined twice with the same content is applied once and reported as a warning; "
    "with different content the load fails, naming both places.",
    severity="warn",
    source="reconciler/model/duplicates.py",
)


NOTHING_CHECKED_RULE = RuleInfo(
    id="nothing-checked",
    title="A check checks something",
    description="A check that loads no object while manifest files were skipped fails: a wrong `paths`, "
    "an `exclude` that matches everything or a kustomization no one renders would otherwise pass silently.",
    severity="deny",
    source="reconciler/delivery/check.py",
)


def nothing_checked(head: LoadResult) -> list[Finding]:
    """A denial when no object was loaded but manifest files were skipped, with every reason."""
    if head.manifests or not head.skipped:
        return []
    reasons = "; ".join(f"{s.path} ({s.reason})" for s in head.skipped[:10])
    more = f"; and {len(head.skipped) - 10} more" if len(head.skipped) > 10 else ""
    msg = (
        f"nothing was checked: 0 objects loaded while {len(head.skipped)} manifest file(s) were skipped: "
        f"{reasons}{more}"
    )
    first = head.skipped[0]
    return [Finding(NOTHING_CHECKED_RULE.id, "deny", msg, "(no object)", first.path, 1)]


NAMESPACE_RULE = RuleInfo(
    id="namespace-missing",
    title="Every namespace exists or is created",
    description="An object in a namespace that no manifest of the change creates and the cluster lacks "
    "would fail the dry-run with 'not found': a chart release needs `createNamespace: true` (as helm "
    "--create-namespace) or a Namespace manifest.",
    severity="deny",
    source="reconciler/delivery/check.py",
)


def missing_namespaces(head: LoadResult, cluster: ClusterFacts | None) -> list[Finding]:
    """With cluster data: a denial per namespace no manifest creates and the cluster lacks (its first object)."""
    if cluster is None:
        return []
    known = {
        m.ref.name for m in [*head.manifests, *cluster.objects] if m.kind == "Namespace" and not m.ref.group
    }
    findings: dict[str, Finding] = {}
    for m in head.manifests:
        namespace = m.ref.namespace
        if not namespace or namespace in known or namespace in findings:
            continue
        fix = "add a Namespace manifest"
        if m.rendered_by.startswith("release "):
            release = m.rendered_by.split(" ")[1]
            fix = f"set `createNamespace: true` on release {release} in `charts`, or {fix}"
        msg = f"{m.ref}: namespace {namespace} is created by no manifest and the cluster has none; {fix}"
        findings[namespace] = Finding(
            NAMESPACE_RULE.id, "deny", msg, str(m.ref), m.path, m.line, via=m.rendered_by
        )
    return list(findings.values())


def duplicate_findings(head: LoadResult, base: LoadResult | None) -> list[Finding]:
    """A warning per repeated object of `head`; against a base, only repeats the change brings in."""
    known = {d.ref for d in base.duplicates} if base is not None else set()
    return [
        Finding(DUPLICATE_RULE.id, "warn", d.message, str(d.ref), d.path, d.line)
        for d in head.duplicates
        if d.ref not in known
    ]


def uninspected_objects(manifests: Sequence[Manifest], judged: set[str] | None) -> list[Uninspected]:
    """Objects of the desired state (those `judged`, against a base) whose pod specs no policy reads."""
    found = []
    for m in manifests:
        if judged is not None and str(m.ref) not in judged:
            continue
        specs = uninspected_pod_specs(m.body)
        if specs:
            found.append(Uninspected(str(m.ref), m.path, m.line, m.api_version, m.kind, tuple(specs)))
    return found
