"""Server-side defaulting and validation, with the messages a real kube-apiserver returns.

Only what our code (and the contract suite) can observe is modelled: object names, the DRA enums and
immutability rules, the defaults the server writes into ResourceClaim requests, and the pod-level
claim references that a server dry-run rejects. The causes and their wording, and the name and label
checks, are :mod:`reconciler.sim.causes`; ValidatingAdmissionPolicies are
:mod:`reconciler.sim.admission_policies`.
"""

from __future__ import annotations

from typing import Any

from reconciler.sim import admission_policies, limits, workload_validation
from reconciler.sim.causes import (
    check_labels,
    check_name,
    duplicate,
    invalid,
    invalid_value,
    name_style,
    not_found,
    required,
    unsupported,
)
from reconciler.sim.podspec_defaults import default_pod_spec
from reconciler.sim.storebase import Obj, ResourceType

ALLOCATION_MODES = ("All", "ExactCount")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")


# ---------------------------------------------------------------------- DRA defaulting and validation


def default_claim_spec(spec: Any) -> None:
    """The server's defaults inside ResourceClaim requests: allocationMode ExactCount and count 1."""
    if not isinstance(spec, dict):
        return
    devices = spec.get("devices")
    if not isinstance(devices, dict):
        return
    for req in devices.get("requests") or []:
        if not isinstance(req, dict):
            continue
        targets = [req.get("exactly")] + list(req.get("firstAvailable") or [])
        for t in targets:
            if isinstance(t, dict):
                t.setdefault("allocationMode", "ExactCount")
                if t["allocationMode"] == "ExactCount":
                    t.setdefault("count", 1)


def check_claim_spec(spec: Any, path: str) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(spec, dict):
        return causes
    devices = spec.get("devices") or {}
    if not isinstance(devices, dict):
        return causes
    names: set[str] = set()
    for i, req in enumerate(devices.get("requests") or []):
        rpath = f"{path}.devices.requests[{i}]"
        if not isinstance(req, dict):
            continue
        name = req.get("name")
        if not name:
            causes.append(required(f"{rpath}.name"))
        else:
            causes.extend(check_name(str(name), f"{rpath}.name", "label"))
            if name in names:
                causes.append(duplicate(f"{rpath}.name", name))
            names.add(str(name))
        has_exactly, has_first = req.get("exactly") is not None, bool(req.get("firstAvailable"))
        if has_exactly == has_first:
            causes.append(required(rpath, "exactly one of `exactly` or `firstAvailable` is required"))
        subs = [(f"{rpath}.exactly", req.get("exactly"))] if has_exactly else []
        subs += [(f"{rpath}.firstAvailable[{j}]", s) for j, s in enumerate(req.get("firstAvailable") or [])]
        for spath, sub in subs:
            if not isinstance(sub, dict):
                continue
            if not sub.get("deviceClassName"):
                causes.append(required(f"{spath}.deviceClassName"))
            else:
                causes.extend(check_name(str(sub["deviceClassName"]), f"{spath}.deviceClassName"))
            mode = sub.get("allocationMode")
            if mode is not None and mode not in ALLOCATION_MODES:
                causes.append(unsupported(f"{spath}.allocationMode", mode, ALLOCATION_MODES))
            count = sub.get("count")
            if mode == "ExactCount" and isinstance(count, int) and count <= 0:
                causes.append(invalid_value(f"{spath}.count", count, "must be greater than zero"))
    return causes


