"""deploy/operator is enough for the operator verbs from a laptop, and no wider than they need.

deploy/base and deploy/operator are applied to the simulated cluster with kubectl (its RBAC authorizer
behaves as kube-apiserver's). The reconciler runs as the deployment does (`dra-gitops run`, a real process,
with a token of its ServiceAccount); every verb of VERBS then runs as a real process with nothing but a
token bound to the operator roles (the binding template's subjects replaced by a ServiceAccount), as a
person on call would from a laptop: the verbs hand their work to the controller, which applies.

Then: every verb succeeded and none of its requests was refused; the rollback and the sync were run by the
controller and recorded with who asked; without any one permission of the roles some verb fails with
Forbidden (and the state is left as it was); every permission is used by a verb or waits, in AWAITING, for
the verb that needs it; the roles hold no `*`, no watch, no Secrets, and write only the state and Leases.

To add a verb: one line in VERBS (its command line), and move the permissions it needs out of AWAITING.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
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
    ROOT,
    edit,
    explain,
    kubectl,
    kustomize,
    request_token,
    role_without,
    token_kubeconfig,
)
from helpers import GitRemote, wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.sim.audit import AuditEvent
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)

TARGET = "example"
OPERATOR = "dra-operator"
OPERATOR_USER = f"system:serviceaccount:{NAMESPACE}:{OPERATOR}"
ROLES = (f"Role/{NAMESPACE}/dra-operator",)
Permission = tuple[str, str, str, str]  # (role, verb, apiGroup, resource)

# Each operator verb and its command line (after `dra-gitops`; `{second}` is the second commit), run in
# this order. The rollback names history id 1: the first commit's apply.
VERBS: dict[str, list[str]] = {
    "status": ["status", "--target", TARGET, "--state-namespace", NAMESPACE],
    "sync": ["sync", "--revision", "{second}", "--target", TARGET, "--state-namespace", NAMESPACE],
    "rollback": ["rollback", "1", "--target", TARGET, "--state-namespace", NAMESPACE],
    "suspend": ["suspend", "--target", TARGET, "--state-namespace", NAMESPACE, "--reason", "on call"],
    "get": ["get", "--state-namespace", NAMESPACE],
    "history": ["history", "--target", TARGET, "--state-namespace", NAMESPACE],
    "retry": ["retry", "--target", TARGET, "--state-namespace", NAMESPACE],
    "resume": ["resume", "--target", TARGET, "--state-namespace", NAMESPACE],
    "reconcile": ["reconcile", "--no-wait", "--target", TARGET, "--state-namespace", NAMESPACE],
}
# Permissions granted for verbs other branches bring (issue 18): each names the verb that needs it.
AWAITING: dict[Permission, str] = {
    (ROLES[0], "list", "", "events"): "status/history: the Events of a target",
}


@dataclass
class Run:
    sim: SimCluster
    admin: Path
    operator: Path
    first: str
    second: str
    outputs: dict[str, subprocess.CompletedProcess[str]]
    events: list[AuditEvent]
    roles: dict[str, dict[str, Any]]


def operator_docs() -> list[dict[str, Any]]:
    """deploy/operator, its binding template bound to the test's ServiceAccount instead of the group."""
    docs = []
    for doc in kustomize("operator"):
        if doc["kind"] in ("RoleBinding", "ClusterRoleBinding"):
            assert doc["subjects"] == [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "dra-operators"}
            ]
            doc = {**doc, "subjects": [{"kind": "ServiceAccount", "name": OPERATOR, "namespace": NAMESPACE}]}
        docs.append(doc)
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": OPERATOR, "namespace": NAMESPACE},
    }
    return [account, *docs]


def role_id(doc: dict[str, Any]) -> str:
    ns = doc["metadata"].get("namespace")
    return "/".join(p for p in (doc["kind"], ns, doc["metadata"]["name"]) if p)


def dra_gitops(
    kubeconfig: Path, args: list[str], run_env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args, "--kubeconfig", str(kubeconfig)],
        cwd=ROOT, env=run_env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip


