"""OPA's REST API as the OPA engine relies on it, over plain HTTP: holds for a real server and the stand-in.

Run with `DRA_GITOPS_OPA_URL` set, these check that the stand-in's model of OPA is OPA's. Module ids live
under `rest-contract/` and packages under `rest_contract.` so nothing here touches dra-gitops' modules.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from opa_standin import call

A = "rest-contract/a.rego"
B = "rest-contract/nested/b.rego"


@pytest.fixture
def server(opa_url: str) -> Iterator[str]:
    yield opa_url
    for module_id in (A, B):
        call(opa_url, "DELETE", f"/v1/policies/{module_id}")


def deny(url: str) -> list[Any]:
    status, answer = call(url, "POST", "/v1/data/rest_contract/p/deny", json.dumps({"input": {}}))
    assert status == 200, answer
    return sorted(answer.get("result", []))


def test_modules_of_one_package_merge_and_a_delete_removes_its_rules(server: str) -> None:
    assert call(server, "PUT", f"/v1/policies/{A}", "package rest_contract.p\n\ndeny contains 1\n")[0] == 200
    assert call(server, "PUT", f"/v1/policies/{B}", "package rest_contract.p\n\ndeny contains 2\n")[0] == 200
    assert deny(server) == [1, 2]
    status, one = call(server, "GET", f"/v1/policies/{B}")
    assert status == 200 and one["result"]["id"] == B and "deny contains 2" in one["result"]["raw"]
    listed = {p["id"]: p["raw"] for p in call(server, "GET", "/v1/policies")[1]["result"]}
    assert listed[A].startswith("package rest_contract.p") and B in listed
    assert call(server, "DELETE", f"/v1/policies/{B}")[0] == 200
    assert deny(server) == [1]
    status, missing = call(server, "DELETE", f"/v1/policies/{B}")
    assert status == 404 and missing["code"] == "resource_not_found"
    assert call(server, "GET", f"/v1/policies/{B}")[0] == 404


def test_a_module_conflicting_with_another_of_its_package_is_refused(server: str) -> None:
    assert call(server, "PUT", f"/v1/policies/{A}", "package rest_contract.p\n\ndefault x := 1\n")[0] == 200
    for text in (
        "package rest_contract.p\n\ndefault x := 2\n",  # two defaults
        "package rest_contract.p\n\nx contains 2\n",  # multi-value against single-value
        "package rest_contract.p\n\nx(a) := a\n",  # a function against a rule
        "package rest_contract.p.x\n\ny := 1\n",  # a package where a rule is
    ):
        status, answer = call(server, "PUT", f"/v1/policies/{B}", text)
        assert status == 400, (text, answer)
        assert answer["errors"][0]["code"] == "rego_type_error", answer
    assert call(server, "GET", f"/v1/policies/{B}")[0] == 404  # a refused module is not stored
    status, answer = call(
        server, "PUT", f"/v1/policies/{B}", "package rest_contract.p\n\ndeny contains 1 if {\n"
    )
    assert status == 400 and answer["errors"][0]["code"] == "rego_parse_error"


def test_an_undefined_document_has_no_result(server: str) -> None:
    assert call(server, "POST", "/v1/data/rest_contract/nothing/here", json.dumps({"input": {}})) == (200, {})
