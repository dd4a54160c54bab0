"""The ``/openapi/v2`` document of the simulated kube-apiserver, as JSON or as gnostic protobuf.

kubectl fetches ``/openapi/v2`` before validating a ``kind: List`` file and asks only for the protobuf form
(``application/com.github.proto-openapi.spec.v2@v1.0+protobuf``); clients that ask for JSON get JSON, as
from a real server. Each served kind gets a definition named as a real server names it, carrying its
``x-kubernetes-group-version-kind``. The definitions publish no properties: kubectl then treats every object
as valid on its side and the server validates fields itself (``fieldValidation``), as it does on a real
server that supports it.
"""

from __future__ import annotations

from typing import Any

import yaml

from reconciler.sim.storebase import Obj

# what a real server answers a request for application/com.github.proto-openapi.spec.v2@v1.0+protobuf
# with: Go's mime parser refuses the "@" of the requested type
PROTOBUF_V2_CONTENT_TYPE = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

# the Go package a real server names the definitions of a built-in group after
_BUILTIN_PACKAGES = {
    "": "io.k8s.api.core",
    "apiextensions.k8s.io": "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions",
}


def definition_name(group: str, version: str, kind: str) -> str:
    """``io.k8s.api.apps.v1.Deployment`` for built-ins, ``com.example.gpu.v1.Widget`` for custom kinds."""
    package = _BUILTIN_PACKAGES.get(group)
    if package is None:
        if group.endswith(".k8s.io") or "." not in group:
            package = "io.k8s.api." + group.split(".")[0]
        else:
            package = ".".join(reversed(group.split(".")))
    return f"{package}.{version}.{kind}"


def v2_document(kinds: list[tuple[str, str, str]], kube_version: str) -> Obj:
    """The Swagger 2.0 document for the served (group, version, kind) triples."""
    definitions: Obj = {}
    for group, version, kind in kinds:
        definitions[definition_name(group, version, kind)] = {
            "description": f"{kind} ({group or 'core'}/{version}); fields are validated by the server.",
            "x-kubernetes-group-version-kind": [{"group": group, "kind": kind, "version": version}],
        }
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes", "version": kube_version},
        "paths": {},
        "definitions": definitions,
    }


# ---------------------------------------------------------------- protobuf (gnostic openapi_v2.Document)


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2): strings and embedded messages."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode()) if value else b""


def _named_any(name: str, value: Any) -> bytes:
    # NamedAny{name=1, value=2: Any{yaml=2}}: extensions travel as YAML text
    return _text(1, name) + _field(2, _text(2, yaml.safe_dump(value, default_flow_style=False)))


def _schema(definition: Obj) -> bytes:
    # Schema: description=4, vendor_extension=31
    out = _text(4, str(definition.get("description", "")))
    for key, value in definition.items():
        if key.startswith("x-"):
            out += _field(31, _named_any(key, value))
    return out


def v2_protobuf(document: Obj) -> bytes:
    """``document`` (from :func:`v2_document`) encoded as a gnostic ``openapi_v2.Document``."""
    info = document["info"]
    definitions = b"".join(
        _field(1, _text(1, name) + _field(2, _schema(schema)))  # Definitions{NamedSchema=1}
        for name, schema in document["definitions"].items()
    )
    return (
        _text(1, document["swagger"])
        + _field(2, _text(1, info["title"]) + _text(2, info["version"]))
        + _field(8, b"")  # paths
        + _field(9, definitions)
    )
