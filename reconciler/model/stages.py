"""Which stage an object is applied in (docs/operator-guide.md, "What one pass does")."""

from __future__ import annotations

from typing import Any

from reconciler.errors import ManifestError
from reconciler.model import dra
from reconciler.model.objects import Manifest

STAGE_ANNOTATION = "dra-gitops.io/stage"

FOUNDATION, DRIVERS, CLASSES, CLAIMS, WORKLOADS = range(5)
STAGE_NAMES = {
    FOUNDATION: "foundation",
    DRIVERS: "drivers",
    CLASSES: "classes",
    CLAIMS: "claims",
    WORKLOADS: "workloads",
}

FOUNDATION_KINDS = frozenset(
    {
        "Namespace",
        "CustomResourceDefinition",
        "ServiceAccount",
        "Role",
        "RoleBinding",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Secret",
        "PriorityClass",
        "RuntimeClass",
    }
)
CLASS_KINDS = frozenset({"DeviceClass", "ResourceClass", "DeviceTaintRule"})
CLAIM_KINDS = frozenset({"ResourceClaimTemplate", "ResourceClaim"})


def default_stage(body: dict[str, Any]) -> int:
    kind = body.get("kind", "")
    group_is_dra = dra.is_dra_group(str(body.get("apiVersion", "")))
    if kind in FOUNDATION_KINDS:
        return FOUNDATION
    if group_is_dra and kind in CLASS_KINDS:
        return CLASSES
    if group_is_dra and kind in CLAIM_KINDS:
        return CLAIMS
    if dra.is_driver_workload(body):
        return DRIVERS
    return WORKLOADS


def stage_of(manifest: Manifest) -> int:
    """The stage of an object: the `dra-gitops.io/stage` annotation if present, else by kind."""
    override = manifest.annotations.get(STAGE_ANNOTATION)
    if override is None:
        return default_stage(manifest.body)
    try:
        stage = int(str(override).strip())
    except ValueError:
        stage = -1
    if stage not in STAGE_NAMES:
        raise ManifestError(
            f"{manifest.ref}: annotation {STAGE_ANNOTATION} must be a number from 0 to 4, not {override!r}",
            where=manifest.where,
        )
    return stage


def step_of(manifest: Manifest, stage: int) -> int:
    """Order inside a stage: canary driver workloads go first (step 1a of the drivers stage)."""
    return 0 if stage == DRIVERS and dra.canary_for(manifest.body) else 1


def stage_label(stage: int, step: int = 1) -> str:
    suffix = "a" if stage == DRIVERS and step == 0 else ""
    return f"{stage}{suffix} {STAGE_NAMES[stage]}"