def verb_line(verb: str, run: Run | None = None, second: str = "") -> list[str]:
    return [a.replace("{second}", run.second if run else second) for a in VERBS[verb]]


def env() -> dict[str, str]:
    out = {**os.environ, "PYTHONPATH": str(ROOT), "RUST_BACKTRACE": "0"}
    out.pop("KUBECONFIG", None)
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    tmp = tmp_path_factory.mktemp("operator-rbac")
    with SimCluster(audit=True) as sim:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        controller = None
        try:
            admin = sim.write_kubeconfig(tmp / "admin.kubeconfig")
            applied = kubectl(admin, "apply", "-k", str(ROOT / "deploy" / "base"))
            assert applied.returncode == 0, applied.stderr
            with ClusterClient.for_url(sim.url) as client:
                for doc in operator_docs():
                    client.apply(doc)
            reconciler_token = request_token(admin, NAMESPACE, "dra-gitops")["status"]["token"]
            reconciler = token_kubeconfig(admin, reconciler_token, tmp / "reconciler.kubeconfig")
            operator_token = request_token(admin, NAMESPACE, OPERATOR)["status"]["token"]
            operator = token_kubeconfig(admin, operator_token, tmp / "operator.kubeconfig")

            remote = GitRemote(tmp / "git")
            shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
            first = remote.commit_and_push("example")
            log = tmp / "controller.log"
            controller = subprocess.Popen(
                [
                    sys.executable, "-m", "reconciler", "run", "--repo", remote.url, "--kubeconfig",
                    str(reconciler), "--state-namespace", NAMESPACE, "--target", TARGET, "--identity",
                    "dra-gitops-0", "--cache-dir", str(tmp / "cache"), "--grace", "3s", "--poll-interval",
                    "1h", "--listen", "127.0.0.1:0",
                ],
                cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=log.open("w"),
            )  # fmt: skip
            with ClusterClient.for_url(sim.url) as client:
                store = StateStore(client, TARGET, NAMESPACE)
                wait_for(lambda: store.load().last_good == first, 120, "the first pass applied")
            edit(
                remote.work,
                "40-workloads/trainer.yaml",
                lambda d: d["spec"]["template"]["spec"]["containers"][0].update(args=["--epochs=20"]),
            )
            second = remote.commit_and_push("20 epochs")
            assert sim.api.audit is not None
            sim.api.audit.clear()
            outputs = {}
            for verb in VERBS:
                outputs[verb] = dra_gitops(operator, verb_line(verb, second=second), env())
            roles = {role_id(d): d for d in operator_docs() if d["kind"] in ("Role", "ClusterRole")}
            yield Run(sim, admin, operator, first, second, outputs, list(sim.api.audit.events), roles)
        finally:
            if controller is not None:
                controller.terminate()
                controller.wait(60)
            plane.stop()


def granted(roles: dict[str, dict[str, Any]]) -> set[Permission]:
    return {
        (rid, verb, group, resource)
        for rid, role in roles.items()
        for rule in role["rules"]
        for verb in rule["verbs"]
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }


def used(run: Run) -> set[Permission]:
    out: set[Permission] = set()
    for event in run.events:
        if event.user != OPERATOR_USER:
            continue
        for check in event.checks:
            if check.allowed and check.role in ROLES:
                a = check.attributes
                out.add((check.role, a.verb, a.api_group, a.combined_resource))
    return out


def test_every_verb_succeeds_with_the_operator_role(run: Run) -> None:
    for verb, done in run.outputs.items():
        assert done.returncode == 0, (verb, explain(done))
        assert "forbidden" not in (done.stdout + done.stderr).lower(), (verb, explain(done))
    mine = [e for e in run.events if e.user == OPERATOR_USER]
    assert len(mine) > 10
    assert [e.to_json() for e in mine if not e.allowed or e.code in (401, 403)] == []


