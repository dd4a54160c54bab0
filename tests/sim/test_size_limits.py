"""The size limits a real control plane enforces, answered as kube-apiserver and etcd answer them.

Over HTTP with the official client against a SimCluster: request bodies over 3 MiB (413), stored objects
over etcd's 1.5 MiB (500 "etcdserver: request is too large"), ConfigMap and Secret data over 1 MiB (422).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest
from helpers import widget_crd
from kubernetes import client
from kubernetes.client.rest import ApiException

from reconciler.sim.server import SimCluster

MIB = 1024 * 1024
WIDGETS = widget_crd()


@pytest.fixture
def api() -> Iterator[client.ApiClient]:
    with SimCluster() as cluster:
        cfg = client.Configuration(host=cluster.url)
        cfg.retries = 0
        api = client.ApiClient(cfg)
        client.CoreV1Api(api).create_namespace({"metadata": {"name": "big"}})
        yield api
        api.close()


def _refused(call: Any, *args: Any, **kwargs: Any) -> tuple[int, dict[str, Any]]:
    with pytest.raises(ApiException) as exc:
        call(*args, **kwargs)
    return exc.value.status, json.loads(exc.value.body)


def test_a_request_body_over_3_mib_is_413_and_the_connection_serves_on(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    body = {"metadata": {"name": "huge"}, "data": {"x": "y" * (3 * MIB)}}
    status, answer = _refused(core.create_namespaced_config_map, "big", body)
    assert status == 413
    assert answer["reason"] == "RequestEntityTooLarge"
    assert answer["message"] == "Request entity too large: limit is 3145728"
    assert "details" not in answer
    # PUT and PATCH read their bodies through the same limit
    core.create_namespaced_config_map("big", {"metadata": {"name": "small"}})
    status, _ = _refused(core.patch_namespaced_config_map, "small", "big", {"data": {"x": "y" * (3 * MIB)}})
    assert status == 413
    assert core.read_namespaced_config_map("small", "big").data is None


def test_configmap_data_over_1_mib_is_refused_by_validation(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    at_limit = {"metadata": {"name": "at-limit"}, "data": {"a": "x" * (MIB - 10), "b": "y" * 10}}
    core.create_namespaced_config_map("big", at_limit)
    over = {"metadata": {"name": "over"}, "data": {"a": "x" * (MIB - 10), "b": "y" * 11}}
    status, answer = _refused(core.create_namespaced_config_map, "big", over)
    assert status == 422
    assert answer["reason"] == "Invalid"
    assert (
        answer["message"] == 'ConfigMap "over" is invalid: []: Too long: may not be more than 1048576 bytes'
    )
    assert answer["details"]["causes"] == [
        {
            "reason": "FieldValueTooLong",
            "message": "Too long: may not be more than 1048576 bytes",
            "field": "[]",
        }
    ]
    # binaryData counts with its decoded bytes, and an update is held to the same limit
    binary = base64.b64encode(b"\0" * 11).decode()
    status, _ = _refused(core.patch_namespaced_config_map, "at-limit", "big", {"binaryData": {"c": binary}})
    assert status == 422
    assert core.read_namespaced_config_map("at-limit", "big").binary_data is None


def test_secret_data_over_1_mib_is_refused_and_string_data_counts(api: client.ApiClient) -> None:
    core = client.CoreV1Api(api)
    over = {"metadata": {"name": "over"}, "stringData": {"a": "x" * (MIB + 1)}}
    status, answer = _refused(core.create_namespaced_secret, "big", over)
    assert status == 422
    assert answer["message"] == 'Secret "over" is invalid: data: Too long: may not be more than 1048576 bytes'
    assert answer["details"]["causes"][0]["field"] == "data"
    # stringData is write-only: the server stores it in data, base64-encoded
    made = core.create_namespaced_secret("big", {"metadata": {"name": "ok"}, "stringData": {"k": "v"}})
    assert made.data == {"k": base64.b64encode(b"v").decode()}
    raw = core.read_namespaced_secret("ok", "big", _preload_content=False)
    assert "stringData" not in json.loads(raw.data)


def test_an_object_over_etcds_limit_is_refused_with_etcds_error_and_not_stored(api: client.ApiClient) -> None:
    """A 2 MB custom resource passes the 3 MiB body limit but not etcd's 1.5 MiB request limit."""
    client.ApiextensionsV1Api(api).create_custom_resource_definition(WIDGETS)
    custom = client.CustomObjectsApi(api)
    widget = {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w"},
        "spec": {"blob": "z" * (2 * MIB)},
    }
    status, answer = _refused(
        custom.create_namespaced_custom_object, "example.com", "v1", "big", "widgets", widget
    )
    assert status == 500
    assert answer["message"] == "etcdserver: request is too large"
    assert "reason" not in answer and "details" not in answer
    with pytest.raises(ApiException) as missing:
        custom.get_namespaced_custom_object("example.com", "v1", "big", "widgets", "w")
    assert missing.value.status == 404
    # a dry run never reaches etcd, so it passes
    custom.create_namespaced_custom_object("example.com", "v1", "big", "widgets", widget, dry_run="All")
    # an update that makes the object too large leaves the stored one as it was
    small = {**widget, "spec": {"blob": "small"}}
    made = custom.create_namespaced_custom_object("example.com", "v1", "big", "widgets", small)
    status, answer = _refused(
        custom.patch_namespaced_custom_object,
        "example.com",
        "v1",
        "big",
        "widgets",
        "w",
        {"spec": {"blob": "z" * (2 * MIB)}},
    )
    assert (status, answer["message"]) == (500, "etcdserver: request is too large")
    kept = custom.get_namespaced_custom_object("example.com", "v1", "big", "widgets", "w")
    assert kept["metadata"]["resourceVersion"] == made["metadata"]["resourceVersion"]
    assert kept["spec"] == {"blob": "small"}
