"""The size limits of a real control plane, refused with the answers kube-apiserver and etcd give.

* A request body over kube-apiserver's ``--max-request-body-bytes`` (default 3 MiB): 413
  ``RequestEntityTooLarge``, ``Request entity too large: limit is 3145728`` (its ``limitedReadBody``).
* An object whose stored form is over etcd's ``--max-request-bytes`` (default 1.5 MiB): etcd refuses the
  transaction with ``etcdserver: request is too large`` and kube-apiserver passes that on as a 500 whose
  Status has no reason (``ErrorToAPIStatus`` of an error that is not an API status). A dry run never
  reaches etcd, so it passes. The sim measures the object's compact JSON plus its etcd key: what
  kube-apiserver stores for custom resources; built-in kinds are stored as protobuf, a little smaller,
  so the sim refuses them a little earlier than a real server would.
* ConfigMap and Secret data over 1 MiB in total (``core.MaxSecretSize``): validation's 422, worded as
  ``field.TooLong`` words it since Kubernetes 1.32 (``Too long: may not be more than 1048576 bytes``;
  earlier releases said ``must have at most 1048576 bytes``). A ConfigMap's cause has the field ``[]``
  (the path of the whole object), a Secret's ``data``.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from reconciler.sim.storebase import Obj, ResourceType, StoreError

MAX_REQUEST_BODY_BYTES = 3 * 1024 * 1024
ETCD_MAX_REQUEST_BYTES = 1536 * 1024
MAX_DATA_BYTES = 1024 * 1024  # core.MaxSecretSize, for ConfigMaps too


class RequestTooLarge(StoreError):
    """etcd refused the write: a 500 without a reason, as kube-apiserver answers it."""

    reason = ""
    code = 500


def body_too_large_message() -> str:
    return f"Request entity too large: limit is {MAX_REQUEST_BODY_BYTES}"


def check_stored_size(rtype: ResourceType, key: tuple[str, str], encoded: bytes) -> None:
    """Raise :class:`RequestTooLarge` when the object under its etcd key is more than etcd takes."""
    ns, name = key
    etcd_key = "/registry/" + "/".join(p for p in (rtype.group, rtype.plural, ns, name) if p)
    if len(encoded) + len(etcd_key) > ETCD_MAX_REQUEST_BYTES:
        raise RequestTooLarge("etcdserver: request is too large")


def too_long(field: str, limit: int) -> dict[str, str]:
    return {
        "reason": "FieldValueTooLong",
        "message": f"Too long: may not be more than {limit} bytes",
        "field": field,
    }


def merge_string_data(obj: Obj) -> None:
    """A Secret's write-only ``stringData`` goes into ``data`` (base64), as the server's conversion does."""
    string_data = obj.pop("stringData", None)
    if isinstance(string_data, dict) and string_data:
        data = obj.get("data")
        if not isinstance(data, dict):
            data = obj["data"] = {}
        for k, v in string_data.items():
            data[k] = base64.b64encode(str(v).encode()).decode()


def _decoded_len(value: Any) -> int:
    try:
        return len(base64.b64decode(str(value), validate=True))
    except (binascii.Error, ValueError):
        return len(str(value)) * 3 // 4


def check_data_size(kind: str, obj: Obj) -> list[dict[str, str]]:
    """The cause for ConfigMap (``kind="ConfigMap"``) or Secret data over 1 MiB, else none."""
    total = 0
    data = obj.get("data")
    if isinstance(data, dict):
        for v in data.values():
            total += len(str(v).encode()) if kind == "ConfigMap" else _decoded_len(v)
    binary = obj.get("binaryData") if kind == "ConfigMap" else None
    if isinstance(binary, dict):
        total += sum(_decoded_len(v) for v in binary.values())
    if total <= MAX_DATA_BYTES:
        return []
    return [too_long("[]" if kind == "ConfigMap" else "data", MAX_DATA_BYTES)]
