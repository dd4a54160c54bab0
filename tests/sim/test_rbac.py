"""ServiceAccount tokens, RBAC and the audit log of the simulated kube-apiserver, over real HTTP with the
official client, against what a real kube-apiserver answers (messages copied from real 403s)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from reconciler.sim.auth import ADMIN, UserInfo
from reconciler.sim.rbac import Attributes, request_attributes, rule_allows
from reconciler.sim.server import SimCluster

RBAC = "rbac.authorization.k8s.io"
SA_USER = "system:serviceaccount:team:bot"


@pytest.fixture
def sim() -> Iterator[SimCluster]:
    with SimCluster(audit=True) as cluster:
        yield cluster


def api_client(cluster: SimCluster, token: str | None = None) -> client.ApiClient:
    cfg = client.Configuration(host=cluster.url)
    cfg.retries = 0
    if token:
        cfg.api_key = {"BearerToken": token}
        cfg.api_key_prefix = {"BearerToken": "Bearer"}
    return client.ApiClient(cfg)


def call(api: client.ApiClient, method: str, path: str, body: Any = None, **query: Any) -> tuple[int, Any]:
    content_type = "application/apply-patch+yaml" if query.pop("apply", False) else "application/json"
    if method == "PATCH" and content_type == "application/json":
        content_type = "application/merge-patch+json"
    params = api.param_serialize(
        method,
        path,
        query_params=list(query.items()),
        header_params={"Accept": "application/json", "Content-Type": content_type},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(*params)
    data = response.read()
    return response.status, json.loads(data) if data else None


@pytest.fixture
def admin(sim: SimCluster) -> Iterator[client.ApiClient]:
    api = api_client(sim)
    call(api, "POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
    call(api, "POST", "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "bot"}})
    yield api
    api.close()


def token_for(admin: client.ApiClient, namespace: str = "team", name: str = "bot", **spec: Any) -> str:
    status, body = call(
        admin,
        "POST",
        f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": spec},
    )
    assert status == 201, body
    return str(body["status"]["token"])


@pytest.fixture
def bot(sim: SimCluster, admin: client.ApiClient) -> Iterator[client.ApiClient]:
    api = api_client(sim, token_for(admin))
    yield api
    api.close()


def grant(admin: client.ApiClient, name: str, rules: list[dict[str, Any]], namespace: str = "") -> None:
    """A (Cluster)Role with `rules` bound to team/bot."""
    kind = "Role" if namespace else "ClusterRole"
    base = f"/apis/{RBAC}/v1" + (f"/namespaces/{namespace}" if namespace else "")
    meta: dict[str, Any] = {"name": name, **({"namespace": namespace} if namespace else {})}
    assert call(admin, "POST", f"{base}/{kind.lower()}s", {"metadata": meta, "rules": rules})[0] == 201
    binding = {
        "metadata": meta,
        "roleRef": {"apiGroup": RBAC, "kind": kind, "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": "bot", "namespace": "team"}],
    }
    assert call(admin, "POST", f"{base}/{kind.lower()}bindings", binding)[0] == 201


# ---- TokenRequest and authentication ----------------------------------------------------------------------


def test_token_request_answers_like_kube_apiserver(admin: client.ApiClient) -> None:
    before = time.time()
    answer = client.CoreV1Api(admin).create_namespaced_service_account_token(
        "bot", "team", {"spec": {"expirationSeconds": 600}}
    )
    assert answer.kind == "TokenRequest" and answer.api_version == "authentication.k8s.io/v1"
    assert answer.spec.expiration_seconds == 600
    assert answer.spec.audiences == ["https://kubernetes.default.svc.cluster.local"]
    assert 595 <= answer.status.expiration_timestamp.timestamp() - before <= 605
    assert answer.status.token.count(".") == 2  # a JWT


def test_token_request_errors(admin: client.ApiClient) -> None:
    status, body = call(admin, "POST", "/api/v1/namespaces/team/serviceaccounts/nobody/token", {"spec": {}})
    assert (status, body["message"]) == (404, 'serviceaccounts "nobody" not found')
    status, body = call(
        admin,
        "POST",
        "/api/v1/namespaces/team/serviceaccounts/bot/token",
        {"spec": {"expirationSeconds": 60}},
    )
    assert status == 422
    assert body["message"] == (
        'TokenRequest.authentication.k8s.io "bot" is invalid: spec.expirationSeconds: Invalid value: 60: '
        "may not specify a duration less than 10 minutes"
    )


def test_discovery_lists_the_token_subresource(admin: client.ApiClient) -> None:
    resources = {r["name"]: r for r in call(admin, "GET", "/api/v1")[1]["resources"]}
    assert resources["serviceaccounts/token"]["verbs"] == ["create"]
    assert resources["serviceaccounts/token"]["kind"] == "TokenRequest"
    assert resources["pods/log"]["verbs"] == ["get"]


def test_a_token_is_its_service_account_and_dies_with_it(sim: SimCluster, admin: client.ApiClient) -> None:
    token = token_for(admin)
    with api_client(sim, token) as api:
        assert call(api, "GET", "/version")[0] == 200
        event = sim.api.audit.events[-1] if sim.api.audit else None
        assert event is not None and event.user == SA_USER
        assert event.request.user.groups == (
            "system:serviceaccounts",
            "system:serviceaccounts:team",
            "system:authenticated",
        )
        call(admin, "DELETE", "/api/v1/namespaces/team/serviceaccounts/bot")
        call(admin, "POST", "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "bot"}})
        status, body = call(api, "GET", "/version")
        assert (status, body["reason"]) == (401, "Unauthorized")  # the new ServiceAccount has another uid


def test_admin_token_mode() -> None:
    with SimCluster(token="s3cret") as cluster:
        with api_client(cluster, "s3cret") as admin:
            call(admin, "POST", "/api/v1/namespaces", {"metadata": {"name": "team"}})
            call(admin, "POST", "/api/v1/namespaces/team/serviceaccounts", {"metadata": {"name": "bot"}})
            sa_token = token_for(admin)
        for token, expected in ((None, 401), ("wrong", 401), (sa_token, 403), ("s3cret", 200)):
            with api_client(cluster, token) as api:
                assert call(api, "GET", "/api/v1/nodes")[0] == expected, token


def test_without_admin_token_anyone_but_a_service_account_is_admin(
    sim: SimCluster, bot: client.ApiClient
) -> None:
    for token in (None, "anything"):
        with api_client(sim, token) as api:
            assert call(api, "GET", "/api/v1/nodes")[0] == 200
    assert call(bot, "GET", "/api/v1/nodes")[0] == 403


# ---- authorization ------------------------------------------------------------------------------------------


def test_forbidden_messages_are_kube_apiservers(bot: client.ApiClient) -> None:
    status, body = call(bot, "GET", "/api/v1/namespaces/team/pods")
    assert status == 403
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f'pods is forbidden: User "{SA_USER}" cannot list resource "pods" in API group "" in the '
        'namespace "team"',
        "reason": "Forbidden",
        "details": {"kind": "pods"},
        "code": 403,
    }
    status, body = call(bot, "GET", "/apis/resource.k8s.io/v1/deviceclasses/gpu")
    assert body["message"] == (
        f'deviceclasses.resource.k8s.io "gpu" is forbidden: User "{SA_USER}" cannot get resource '
        '"deviceclasses" in API group "resource.k8s.io" at the cluster scope'
    )
    assert body["details"] == {"name": "gpu", "group": "resource.k8s.io", "kind": "deviceclasses"}
    status, body = call(bot, "GET", "/api/v1/namespaces/team/pods/p/log")
    assert body["message"] == (
        f'pods "p" is forbidden: User "{SA_USER}" cannot get resource "pods/log" in API group "" in the '
        'namespace "team"'
    )
    status, body = call(bot, "GET", "/metrics")
    assert (status, body["message"]) == (403, f'forbidden: User "{SA_USER}" cannot get path "/metrics"')


def test_discovery_is_open_to_every_authenticated_user(bot: client.ApiClient) -> None:
    for path in ("/api", "/api/v1", "/apis", "/apis/apps/v1", "/version", "/openapi/v3"):
        assert call(bot, "GET", path)[0] == 200, path


def test_role_binding_grants_in_its_namespace_only(admin: client.ApiClient, bot: client.ApiClient) -> None:
    grant(admin, "pods", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}], namespace="team")
    assert call(bot, "GET", "/api/v1/namespaces/team/pods")[0] == 200
    assert call(bot, "GET", "/api/v1/namespaces/default/pods")[0] == 403
    assert call(bot, "GET", "/api/v1/pods")[0] == 403  # all namespaces is the cluster scope
    assert call(bot, "GET", "/api/v1/namespaces/team/pods/p")[0] == 403  # get is not list


def test_subresources_resource_names_and_watch(admin: client.ApiClient, bot: client.ApiClient) -> None:
    grant(
        admin,
        "mixed",
        [
            {"apiGroups": [""], "resources": ["*/log"], "verbs": ["get"]},
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "verbs": ["get", "watch"],
                "resourceNames": ["one"],
            },
        ],
    )
    call(admin, "POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "one"}})
    call(admin, "POST", "/api/v1/namespaces/team/configmaps", {"metadata": {"name": "two"}})
    assert call(bot, "GET", "/api/v1/namespaces/team/pods/p/log")[0] == 404  # allowed; there is no pod
    assert call(bot, "GET", "/api/v1/namespaces/team/pods/p")[0] == 403
    assert call(bot, "GET", "/api/v1/namespaces/team/configmaps/one")[0] == 200
    assert call(bot, "GET", "/api/v1/namespaces/team/configmaps/two")[0] == 403
    assert call(bot, "GET", "/api/v1/namespaces/team/configmaps")[0] == 403  # a list has no name


def test_escalation_needs_the_permissions_or_escalate(admin: client.ApiClient, bot: client.ApiClient) -> None:
    grant(
        admin, "writer", [{"apiGroups": [RBAC], "resources": ["clusterroles"], "verbs": ["create", "patch"]}]
    )
    role = {
        "apiVersion": f"{RBAC}/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "nodes-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]}],
    }
    status, body = call(bot, "POST", f"/apis/{RBAC}/v1/clusterroles", role)
    assert status == 403
    assert body["message"] == (
        'clusterroles.rbac.authorization.k8s.io "nodes-reader" is forbidden: user "system:serviceaccount:team:bot" '
        '(groups=["system:serviceaccounts" "system:serviceaccounts:team" "system:authenticated"]) is attempting '
        'to grant RBAC permissions not currently held:\n{APIGroups:[""], Resources:["nodes"], Verbs:["get" "list"]}'
    )
    path = f"/apis/{RBAC}/v1/clusterroles/nodes-reader"
    assert call(bot, "PATCH", path, role, apply=True, fieldManager="t", dryRun="All")[0] == 403
    grant(
        admin,
        "escalate",
        [
            {
                "apiGroups": [RBAC],
                "resources": ["clusterroles"],
                "verbs": ["escalate"],
                "resourceNames": ["nodes-reader"],
            }
        ],
    )
    assert call(bot, "PATCH", path, role, apply=True, fieldManager="t")[0] == 201
    # escalate by name does not cover a POST: the request has no name (kube-apiserver's RequestInfo)
    assert (
        call(bot, "POST", f"/apis/{RBAC}/v1/clusterroles", {**role, "metadata": {"name": "nodes-reader"}})[0]
        == 403
    )


def test_holding_the_permissions_is_enough_to_grant_them(
    admin: client.ApiClient, bot: client.ApiClient
) -> None:
    grant(
        admin,
        "holder",
        [
            {"apiGroups": [RBAC], "resources": ["clusterroles", "clusterrolebindings"], "verbs": ["create"]},
            {"apiGroups": [""], "resources": ["nodes"], "verbs": ["*"]},
        ],
    )
    role = {
        "metadata": {"name": "nodes-reader"},
        "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
    }
    assert call(bot, "POST", f"/apis/{RBAC}/v1/clusterroles", role)[0] == 201
    binding = {
        "metadata": {"name": "nodes-reader"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "nodes-reader"},
        "subjects": [{"kind": "Group", "name": "system:authenticated"}],
    }
    assert call(bot, "POST", f"/apis/{RBAC}/v1/clusterrolebindings", binding)[0] == 201
    admin_binding = {
        **binding,
        "metadata": {"name": "admins"},
        "roleRef": {**binding["roleRef"], "name": "cluster-admin"},
    }
    status, body = call(bot, "POST", f"/apis/{RBAC}/v1/clusterrolebindings", admin_binding)
    assert status == 403 and "is attempting to grant RBAC permissions not currently held" in body["message"]


def test_bind_allows_binding_a_role_one_does_not_hold(admin: client.ApiClient, bot: client.ApiClient) -> None:
    grant(
        admin,
        "binder",
        [
            {"apiGroups": [RBAC], "resources": ["clusterrolebindings"], "verbs": ["create"]},
            {
                "apiGroups": [RBAC],
                "resources": ["clusterroles"],
                "verbs": ["bind"],
                "resourceNames": ["view-ish"],
            },
        ],
    )
    role = {
        "metadata": {"name": "view-ish"},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}],
    }
    assert call(admin, "POST", f"/apis/{RBAC}/v1/clusterroles", role)[0] == 201
    binding = {
        "metadata": {"name": "view-ish"},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "view-ish"},
        "subjects": [{"kind": "User", "name": "someone"}],
    }
    assert call(bot, "POST", f"/apis/{RBAC}/v1/clusterrolebindings", binding)[0] == 201


def test_default_cluster_roles_exist(admin: client.ApiClient) -> None:
    names = {r["metadata"]["name"] for r in call(admin, "GET", f"/apis/{RBAC}/v1/clusterroles")[1]["items"]}
    assert {"cluster-admin", "system:discovery", "system:basic-user", "system:public-info-viewer"} <= names


# ---- audit --------------------------------------------------------------------------------------------------


def test_audit_records_each_request_with_its_decision(
    sim: SimCluster, admin: client.ApiClient, bot: client.ApiClient
) -> None:
    assert sim.api.audit is not None
    sim.api.audit.clear()
    call(bot, "GET", "/api/v1/namespaces/team/pods/p/log", tailLines=5)
    call(admin, "DELETE", "/api/v1/namespaces/team/configmaps/none")
    first, second = sim.api.audit.events
    r = first.request
    assert (first.user, r.verb, r.resource, r.subresource, r.namespace, r.name, first.code) == (
        SA_USER, "get", "pods", "log", "team", "p", 403,
    )  # fmt: skip
    assert not first.allowed and first.to_json()["annotations"]["authorization.k8s.io/decision"] == "forbid"
    assert (second.user, second.request.verb, second.code, second.allowed) == (
        "kubernetes-admin",
        "delete",
        404,
        True,
    )


# ---- request attributes (pure) -------------------------------------------------------------------------------

USER = UserInfo("u", ("system:authenticated",))


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/namespaces/ns/pods", {}, ("list", "", "pods", "", "ns", "")),
        ("GET", "/api/v1/namespaces/ns/pods", {"watch": "true"}, ("watch", "", "pods", "", "ns", "")),
        ("GET", "/api/v1/watch/namespaces/ns/pods", {}, ("watch", "", "pods", "", "ns", "")),
        ("GET", "/api/v1/namespaces/ns", {}, ("get", "", "namespaces", "", "ns", "ns")),
        ("PUT", "/api/v1/namespaces/ns/finalize", {}, ("update", "", "namespaces", "finalize", "ns", "ns")),
        ("DELETE", "/apis/apps/v1/namespaces/ns/deployments", {}, ("deletecollection", "apps", "deployments", "", "ns", "")),
        ("PATCH", "/apis/resource.k8s.io/v1/deviceclasses/gpu", {}, ("patch", "resource.k8s.io", "deviceclasses", "", "", "gpu")),
        ("POST", "/api/v1/namespaces/ns/serviceaccounts/sa/token", {}, ("create", "", "serviceaccounts", "token", "ns", "sa")),
        ("GET", "/api/v1/nodes", {"fieldSelector": "metadata.name=n1"}, ("list", "", "nodes", "", "", "n1")),
        ("GET", "/api/v1/namespaces/ns/pods/p/exec", {"command": "env"}, ("create", "", "pods", "exec", "ns", "p")),
    ],
)  # fmt: skip
def test_request_attributes(method: str, path: str, query: dict[str, str], expected: tuple[str, ...]) -> None:
    a = request_attributes(USER, method, path, query)
    assert a.resource_request
    assert (a.verb, a.api_group, a.resource, a.subresource, a.namespace, a.name) == expected


@pytest.mark.parametrize(
    "path", ["/api", "/apis", "/apis/apps", "/apis/apps/v1", "/version", "/openapi/v3/api/v1"]
)
def test_non_resource_paths(path: str) -> None:
    a = request_attributes(USER, "GET", path, {})
    assert (a.resource_request, a.verb, a.path) == (False, "get", path)


def test_rule_matching() -> None:
    def attrs(**kw: Any) -> Attributes:
        return Attributes(USER, **{"resource_request": True, **kw})

    rule = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"], "resourceNames": ["a"]}
    assert rule_allows(attrs(verb="get", api_group="apps", resource="deployments", name="a"), rule)
    assert not rule_allows(attrs(verb="get", api_group="apps", resource="deployments", name="b"), rule)
    assert not rule_allows(attrs(verb="get", api_group="", resource="deployments", name="a"), rule)
    assert not rule_allows(
        attrs(verb="get", api_group="apps", resource="deployments", subresource="scale", name="a"), rule
    )
    urls = {"nonResourceURLs": ["/apis/*"], "verbs": ["get"]}
    assert rule_allows(Attributes(USER, "get", False, path="/apis/apps"), urls)
    assert not rule_allows(Attributes(USER, "get", False, path="/api"), urls)
    assert ADMIN.privileged and not USER.privileged
