"""deploy/reader/rbac-reader.yaml is exactly enough for `inventory`, `check --cluster`, `diagnose`, `status`
and `checklist`.

The commands' read functions run against a simulated cluster with `client.request_log` on; every
logged request is mapped to the (verb, apiGroup, resource[/subresource]) RBAC would check, and then:
(a) every request is allowed by the ClusterRole, (b) every rule of the ClusterRole is used by some request,
(c) the role grants no write verb. Discovery (/api, /apis, /version and group/version listings) are
non-resource URLs that system:discovery grants to everyone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import wait_for

from reconciler.cluster.client import ClusterClient, RequestLog
from reconciler.cluster.diagnose import diagnose
from reconciler.cluster.inventory import collect_inventory
from reconciler.sim.audit import AuditEvent
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

ROOT = Path(__file__).resolve().parents[2]
RBAC = ROOT / "deploy" / "reader" / "rbac-reader.yaml"
NAMESPACE = ROOT / "deploy" / "namespace" / "namespace.yaml"
EXAMPLES = ROOT / "tests" / "data" / "dra-examples"
Permission = tuple[str, str, str]  # (verb, apiGroup, resource[/subresource])

WRITE_VERBS = frozenset(
    {"create", "update", "patch", "delete", "deletecollection", "escalate", "bind", "impersonate", "*"}
)
# Rules the simulated cluster cannot exercise: it serves no v1alpha1/v1alpha2, so ResourceClasses (classic
# DRA, Kubernetes <= 1.30) are never listed here although inventory and check --cluster list them there.
NOT_SIMULATED: frozenset[Permission] = frozenset({("list", "resource.k8s.io", "resourceclasses")})


def check_cluster_reads(client: ClusterClient) -> None:
    """What `check --cluster` reads. Extend here if it reads more (it is reconciler/cluster/facts.py)."""
    from reconciler.cluster.facts import collect_facts

    collect_facts(client)


def state_reads(client: ClusterClient) -> None:
    """What `status` and `checklist` read besides the above (the state ConfigMap in dra-gitops)."""
    from reconciler.checklist.gather import gather_facts
    from reconciler.loop.store.state import StateStore

    StateStore(client, "default").load()
    gather_facts(client, "default", "dra-gitops")


def is_discovery(path: str) -> bool:
    parts = [p for p in path.split("/") if p]
    if path in ("/api", "/apis", "/version") or path.startswith("/openapi"):
        return True
    if parts[:1] == ["api"]:
        return len(parts) <= 2
    return parts[:1] == ["apis"] and len(parts) <= 3


def permission(method: str, path: str, query: tuple[tuple[str, Any], ...]) -> Permission:
    """The RBAC check of one resource request."""
    parts = [p for p in path.split("/") if p]
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # namespaced: namespaces/<ns>/<resource>[/<name>[/<sub>]]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else None
    sub = rest[2] if len(rest) > 2 else None
    if sub:
        resource = f"{resource}/{sub}"
    params = dict(query)
    verb = {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method)
    if verb is None:
        watch = str(params.get("watch", "")).lower() in ("true", "1")
        verb = "watch" if watch else ("get" if name else "list")
    return verb, group, resource


def load_role() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}, docs


def granted(*roles: dict[str, Any]) -> set[Permission]:
    out: set[Permission] = set()
    for rule in [r for role in roles for r in role["rules"]]:
        assert "nonResourceURLs" not in rule and "resourceNames" not in rule
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    out.add((verb, group, resource))
    return out


READER_USER = "system:serviceaccount:dra-gitops:dra-reader"


@pytest.fixture(scope="module")
def audited() -> Iterator[list[AuditEvent]]:
    """The sim's audit of the same reads made with a TokenRequest token of dra-reader (its RBAC enforced)."""
    yield []


