"""The reconciler's RBAC in deploy/base is enough, and no wider than needed.

deploy/base is applied to the simulated cluster with kubectl; the reconciler then runs (`dra-gitops run
--once`, a real process) with nothing but a TokenRequest token of its ServiceAccount, so every request it
makes goes through the sim's RBAC authorizer (kube-apiserver's rules, escalation prevention included) and
into the audit log. The run: manifests-example/ applied; then a bad commit asking for more GPUs than exist
and dropping the notebook (applied, the notebook pruned, verification fails) rolled back to the good one.

Then: no request was refused, every rule of the reconciler's roles was used by some request of the run or
is listed below with the code path that needs it, and the roles hold no `*`, no watch, no Secrets, and no
write of the reconciler's own bookkeeping (state, Leases, Events) outside its namespace.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deploy_support import (
    EXAMPLE,
    KUBECTL,
    NAMESPACE,
    NO_KUBECTL,
    RECONCILER_USER,
    SERVICE_ACCOUNT,
    base_roles,
    edit,
    explain,
    kubectl,
    reconcile_once,
    request_token,
    token_kubeconfig,
)
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.sim.audit import AuditEvent
from reconciler.sim.controlplane import install
from reconciler.sim.rbac import Decision
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

Permission = tuple[str, str, str, str]  # (verb, apiGroup, resource[/subresource], resourceName or "")
ROLES = ("ClusterRole/dra-gitops", "ClusterRole/dra-gitops-managed", f"Role/{NAMESPACE}/dra-gitops")
TARGET = "example"

# Permissions the run cannot use, each with the code path that needs it (deploy/base/rbac.yaml says the same).
_ABSENT_KINDS = {
    ("", "services"): "a Service in the repository",
    ("apps", "statefulsets"): "a StatefulSet in the repository",
    ("batch", "jobs"): "a Job in the repository",
    ("resource.k8s.io", "devicetaintrules"): "a DeviceTaintRule in the repository (create, patch, delete: "
    "also a driver upgrade wave's drain, reconciler/cluster/wave.py, run by tests/deploy/test_wave_rbac.py)",
    ("rbac.authorization.k8s.io", "roles"): "a Role in the repository",
    ("rbac.authorization.k8s.io", "rolebindings"): "a RoleBinding in the repository",
}
NOT_EXERCISED: dict[Permission, str] = {
    **{
        (
            verb,
            group,
            resource,
            "",
        ): f"{why}: created (create and patch), read (get), drift/prune (list), pruned (delete)"
        for (group, resource), why in _ABSENT_KINDS.items()
        for verb in ("get", "list", "create", "patch", "delete")
        # StatefulSets are listed anyway: live objects of the policy input (reconciler/cluster/facts.py)
        if (verb, resource) != ("list", "statefulsets")
    },
    **{
        (
            "delete",
            group,
            resource,
            "",
        ): "prune (reconciler/cluster/apply/staged.py _delete_group) of a kind the "
        "run never removes from the repository"
        for group, resource in (
            ("", "namespaces"),
            ("", "serviceaccounts"),
            ("", "configmaps"),
            ("apps", "daemonsets"),
            ("resource.k8s.io", "deviceclasses"),
            ("resource.k8s.io", "resourceclaimtemplates"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
        )
    },
    ("delete", "resource.k8s.io", "resourceclaims", ""): "prune, and the recreate of a claim whose spec "
    "changed (immutable: reconciler/delivery/recreate.py)",
    ("delete", "", "pods", ""): "reconciler/delivery/recreate.py deletes the pods holding a recreated claim; "
    "a driver upgrade wave deletes the old plugin pods and its probe's pods (tests/deploy/test_wave_rbac.py)",
    ("create", "", "pods", ""): "a driver upgrade wave's probe pods, in the reconciler's namespace only "
    "(reconciler/cluster/probe.py, run by tests/deploy/test_wave_rbac.py)",
    (
        "get",
        "",
        "pods/log",
        "",
    ): "reconciler/cluster/diagnose/collect.py reads a crashing driver pod's last lines",
    (
        "list",
        "apps",
        "controllerrevisions",
        "",
    ): "reconciler/cluster/readiness/rollout.py, for DaemonSet pods without "
    "pod-template-generation (the DaemonSet controller always sets it)",
    # `run --once` contends for every Lease; `run` shards them (tests/deploy/test_sharding_rbac.py runs
    # that with this ServiceAccount's token)
    ("list", "coordination.k8s.io", "leases", ""): "reconciler/cluster/leasemanager.py: a sharded "
    "round lists the Leases (targets' and replicas' heartbeats) once",
    ("delete", "coordination.k8s.io", "leases", ""): "reconciler/cluster/leaseshard.py removes a "
    "departed replica's heartbeat Lease",
}


@dataclass
class Run:
    events: list[AuditEvent]
    roles: dict[str, dict[str, Any]]
    outputs: list[str]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("deploy-rbac")
    with SimCluster(audit=True) as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        try:
            admin = sim.write_kubeconfig(tmp / "admin.kubeconfig")
            applied = kubectl(admin, "apply", "-k", str(Path(__file__).resolve().parents[2] / "deploy/base"))
            assert applied.returncode == 0, applied.stderr
            token = request_token(admin, NAMESPACE, SERVICE_ACCOUNT)["status"]["token"]
            kubeconfig = token_kubeconfig(admin, token, tmp / "reconciler.kubeconfig")
            assert sim.api.audit is not None
            sim.api.audit.clear()

            remote = GitRemote(tmp / "git")
            shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
            good = remote.commit_and_push("example")
            outputs = []
            done = reconcile_once(kubeconfig, remote.url, tmp / "cache", target=TARGET, grace="3s")
            outputs.append(explain(done))
            assert done.returncode == 0 and f"applied {good}" in done.stdout, explain(done)

            edit(remote.work, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=5))
            (remote.work / "40-workloads" / "notebook.yaml").unlink()
            bad = remote.commit_and_push("5 trainers, no notebook: more GPUs than the nodes have")
            done = reconcile_once(kubeconfig, remote.url, tmp / "cache", target=TARGET, grace="3s")
            outputs.append(explain(done))
            assert done.returncode == 1 and f"rolled-back {bad}" in done.stdout, explain(done)
            with ClusterClient.for_url(sim.url) as admin_client:
                deployments = admin_client.list_kind("apps", "Deployment", "ml-team")
            assert sorted(d["metadata"]["name"] for d in deployments) == ["notebook", "trainer"]
            yield Run(sim.api.audit.events, base_roles(), outputs)
        finally:
            plane.stop()


def reconciler_events(run: Run) -> list[AuditEvent]:
    events = [e for e in run.events if e.user == RECONCILER_USER]
    assert len(events) > 100, f"only {len(events)} requests of the reconciler were audited"
    return events


def used_permissions(events: list[AuditEvent], roles: dict[str, dict[str, Any]]) -> set[Permission]:
    """The (verb, group, resource, name) each allowing rule was used for (name only where it matters)."""
    used: set[Permission] = set()
    for event in events:
        for check in event.checks:
            if check.allowed and check.role in ROLES:
                used.add(_used_by(check, roles[check.role]["rules"][check.rule]))
    return used


def _used_by(check: Decision, rule: dict[str, Any]) -> Permission:
    a = check.attributes
    return (a.verb, a.api_group, a.combined_resource, a.name if rule.get("resourceNames") else "")


def granted(roles: dict[str, dict[str, Any]]) -> set[Permission]:
    out: set[Permission] = set()
    for role_id in (r for r in ROLES if r in roles):
        for rule in roles[role_id]["rules"]:
            for verb in rule["verbs"]:
                for group in rule["apiGroups"]:
                    for resource in rule["resources"]:
                        for name in rule.get("resourceNames") or [""]:
                            out.add((verb, group, resource, name))
    return out


def test_the_reconciler_was_never_refused(run: Run) -> None:
    events = reconciler_events(run)
    refused = [e.to_json() for e in events if e.code in (401, 403) or not e.allowed]
    assert refused == []
    denied_checks = [c for e in events for c in e.checks if not c.allowed]
    assert denied_checks == []
    for output in run.outputs:
        # The status code as the client reports it ("(403)", "403 Forbidden"), not a timestamp's milliseconds.
        assert "forbidden" not in output.lower() and not re.search(r"(?<![,.\d])403\b", output), output


def test_every_request_was_allowed_by_the_reconcilers_roles(run: Run) -> None:
    """Besides discovery (system:discovery, bound to every authenticated user on every cluster)."""
    for event in reconciler_events(run):
        for check in event.checks:
            if check.attributes.resource_request:
                assert check.role in ROLES, (event.to_json(), check.reason)
            else:
                assert check.role == "ClusterRole/system:discovery", (event.to_json(), check.reason)


def test_the_run_wrote_through_every_kind_of_write(run: Run) -> None:
    """Applied, pruned, rolled back, kept state, held a Lease, emitted Events: the run was a real one."""
    verbs = {(e.request.verb, e.request.resource) for e in reconciler_events(run)}
    for needed in [
        ("patch", "deployments"),
        ("delete", "deployments"),
        ("create", "configmaps"),
        ("update", "configmaps"),
        ("create", "leases"),
        ("update", "leases"),
        ("create", "events"),
        ("patch", "clusterroles"),
    ]:
        assert needed in verbs


def test_escalation_checks_ran_and_passed(run: Run) -> None:
    """Writing the example's ClusterRole and binding needs `escalate` and `bind` on it: asked and allowed."""
    checks = {
        (c.attributes.verb, c.attributes.resource, c.attributes.name)
        for e in reconciler_events(run)
        for c in e.checks
        if c.attributes.verb in ("escalate", "bind")
    }
    assert checks == {
        ("escalate", "clusterroles", "gpu-example-driver"),
        ("bind", "clusterroles", "gpu-example-driver"),
    }