def check_slice(spec: Any) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(spec, dict):
        return [required("spec")]
    if not spec.get("driver"):
        causes.append(required("spec.driver"))
    pool = spec.get("pool")
    if not isinstance(pool, dict) or not pool.get("name"):
        causes.append(required("spec.pool.name"))
    selectors = [k for k in ("nodeName", "nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k)]
    if len(selectors) != 1:
        causes.append(
            required(
                "spec",
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required",
            )
            if not selectors
            else invalid_value(
                "spec",
                '{"' + '", "'.join(selectors) + '"}',
                "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                "`perDeviceNodeSelection` is required, but multiple fields are set",
            )
        )
    seen: set[str] = set()
    for i, dev in enumerate(spec.get("devices") or []):
        if isinstance(dev, dict):
            name = str(dev.get("name") or "")
            if not name:
                causes.append(required(f"spec.devices[{i}].name"))
            elif name in seen:
                causes.append(duplicate(f"spec.devices[{i}].name", name))
            seen.add(name)
    return causes


# ---------------------------------------------------------------------- pods


def check_pod_spec(spec: Any, path: str) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(spec, dict):
        return causes
    claim_names: list[str] = []
    for i, rc in enumerate(spec.get("resourceClaims") or []):
        if not isinstance(rc, dict):
            continue
        claim_names.append(str(rc.get("name") or ""))
        n = sum(1 for k in ("resourceClaimName", "resourceClaimTemplateName") if rc.get(k))
        if n != 1:
            causes.append(
                invalid_value(
                    f"{path}.resourceClaims[{i}]",
                    '"object"',
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
                if n
                else required(
                    f"{path}.resourceClaims[{i}]",
                    "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`",
                )
            )
    for ckey in ("initContainers", "containers"):
        for i, c in enumerate(spec.get(ckey) or []):
            if not isinstance(c, dict):
                continue
            if not c.get("name"):
                causes.append(required(f"{path}.{ckey}[{i}].name"))
            if not c.get("image") and ckey == "containers":
                causes.append(required(f"{path}.{ckey}[{i}].image"))
            for j, cl in enumerate(((c.get("resources") or {}).get("claims")) or []):
                name = cl.get("name") if isinstance(cl, dict) else None
                if name not in claim_names:
                    causes.append(
                        not_found(
                            f"{path}.{ckey}[{i}].resources.claims[{j}]",
                            name,
                            "must be one of the names in pod.spec.resourceClaims"
                            + (": " + ", ".join(claim_names) if claim_names else " which is empty"),
                        )
                    )
    return causes


POD_TEMPLATE_PATHS = {
    ("apps", "deployments"): "spec.template.spec",
    ("apps", "replicasets"): "spec.template.spec",
    ("apps", "daemonsets"): "spec.template.spec",
    ("apps", "statefulsets"): "spec.template.spec",
    ("batch", "jobs"): "spec.template.spec",
    ("batch", "cronjobs"): "spec.jobTemplate.spec.template.spec",
}


def _dig(obj: Any, path: str) -> Any:
    for part in path.split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _default_workload(plural: str, spec: Any) -> None:
    """The defaults a real server writes into workload specs that our code reads back."""
    if not isinstance(spec, dict):
        return
    if plural in ("deployments", "replicasets", "statefulsets"):
        spec.setdefault("replicas", 1)
    if plural in ("deployments", "statefulsets", "daemonsets"):
        spec.setdefault("revisionHistoryLimit", 10)
    if plural == "deployments":
        spec.setdefault("progressDeadlineSeconds", 600)
        spec.setdefault(
            "strategy",
            {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}},
        )
    if plural == "daemonsets":
        spec.setdefault(
            "updateStrategy", {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
        )
    if plural == "jobs":
        spec.setdefault("backoffLimit", 6)
        spec.setdefault("completions", 1)
        spec.setdefault("parallelism", 1)


# ---------------------------------------------------------------------- admission plugins

NOT_READY_TAINT_KEY = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT_KEY = "node.kubernetes.io/unreachable"
DEFAULT_TOLERATION_SECONDS = 300


def default_toleration_seconds(spec: Any) -> None:
    """DefaultTolerationSeconds: tolerate not-ready/unreachable NoExecute for 300 s unless the pod says."""
    if not isinstance(spec, dict):
        return
    tolerations = spec.get("tolerations") or []
    for key in (NOT_READY_TAINT_KEY, UNREACHABLE_TAINT_KEY):
        if any(
            isinstance(t, dict)
            and t.get("effect") in ("NoExecute", "", None)
            and (t.get("key") == key or (not t.get("key") and t.get("operator") == "Exists"))
            for t in tolerations
        ):
            continue
        tolerations = [
            *tolerations,
            {
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": DEFAULT_TOLERATION_SECONDS,
            },
        ]
    spec["tolerations"] = tolerations


def taint_new_node(obj: Obj) -> None:
    """TaintNodesByCondition: a new Node is not-ready:NoSchedule until the node lifecycle controller
    sees its kubelet report Ready."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return
    taints = spec.get("taints") or []
    if not any(isinstance(t, dict) and t.get("key") == NOT_READY_TAINT_KEY for t in taints):
        spec["taints"] = [*taints, {"key": NOT_READY_TAINT_KEY, "effect": "NoSchedule"}]


# ---------------------------------------------------------------------- admission entry point


def admit(rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
    """Default ``obj`` in place and validate it (``old`` is the stored object on update)."""
    md = obj.get("metadata") or {}
    name = str(md.get("name") or "")
    causes: list[dict[str, str]] = []
    if not name:
        causes.append(required("metadata.name", "name or generateName is required"))
    elif old is None:
        causes.extend(check_name(name, "metadata.name", name_style(rtype)))
    causes.extend(check_labels(md.get("labels"), "metadata.labels"))
    key = (rtype.group, rtype.plural)
    spec = obj.get("spec")
    if key == ("", "namespaces"):
        obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
        if old is None:
            obj["status"] = {"phase": "Active"}
        md.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    elif key == ("", "pods"):
        causes.extend(check_pod_spec(spec, "spec"))
        if old is None:
            obj.setdefault("status", {}).setdefault("phase", "Pending")
            default_pod_spec(spec, pod=True)
            if isinstance(spec, dict):
                default_toleration_seconds(spec)
    elif key == ("", "nodes"):
        if old is None:
            taint_new_node(obj)
    elif key == ("", "configmaps"):
        causes.extend(limits.check_data_size("ConfigMap", obj))
    elif key == ("", "secrets"):
        limits.merge_string_data(obj)
        causes.extend(limits.check_data_size("Secret", obj))
    elif key in POD_TEMPLATE_PATHS:
        _default_workload(key[1], spec)
        default_pod_spec(_dig(obj, POD_TEMPLATE_PATHS[key]), pod=False)
        if workload_validation.validates_selector(key[1], obj):
            causes.extend(workload_validation.check_selector(key[1], spec))
        causes.extend(check_pod_spec(_dig(obj, POD_TEMPLATE_PATHS[key]), POD_TEMPLATE_PATHS[key]))
        if old is not None and workload_validation.validates_selector(key[1], obj):
            causes.extend(workload_validation.check_update(key[1], spec, old.get("spec")))
    elif key == ("resource.k8s.io", "resourceclaims"):
        default_claim_spec(spec)
        causes.extend(check_claim_spec(spec, "spec"))
        if old is not None and spec != old.get("spec"):
            causes.append(invalid_value("spec", None, "field is immutable"))
            causes[-1]["message"] = 'Invalid value: "object": field is immutable'
    elif key == ("resource.k8s.io", "resourceclaimtemplates"):
        inner = spec.get("spec") if isinstance(spec, dict) else None
        default_claim_spec(inner)
        causes.extend(check_claim_spec(inner, "spec.spec"))
    elif key == ("resource.k8s.io", "resourceslices"):
        causes.extend(check_slice(spec))
    elif key == ("resource.k8s.io", "devicetaintrules"):
        taint = (spec or {}).get("taint") if isinstance(spec, dict) else None
        effect = taint.get("effect") if isinstance(taint, dict) else None
        if effect is None:
            causes.append(required("spec.taint.effect"))
        elif effect not in TAINT_EFFECTS:
            causes.append(unsupported("spec.taint.effect", effect, TAINT_EFFECTS))
    elif key[0] == "admissionregistration.k8s.io":
        if key[1] == "validatingadmissionpolicies":
            causes.extend(admission_policies.check_policy(spec))
        elif key[1] == "validatingadmissionpolicybindings":
            causes.extend(admission_policies.check_binding(spec))
    if causes:
        raise invalid(rtype, name, causes)