@pytest.fixture(scope="module")
def requests_made(audited: list[AuditEvent]) -> Iterator[set[Permission]]:
    """Run the three commands' reads against a cluster with a crashing driver, claims, and an exhausted pod;
    then again as dra-reader, with the sim's RBAC authorizer deciding and its audit log recording."""
    with SimCluster(served_versions=("v1", "v1alpha3"), audit=True) as cluster:
        plane = install(cluster, nodes=1, devices_per_node=1, driver_preinstalled=False)
        client = ClusterClient.for_url(cluster.url)
        client.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "dra-example-driver"}})
        (ds,) = [
            d
            for d in yaml.safe_load_all((EXAMPLES / "driver" / "kubeletplugin-daemonset.yaml").read_text())
            if d
        ]
        # The driver reads a ConfigMap (check --cluster gets it by name to compare its content).
        client.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "driver-mode", "namespace": "dra-example-driver"},
                "data": {"mode": "grouped"},
            }
        )
        ds["spec"]["template"]["spec"].setdefault("volumes", []).append(
            {"name": "driver-mode", "configMap": {"name": "driver-mode"}}
        )
        client.apply(ds)
        objs = [d for d in yaml.safe_load_all((EXAMPLES / "v1" / "01-deviceclasses.yaml").read_text()) if d]
        objs += [
            d
            for d in yaml.safe_load_all((EXAMPLES / "v1" / "02-claimtemplate-deployment.yaml").read_text())
            if d
        ]
        for obj in objs:
            client.apply(obj)
        wait_for(
            lambda: (
                len([p for p in client.list_kind("", "Pod", "inference") if p["spec"].get("nodeName")]) == 1
            ),
            what="one pod scheduled",
        )
        plane.crash_driver("gpu.example.com")
        wait_for(
            lambda: any(
                "CrashLoopBackOff" in str(p.get("status"))
                for p in client.list_kind("", "Pod", "dra-example-driver")
            ),
            what="driver crash",
        )
        some_pod = client.list_kind("", "Pod", "inference")[0]["metadata"]["name"]

        log: RequestLog = []
        client.request_log = log
        collect_inventory(client)
        check_cluster_reads(client)
        diagnose(client)
        diagnose(client, namespace="inference")
        diagnose(client, f"inference/{some_pod}")
        claim = client.list_kind("resource.k8s.io", "ResourceClaim", "inference")[0]["metadata"]["name"]
        diagnose(client, f"claim/{claim}", namespace="inference")
        state_reads(client)

        client.request_log = None
        for doc in [*yaml.safe_load_all(NAMESPACE.read_text()), *load_role()[1]]:
            client.apply(doc)
        answer = client.request(
            "POST", "/api/v1/namespaces/dra-gitops/serviceaccounts/dra-reader/token", body={"spec": {}}
        )
        assert cluster.api.audit is not None
        cluster.api.audit.clear()
        with ClusterClient.for_url(cluster.url, token=answer["status"]["token"]) as reader:
            collect_inventory(reader)
            check_cluster_reads(reader)
            diagnose(reader)
            diagnose(reader, namespace="inference")
            diagnose(reader, f"inference/{some_pod}")
            diagnose(reader, f"claim/{claim}", namespace="inference")
            state_reads(reader)
        audited.extend(cluster.api.audit.events)
        yield permissions(log)
        client.close()


def permissions(log: RequestLog) -> set[Permission]:
    return {permission(m, p, q) for m, p, q in log if not is_discovery(p)}


def test_rbac_file_shape() -> None:
    by_name, docs = load_role()
    assert [d["kind"] for d in docs] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
    ]
    assert by_name["Role/dra-reader"]["metadata"]["namespace"] == "dra-gitops"
    assert by_name["RoleBinding/dra-reader"]["roleRef"]["kind"] == "Role"
    assert by_name["RoleBinding/dra-reader"]["subjects"] == binding_subjects()
    binding = by_name["ClusterRoleBinding/dra-reader"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "dra-reader",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-reader", "namespace": "dra-gitops"}
    ]
    assert by_name["ServiceAccount/dra-reader"]["metadata"]["namespace"] == "dra-gitops"
    (namespace,) = [d for d in yaml.safe_load_all(NAMESPACE.read_text()) if d]
    assert (namespace["kind"], namespace["metadata"]["name"]) == ("Namespace", "dra-gitops")


