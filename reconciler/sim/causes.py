"""The causes of an Invalid error, worded as a real kube-apiserver words them, and the name checks.

A cause is ``{"reason", "message", "field"}`` (``FieldValueRequired``, ``FieldValueInvalid``, ...);
:func:`invalid` joins them into the Invalid error's message (``Kind.group "name" is invalid: ...``).
Object names and label keys and values are checked with apimachinery's messages. Used by
:mod:`reconciler.sim.validation`, :mod:`reconciler.sim.admission_policies` and the store.
"""

from __future__ import annotations

import json
import re
from typing import Any

from reconciler.sim.storebase import Invalid, ResourceType

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


def duplicate(field: str, value: Any) -> dict[str, str]:
    return {
        "reason": "FieldValueDuplicate",
        "message": f"Duplicate value: {json.dumps(value)}",
        "field": field,
    }


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


def name_style(rtype: ResourceType) -> str:
    if rtype.group == "" and rtype.plural == "namespaces":
        return "label"
    if rtype.group == "" and rtype.plural == "services":
        return "dns1035"
    if rtype.group == "rbac.authorization.k8s.io":
        return "path"
    return "subdomain"


def check_labels(labels: Any, field: str) -> list[dict[str, str]]:
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
