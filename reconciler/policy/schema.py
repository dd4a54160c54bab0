"""The `schema` rule: what the API server would reject, found offline before any policy runs.

Every object of the change is validated against the official schema of its apiVersion and kind for the
target Kubernetes release (reconciler/model/openapi.py); custom objects against the CRD of the same desired
state. Each violation is a denial at the object's `path:line` naming the field.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.model.objects import Manifest
from reconciler.model.openapi import Schemas, crd_schemas, schemas_for, validate_custom
from reconciler.policy.result import Finding, RuleInfo, Unvalidated

SCHEMA_RULE = RuleInfo(
    id="schema",
    title="Valid for the API server",
    description="Each object matches the official OpenAPI schema of its apiVersion and kind for the target "
    "Kubernetes version (the cluster's, the repository config's, or the newest bundled): unknown fields, "
    "missing required fields, wrong types and unsupported values are what kube-apiserver would reject. "
    "Custom objects are checked against their CRD when it is in the desired state.",
    severity="deny",
    source="reconciler/model/openapi.py",
)


@dataclass(frozen=True)
class SchemaCheck:
    findings: list[Finding]
    unvalidated: list[Unvalidated]
    release: int  # the minor version of 1.x whose schemas were used


def check_schemas(manifests: Sequence[Manifest], minor: int | None, judged: set[str] | None) -> SchemaCheck:
    """The `schema` findings of `manifests` (only those `judged`, against a base) for Kubernetes 1.`minor`."""
    schemas = schemas_for(minor)
    custom = crd_schemas([m.body for m in manifests if m.kind == "CustomResourceDefinition"])
    findings: list[Finding] = []
    unvalidated: list[Unvalidated] = []
    for manifest in manifests:
        if judged is not None and str(manifest.ref) not in judged:
            continue
        findings.extend(_findings(manifest, schemas, custom, unvalidated))
    return SchemaCheck(findings, unvalidated, schemas.release)


def _findings(
    manifest: Manifest, schemas: Schemas, custom: dict[str, dict[str, Any]], unvalidated: list[Unvalidated]
) -> list[Finding]:
    api_version, kind = manifest.api_version, manifest.kind
    violations = schemas.validate(manifest.body)
    what = f"{api_version} {kind}, Kubernetes 1.{schemas.release}"
    if violations is None:
        crd = custom.get(f"{api_version}/{kind}")
        if crd is None:
            group = manifest.ref.group
            builtin = "." not in group or group.endswith(".k8s.io")
            reason = (
                f"no bundled schema of {api_version} {kind} for Kubernetes 1.{schemas.release}"
                if builtin
                else "a custom resource whose CustomResourceDefinition is not in the desired state"
            )
            unvalidated.append(
                Unvalidated(str(manifest.ref), manifest.path, manifest.line, api_version, kind, reason)
            )
            return []
        violations = validate_custom(manifest.body, crd)
        what = f"{api_version} {kind}, its CRD in this change"
    return [
        Finding(
            SCHEMA_RULE.id,
            "deny",
            f"{manifest.ref}: {violation} ({what})",
            str(manifest.ref),
            manifest.path,
            manifest.line,
            via=manifest.rendered_by,
        )
        for violation in violations
    ]
