"""Defaults and validation of admissionregistration.k8s.io/v1 ValidatingAdmissionPolicy and its binding.

What a kube-apiserver v1.36 writes and refuses on create and update, with its messages. The policies are
stored, not enforced: the simulated server runs no CEL admission.
"""

from __future__ import annotations

from typing import Any

from reconciler.sim.causes import required, unsupported

FAILURE_POLICIES = ("Fail", "Ignore")
MATCH_POLICIES = ("Equivalent", "Exact")
VALIDATION_ACTIONS = ("Audit", "Deny", "Warn")
Cause = dict[str, str]


def _default_match(match: Any) -> None:
    if not isinstance(match, dict):
        return
    match.setdefault("namespaceSelector", {})
    match.setdefault("objectSelector", {})
    match.setdefault("matchPolicy", "Equivalent")
    for key in ("resourceRules", "excludeResourceRules"):
        for rule in match.get(key) or []:
            if isinstance(rule, dict):
                rule.setdefault("scope", "*")


def _check_match(match: dict[str, Any], field: str) -> list[Cause]:
    policy = match.get("matchPolicy")
    return [] if policy in MATCH_POLICIES else [unsupported(f"{field}.matchPolicy", policy, MATCH_POLICIES)]


def check_policy(spec: Any) -> list[Cause]:
    """Default a ValidatingAdmissionPolicy's spec in place; the causes it is invalid for."""
    if not isinstance(spec, dict):
        return [required("spec")]
    spec.setdefault("failurePolicy", "Fail")
    causes: list[Cause] = []
    if spec["failurePolicy"] not in FAILURE_POLICIES:
        causes.append(unsupported("spec.failurePolicy", spec["failurePolicy"], FAILURE_POLICIES))
    match = spec.get("matchConstraints")
    if not isinstance(match, dict):
        causes.append(required("spec.matchConstraints"))
    else:
        _default_match(match)
        if not match.get("resourceRules"):
            causes.append(required("spec.matchConstraints.resourceRules"))
        causes.extend(_check_match(match, "spec.matchConstraints"))
    if not spec.get("validations") and not spec.get("auditAnnotations"):
        causes.append(
            required("spec.validations", "validations or auditAnnotations must contain at least one item")
        )
    for i, validation in enumerate(spec.get("validations") or []):
        if not isinstance(validation, dict) or not validation.get("expression"):
            causes.append(required(f"spec.validations[{i}].expression"))
    return causes


def check_binding(spec: Any) -> list[Cause]:
    """Default a ValidatingAdmissionPolicyBinding's spec in place; the causes it is invalid for."""
    if not isinstance(spec, dict):
        return [required("spec")]
    causes: list[Cause] = []
    if not spec.get("policyName"):
        causes.append(required("spec.policyName"))
    actions = spec.get("validationActions")
    if not actions:
        causes.append(required("spec.validationActions", "at least one validation action is required"))
    for i, action in enumerate(actions if isinstance(actions, list) else []):
        if action not in VALIDATION_ACTIONS:
            causes.append(unsupported(f"spec.validationActions[{i}]", action, VALIDATION_ACTIONS))
    match = spec.get("matchResources")
    if isinstance(match, dict):
        _default_match(match)
        causes.extend(_check_match(match, "spec.matchResources"))
    return causes