def binding_subjects() -> list[dict[str, str]]:
    return [{"kind": "ServiceAccount", "name": "dra-reader", "namespace": "dra-gitops"}]


def roles() -> tuple[dict[str, Any], dict[str, Any]]:
    by_name = load_role()[0]
    return by_name["ClusterRole/dra-reader"], by_name["Role/dra-reader"]


def test_role_is_read_only() -> None:
    verbs = {v for v, _, _ in granted(*roles())}
    assert verbs <= {"get", "list", "watch"} and not verbs & WRITE_VERBS
    assert not any(r == "secrets" for _, _, r in granted(*roles()))
    # Cluster-wide, ConfigMaps only by name (a driver's config); listing them only in the reconciler's namespace.
    assert {v for v, _, r in granted(roles()[0]) if r == "configmaps"} == {"get"}


def test_every_request_is_allowed(requests_made: set[Permission]) -> None:
    assert requests_made, "no resource requests were logged"
    denied = sorted(requests_made - granted(*roles()))
    assert denied == [], f"requests the dra-reader role does not allow: {denied}"


def test_every_rule_is_used(requests_made: set[Permission]) -> None:
    unused = sorted(granted(*roles()) - requests_made - NOT_SIMULATED)
    assert unused == [], f"rules no command uses (remove them): {unused}"
    assert granted(*roles()) >= NOT_SIMULATED


def test_the_sims_rbac_allows_every_request_of_the_reader(
    requests_made: set[Permission], audited: list[AuditEvent]
) -> None:
    """The same reads with dra-reader's own token: the sim's RBAC authorizer (kube-apiserver's rules)
    refuses none, and they are the requests mapped above."""
    mine = [e for e in audited if e.user == READER_USER]
    assert len(mine) > 20
    refused = [e.to_json() for e in mine if not e.allowed or e.code in (401, 403)]
    assert refused == []
    resource_requests = {
        (e.request.verb, e.request.api_group, e.request.combined_resource)
        for e in mine
        if e.request.resource_request
    }
    assert resource_requests == requests_made


def test_no_write_requests(requests_made: set[Permission]) -> None:
    assert not {v for v, _, _ in requests_made} & WRITE_VERBS


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/nodes", (("limit", 500),), ("list", "", "nodes")),
        ("GET", "/api/v1/namespaces", (), ("list", "", "namespaces")),
        ("GET", "/api/v1/namespaces/ml", (), ("get", "", "namespaces")),
        ("GET", "/api/v1/namespaces/ml/pods", (), ("list", "", "pods")),
        ("GET", "/api/v1/namespaces/ml/pods/p", (), ("get", "", "pods")),
        ("GET", "/api/v1/namespaces/ml/pods/p/log", (("tailLines", 20),), ("get", "", "pods/log")),
        (
            "GET",
            "/apis/resource.k8s.io/v1/resourceslices",
            (("watch", "true"),),
            ("watch", "resource.k8s.io", "resourceslices"),
        ),
        ("PATCH", "/apis/apps/v1/namespaces/x/daemonsets/d", (), ("patch", "apps", "daemonsets")),
    ],
)
def test_permission_mapping(
    method: str, path: str, query: tuple[tuple[str, Any], ...], expected: Permission
) -> None:
    assert permission(method, path, query) == expected


@pytest.mark.parametrize(
    "path", ["/api", "/api/v1", "/apis", "/apis/resource.k8s.io", "/apis/apps/v1", "/version"]
)
def test_discovery_paths(path: str) -> None:
    assert is_discovery(path)
