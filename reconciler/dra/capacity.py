"""The `capacity` part of the policy input: do the claims a change adds fit the free devices?

Pure: takes the plan, the desired objects and the live objects, and answers per claim the change will
create (a ResourceClaim, or one generated claim per replica of a workload using a template), with the
numbers the report shows. The `capacity` Rego rule turns "does-not-fit" into a warning or a denial;
"unknown" (a CEL selector we cannot evaluate) never becomes a finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.dra.simulate import simulate
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan


def _replicas(body: dict[str, Any], ready_nodes: int) -> int:
    """How many pods a workload runs (how many generated claims it needs per pod claim)."""
    kind = body.get("kind")
    spec = body.get("spec") if isinstance(body.get("spec"), dict) else {}
    assert isinstance(spec, dict)
    if kind == "DaemonSet":
        return ready_nodes
    if kind == "Job":
        return int(spec.get("parallelism") or 1)
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        value = spec.get("replicas")
        return int(value) if isinstance(value, int) else 1
    return 1


def _ready_nodes(live: Sequence[Manifest]) -> int:
    count = 0
    for manifest in live:
        if manifest.kind != "Node":
            continue
        conditions = (manifest.body.get("status") or {}).get("conditions") or []
        if any(
            c.get("type") == "Ready" and c.get("status") == "True" for c in conditions if isinstance(c, dict)
        ):
            count += 1
    return count


def capacity_input(plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> dict[str, Any]:
    """`input.capacity`: per new claim its outcome, with the location of the object that causes it."""
    templates = {
        (m.ref.namespace, m.ref.name): m.body
        for m in [*live, *head]  # the head version of a template wins over the live one
        if m.kind == "ResourceClaimTemplate" and dra.is_dra_group(m.api_version)
    }
    classes = {
        m.ref.name: m.body
        for m in [*live, *head]
        if m.kind == "DeviceClass" and dra.is_dra_group(m.api_version)
    }
    slices = [m.body for m in live if m.kind == "ResourceSlice"]
    live_claims = [m.body for m in live if m.kind == "ResourceClaim"]
    ready_nodes = _ready_nodes(live)

    live_by_ref = {m.ref: m for m in live}
    new_claims: list[dict[str, Any]] = []
    causes: list[Manifest] = []
    for change in plan.changes:
        new = change.new
        if new is None or change.op == "delete":
            continue
        # What runs now is the live object when there is one (a plan without a base calls it a create).
        running = live_by_ref.get(new.ref) or change.old
        if new.kind == "ResourceClaim" and dra.is_dra_group(new.api_version):
            if running is None:
                new_claims.append(new.body)
                causes.append(new)
            continue
        pod_spec = dra.pod_spec_of(new.body)
        if pod_spec is None:
            continue
        count = _replicas(new.body, ready_nodes)
        if running is not None:
            # Only pods added by the change need new devices (rolling-update surge aside).
            count = max(0, count - _replicas(running.body, ready_nodes))
        for pod_claim in dra.pod_claims(pod_spec):
            template = templates.get((new.ref.namespace, pod_claim.template or ""))
            if template is None:
                continue  # a missing template is claim-refs' finding, not a capacity question
            for index in range(count):
                claim = {
                    "apiVersion": template.get("apiVersion"),
                    "kind": "ResourceClaim",
                    "metadata": {
                        "name": f"{new.ref.name}-{pod_claim.name}-{index}",
                        "namespace": new.ref.namespace,
                    },
                    "spec": dra.claim_spec_of(template) or {},
                }
                new_claims.append(claim)
                causes.append(new)
    if not new_claims:
        return {"claims": [], "totals": {}}
    result = simulate(slices, classes, live_claims, new_claims)
    # A driver the change installs has published nothing yet: its claims cannot be judged, not "0 free".
    installing = {dra.workload_driver(m.body) for m in head if dra.is_driver_workload(m.body)} - {None}
    claims = []
    for claim, cause, outcome in zip(new_claims, causes, result.claims, strict=True):
        state, reason = outcome.outcome, outcome.reason
        if state == "does-not-fit" and outcome.total == 0:
            drivers = {dra.class_driver(classes.get(name) or {}) for name in dra.requested_classes(claim)}
            pending = sorted(d for d in drivers & installing if d)
            if pending:
                state = "unknown"
                reason = f"driver {', '.join(pending)} is installed by this change; no devices published yet"
        claims.append(
            {
                "ref": str(cause.ref),
                "path": cause.path,
                "line": cause.line,
                "claim": outcome.ref,
                "outcome": state,
                "needed": outcome.needed,
                "free": outcome.free,
                "total": outcome.total,
                "reason": reason,
            }
        )
    return {"claims": claims, "totals": result.to_dict()["totals"]}
