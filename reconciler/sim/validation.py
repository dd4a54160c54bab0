"""Server-side defaulting and validation, with the messages a real kube-apiserver returns.

Only what our code (and the contract suite) can observe is modelled: object names, the DRA enums and
immutability rules, the defaults the server writes into ResourceClaim requests, and the pod-level
claim references that a server dry-run rejects.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.sim.podspec_defaults import default_pod_spec
from reconciler.sim.store import Invalid, Obj, ResourceType

DNS1123_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN = DNS1123_LABEL + r"(\." + DNS1123_LABEL + ")*"
DNS1035_LABEL = "[a-z]([-a-z0-9]*[a-z0-9])?"
_LABEL_RE = re.compile(f"^{DNS1123_LABEL}$")
_SUBDOMAIN_RE = re.compile(f"^{DNS1123_SUBDOMAIN}$")
_DNS1035_RE = re.compile(f"^{DNS1035_LABEL}$")
_QUALIFIED_NAME_RE = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_LABEL_VALUE_RE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    f"validation is '{DNS1123_SUBDOMAIN}')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    f"validation is '{DNS1123_LABEL}')"
)
DNS1035_MSG = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', "
    f"regex used for validation is '{DNS1035_LABEL}')"
)
ALLOCATION_MODES = ("All", "ExactCount")
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")


# ---------------------------------------------------------------------- causes and the Invalid error


def _fmt_value(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if value is None:
        return "null"
    return '"object"'


def invalid_value(field: str, value: Any, detail: str) -> dict[str, str]:
    return {
        "reason": "FieldValueInvalid",
        "message": f"Invalid value: {_fmt_value(value)}: {detail}",
        "field": field,
    }


def required(field: str, detail: str = "") -> dict[str, str]:
    msg = "Required value" + (f": {detail}" if detail else "")
    return {"reason": "FieldValueRequired", "message": msg, "field": field}


def unsupported(field: str, value: Any, supported: tuple[str, ...]) -> dict[str, str]:
    quoted = ", ".join(json.dumps(s) for s in supported)
    return {
        "reason": "FieldValueNotSupported",
        "message": f"Unsupported value: {_fmt_value(value)}: supported values: {quoted}",
        "field": field,
    }


def not_found(field: str, value: Any, detail: str) -> dict[str, str]:
    return {
        "reason": "FieldValueNotFound",
        "message": f"Not found: {_fmt_value(value)}: {detail}",
        "field": field,
    }


def forbidden(field: str, detail: str) -> dict[str, str]:
    return {"reason": "FieldValueForbidden", "message": f"Forbidden: {detail}", "field": field}


def qualified_kind(rtype: ResourceType) -> str:
    return f"{rtype.kind}.{rtype.group}" if rtype.group else rtype.kind


def invalid(rtype: ResourceType, name: str, causes: list[dict[str, str]]) -> Invalid:
    """An Invalid error whose message reads like the real one (`Kind.group "n" is invalid: ...`)."""
    errs = [f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes]
    body = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    return Invalid(f"{qualified_kind(rtype)} {json.dumps(name)} is invalid: {body}", causes=causes, name=name)


# ---------------------------------------------------------------------- names and metadata


def check_name(name: str, field: str, style: str = "subdomain") -> list[dict[str, str]]:
    if style == "label":
        if len(name) > 63:
            return [invalid_value(field, name, "must be no more than 63 characters")]
        return [] if _LABEL_RE.match(name) else [invalid_value(field, name, LABEL_MSG)]
    if style == "dns1035":
        if len(name) > 63:
            return [invalid_value(field, name, "must be no more than 63 characters")]
        return [] if _DNS1035_RE.match(name) else [invalid_value(field, name, DNS1035_MSG)]
    if style == "path":
        if name in (".", "..") or "/" in name or "%" in name:
            return [invalid_value(field, name, "may not contain '/' or '%'")]
        return []
    if len(name) > 253:
        return [invalid_value(field, name, "must be no more than 253 characters")]
    return [] if _SUBDOMAIN_RE.match(name) else [invalid_value(field, name, SUBDOMAIN_MSG)]


def _name_style(rtype: ResourceType) -> str:
    if rtype.group == "" and rtype.plural == "namespaces":
        return "label"
    if rtype.group == "" and rtype.plural == "services":
        return "dns1035"
    if rtype.group == "rbac.authorization.k8s.io":
        return "path"
    return "subdomain"


def _check_labels(labels: Any, field: str) -> list[dict[str, str]]:
    causes: list[dict[str, str]] = []
    if not isinstance(labels, dict):
        return causes
    for key, value in labels.items():
        causes.extend(_check_qualified_key(str(key), f"{field}"))
        if not isinstance(value, str) or len(value) > 63 or not _LABEL_VALUE_RE.match(value):
            causes.append(
                invalid_value(
                    field,
                    value,
                    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
                    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
                    "'my_value',  or '12345', regex used for validation is "
                    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
                )
            )
    return causes


def _check_qualified_key(key: str, field: str) -> list[dict[str, str]]:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _SUBDOMAIN_RE.match(prefix)):
        return [invalid_value(field, key, "prefix part " + SUBDOMAIN_MSG)]
    if not name or len(name) > 63 or not _QUALIFIED_NAME_RE.match(name):
        return [
            invalid_value(
                field,
                key,
                "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
                "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
                "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            )
        ]
    return []


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
                causes.append(
                    {
                        "reason": "FieldValueDuplicate",
                        "message": f"Duplicate value: {json.dumps(name)}",
                        "field": f"{rpath}.name",
                    }
                )
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
                causes.append(
                    {
                        "reason": "FieldValueDuplicate",
                        "message": f"Duplicate value: {json.dumps(name)}",
                        "field": f"spec.devices[{i}].name",
                    }
                )
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
        causes.extend(check_name(name, "metadata.name", _name_style(rtype)))
    causes.extend(_check_labels(md.get("labels"), "metadata.labels"))
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
    elif key in POD_TEMPLATE_PATHS:
        _default_workload(key[1], spec)
        default_pod_spec(_dig(obj, POD_TEMPLATE_PATHS[key]), pod=False)
        causes.extend(check_pod_spec(_dig(obj, POD_TEMPLATE_PATHS[key]), POD_TEMPLATE_PATHS[key]))
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
        # imported here: that module builds its causes with this one's helpers
        from reconciler.sim import admission_policies

        if key[1] == "validatingadmissionpolicies":
            causes.extend(admission_policies.check_policy(spec))
        elif key[1] == "validatingadmissionpolicybindings":
            causes.extend(admission_policies.check_binding(spec))
    if causes:
        raise invalid(rtype, name, causes)