def test_the_controller_ran_the_requests_and_recorded_who_asked(run: Run) -> None:
    assert f"applied to {run.second}" in run.outputs["sync"].stdout
    assert f"rolled-back to {run.first}" in run.outputs["rollback"].stdout
    with ClusterClient.for_url(run.sim.url) as client:
        store = StateStore(client, TARGET, NAMESPACE)
        # retry (made while suspended) lifted the hold the rollback set on the second commit; once
        # resumed, the controller delivered it again at once.
        wait_for(lambda: store.load().last_good == run.second, 120, "the retried commit applied")
        state = store.load()
        trainer = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert trainer is not None and trainer["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--epochs=20"
    ]
    assert state.request is None and state.hold is None and state.suspended is None
    requested = [(r.operation, r.sha) for r in state.history if r.requested_by and r.request]
    assert requested[:2] == [("rollback", run.first), ("sync", run.second)]
    operated = [(r.operation, r.requested_by) for r in state.history if r.operation in ("suspend", "resume")]
    assert [op for op, _ in operated] == ["resume", "suspend"] and all(by for _, by in operated)
    assert "on call" in run.outputs["get"].stdout or TARGET in run.outputs["get"].stdout
    # the operator wrote nothing but the state and the Lease's annotation
    writes = {
        (e.request.verb, e.request.resource, e.request.namespace)
        for e in run.events
        if e.user == OPERATOR_USER and e.request.verb in ("create", "update", "patch", "delete")
    }
    assert writes == {
        ("update", "configmaps", NAMESPACE),
        ("update", "leases", NAMESPACE),
        ("create", "selfsubjectreviews", ""),
    }


def test_every_permission_is_used_by_a_verb_or_awaits_one(run: Run) -> None:
    all_granted = granted(run.roles)
    unused = sorted(all_granted - used(run) - set(AWAITING))
    assert unused == [], f"permissions no verb used and none awaits (remove them): {unused}"
    stale = sorted(p for p in AWAITING if p not in all_granted or p in used(run))
    assert stale == [], f"AWAITING lists permissions the roles lack or a verb used (move them): {stale}"


def exercised() -> list[Permission]:
    """The permissions the verbs of this branch need: every granted one not awaiting a verb."""
    roles = {role_id(d): d for d in operator_docs() if d["kind"] in ("Role", "ClusterRole")}
    return sorted(granted(roles) - set(AWAITING))


@pytest.mark.parametrize("permission", exercised(), ids=lambda p: f"{p[0]}:{p[1]}:{p[3]}")
def test_without_any_permission_some_verb_fails(run: Run, permission: Permission) -> None:
    rid, verb, group, resource = permission
    role = run.roles[rid]
    with ClusterClient.for_url(run.sim.url) as client:
        store = StateStore(client, TARGET, NAMESPACE)
        client.apply(role_without(role, verb, group, resource))
        try:
            failed = None
            for name in VERBS:
                state_before = store.load().to_data()
                done = dra_gitops(run.operator, verb_line(name, run), env())
                if done.returncode != 0:
                    failed = (name, done, store.load().to_data())
                    break
        finally:
            client.apply(role)
            # The next permission's run starts from a target that is not suspended.
            store.update(lambda state: setattr(state, "suspended", None))
        assert failed is not None, f"every verb still succeeds without {permission}: it is not needed"
        name, done, state_after = failed
        assert "forbidden" in (done.stdout + done.stderr).lower(), (name, explain(done))
        assert state_after == state_before, name  # the verb that failed left the state as it was


def test_no_wildcards_watch_secrets_or_writes_beyond_state_and_leases(run: Run) -> None:
    for rid, role in run.roles.items():
        for rule in role["rules"]:
            values = [*rule["verbs"], *rule["apiGroups"], *rule["resources"]]
            assert not any("*" in v for v in values) and "nonResourceURLs" not in rule, (rid, rule)
            assert "secrets" not in rule["resources"] and "watch" not in rule["verbs"], (rid, rule)
    writes = {(p[0], p[1], p[3]) for p in granted(run.roles) if p[1] not in ("get", "list")}
    assert writes == {(ROLES[0], "update", "configmaps"), (ROLES[0], "update", "leases")}