def test_every_rule_is_used_or_justified(run: Run) -> None:
    used = used_permissions(reconciler_events(run), run.roles)
    all_granted = granted(run.roles)
    unused = sorted(all_granted - used - set(NOT_EXERCISED))
    assert unused == [], (
        f"permissions no request of the run used and nothing justifies (remove them): {unused}"
    )
    stale = sorted(p for p in NOT_EXERCISED if p not in all_granted or p in used)
    assert stale == [], f"NOT_EXERCISED lists permissions the roles lack or the run used: {stale}"


def test_no_wildcards_watch_or_secrets(run: Run) -> None:
    for role_id, role in run.roles.items():
        for rule in role["rules"]:
            values = [*rule.get("verbs", []), *rule.get("apiGroups", []), *rule.get("resources", [])]
            assert not any("*" in v for v in values), (role_id, rule)
            assert "nonResourceURLs" not in rule, (role_id, rule)
            assert not any(r.split("/")[0] == "secrets" for r in rule.get("resources", [])), (role_id, rule)
    for role_id in ROLES:
        assert "watch" not in {v for rule in run.roles[role_id]["rules"] for v in rule["verbs"]}


def test_own_bookkeeping_writes_only_in_its_namespace(run: Run) -> None:
    cluster_wide = {
        p for p in granted({k: v for k, v in run.roles.items() if k.startswith("ClusterRole/")}) if p[0]
    }
    for permission in cluster_wide:
        verb, group, resource, _ = permission
        assert not (resource == "leases" or (resource == "events" and verb != "list")), permission
        # ConfigMaps are in the managed set, whose server-side applies create them anywhere: `create` is
        # granted cluster-wide for that; the PUTs of the state ConfigMap stay in the reconciler's namespace.
        assert not (resource == "configmaps" and verb == "update"), permission
    own = [
        (e.request.verb, e.request.resource, e.request.namespace)
        for e in reconciler_events(run)
        if e.request.resource in ("leases", "events", "configmaps") and e.request.verb in ("create", "update")
    ]
    assert own and all(ns == NAMESPACE for _, _, ns in own), own
