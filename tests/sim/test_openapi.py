"""``/openapi/v2`` of the simulated API server over real HTTP, in the two forms clients ask for."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from helpers import widget_crd
from kubernetes import client

from reconciler.sim.server import SimCluster

PROTOBUF = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"


@pytest.fixture
def api(sim_cluster: SimCluster) -> Iterator[client.ApiClient]:
    cfg = client.Configuration(host=sim_cluster.url)
    cfg.retries = 0
    c = client.ApiClient(cfg)
    yield c
    c.close()


def get(api: client.ApiClient, path: str, accept: str) -> tuple[bytes, str]:
    resp = api.call_api("GET", api.configuration.host + path, header_params={"Accept": accept})
    return resp.read(), str(resp.getheader("Content-Type"))


def wire_fields(data: bytes) -> list[tuple[int, bytes]]:
    """The (field number, payload) pairs of a protobuf message holding only length-delimited fields."""

    def varint(at: int) -> tuple[int, int]:
        value = shift = 0
        while True:
            byte = data[at]
            value |= (byte & 0x7F) << shift
            at += 1
            shift += 7
            if not byte & 0x80:
                return value, at

    out, at = [], 0
    while at < len(data):
        key, at = varint(at)
        assert key & 7 == 2, f"wire type {key & 7} at byte {at}"
        length, at = varint(at)
        out.append((key >> 3, data[at : at + length]))
        at += length
    return out


def test_openapi_v2_json_names_every_served_kind(api: client.ApiClient) -> None:
    body, ctype = get(api, "/openapi/v2", "application/json")
    assert ctype == "application/json"
    doc = json.loads(body)
    assert doc["swagger"] == "2.0"
    gvks = {
        (g["group"], g["version"], g["kind"])
        for d in doc["definitions"].values()
        for g in d["x-kubernetes-group-version-kind"]
    }
    assert {
        ("", "v1", "ConfigMap"),
        ("apps", "v1", "DaemonSet"),
        ("resource.k8s.io", "v1", "ResourceClaim"),
    } <= gvks
    assert doc["definitions"]["io.k8s.api.apps.v1.Deployment"]["x-kubernetes-group-version-kind"] == [
        {"group": "apps", "kind": "Deployment", "version": "v1"}
    ]


def test_openapi_v2_protobuf_is_a_gnostic_document(api: client.ApiClient) -> None:
    body, ctype = get(api, "/openapi/v2", PROTOBUF)
    # Go's mime parser (kubectl) refuses an "@" in the answer's type; a real server drops it too
    assert ctype == "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"
    document = dict(wire_fields(body))
    assert document[1] == b"2.0"
    definitions = {}
    for number, named in wire_fields(document[9]):
        assert number == 1
        pair = dict(wire_fields(named))
        definitions[pair[1].decode()] = pair[2]
    schema = wire_fields(definitions["io.k8s.api.resource.v1.ResourceClaim"])
    extensions = [dict(wire_fields(payload)) for number, payload in schema if number == 31]
    assert [e[1] for e in extensions] == [b"x-kubernetes-group-version-kind"]
    any_value = dict(wire_fields(extensions[0][2]))
    assert yaml.safe_load(any_value[2]) == [
        {"group": "resource.k8s.io", "kind": "ResourceClaim", "version": "v1"}
    ]


def test_openapi_v2_lists_a_custom_kind_once_its_crd_is_established(
    api: client.ApiClient, sim_cluster: SimCluster
) -> None:
    crd: dict[str, Any] = widget_crd("gpu.example.com")
    created = api.call_api(
        "POST",
        api.configuration.host + "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        header_params={"Content-Type": "application/json"},
        body=crd,
    )
    assert created.status == 201
    body, _ = get(api, "/openapi/v2", "application/json")
    definition = json.loads(body)["definitions"]["com.example.gpu.v1.Widget"]
    assert definition["x-kubernetes-group-version-kind"] == [
        {"group": "gpu.example.com", "kind": "Widget", "version": "v1"}
    ]
