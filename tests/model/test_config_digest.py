"""The content digest of a driver's ConfigMaps and Secrets, and the live copies a check without a revision
compares with (reconciler/model/dra_drivers.py, reconciler/model/compare.py)."""

from __future__ import annotations

from typing import Any

from reconciler.model.compare import live_driver_base
from reconciler.model.dra_drivers import CONTENT_DIGEST, config_content_digest, content_digest_only
from reconciler.model.objects import Manifest, ref_of


def _secret(**content: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "auth", "namespace": "gpu"}, **content}


def _manifest(body: dict[str, Any]) -> Manifest:
    return Manifest(body=body, ref=ref_of(body), path="driver.yaml", line=3)


def test_a_secret_written_as_string_data_digests_as_the_data_the_server_stores() -> None:
    written = _secret(stringData={"token": "abc"})
    stored = _secret(data={"token": "YWJj"}, type="Opaque")
    assert config_content_digest(written) == config_content_digest(stored)
    assert config_content_digest(written) != config_content_digest(_secret(data={"token": "YWJk"}))


def test_the_digest_only_copy_keeps_no_value() -> None:
    copy = content_digest_only(_secret(data={"token": "YWJj"}, metadata={"name": "auth", "namespace": "gpu"}))
    assert copy == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "auth", "namespace": "gpu"},
        CONTENT_DIGEST: config_content_digest(_secret(stringData={"token": "abc"})),
    }
    assert config_content_digest(copy) == copy[CONTENT_DIGEST]


def test_live_config_is_the_base_same_content_unchanged_other_content_an_update() -> None:
    head = _manifest(_secret(stringData={"token": "abc"}))
    same = _manifest(content_digest_only(_secret(data={"token": "YWJj"})))
    other = _manifest(content_digest_only(_secret(data={"token": "eHl6"})))
    assert live_driver_base([head], [], [same]) == [head]
    (base,) = live_driver_base([head], [], [other])
    assert base.body is other.body and (base.path, base.line) == ("driver.yaml", 3)
    assert live_driver_base([head], [], []) == []  # not read live: judged as created
