"""Outcomes reported back by a real controller: passes on the simulated cluster following a real Git remote,
commit statuses and a signed webhook to local endpoints. Pending then success for a verified commit,
pending then failure for a denied one; a forge that hangs and a webhook that is down never hold a pass;
no token or URL in the logs or `/metrics`."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path

import pytest
from controller_support import Running, example_remote, free_port
from helpers import GitRemote, wait_for
from notify_support import Recorder, closed_port_url
from pass_support import TARGET, edit

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.config.targets import DEFAULT_STATE_NAMESPACE
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.notify.sender import RetryPolicy
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

TOKEN = "ghp_NotifyTestToken42"
HOOK_SECRET = "hook-signing-secret"
HOOK_PATH = "/hooks/SeCrEt-PaTh"


def controller_for(
    client: ClusterClient, remote: GitRemote, tmp_path: Path, forge: str, hook: str, identity: str
) -> Controller:
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "hook-url").write_text(hook + HOOK_PATH + "\n")
    (tmp_path / "hook-secret").write_text(HOOK_SECRET + "\n")
    config = tmp_path / "targets.yaml"
    config.write_text(
        f"""\
targets:
  - name: {TARGET}
    repo: {remote.url}
    grace: 5s
    commitStatus:
      provider: github
      apiUrl: {forge}
      repository: platform/dra
      tokenFile: {tmp_path / "token"}
      dashboardUrl: https://dash.example.com/{{target}}
    notifications:
      - type: webhook
        urlFile: {tmp_path / "hook-url"}
        secretFile: {tmp_path / "hook-secret"}
        events: [applied, denied, rolled-back]
"""
    )
    targets = load_targets(config.read_text(), str(config))
    options = ControllerOptions(
        cache_dir=tmp_path / "cache",
        port=0,
        identity=identity,
        stage_timeout=60,
        verify_timeout=60,
        check=CheckOptions(),
        notify_retry=RetryPolicy(attempts=3, first_delay=0.05, timeout=60),
        notify_drain=60,  # `run_once` ends by delivering what is queued: generous on a loaded machine
    )
    return Controller(client, targets, options)


def metrics_text(controller: Controller) -> str:
    return controller.metrics.render()[0].decode()


def test_a_verified_commit_goes_pending_then_success_and_a_denied_one_pending_then_failure(
    client: ClusterClient, remote: GitRemote, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with Recorder() as forge, Recorder(default=200) as hook:
        good = remote.commit_and_push("example")
        first = controller_for(client, remote, tmp_path, forge.url, hook.url, "replica-a")
        result = first.run_once()[TARGET]  # drains what is queued (bounded) when it ends
        assert result is not None and result.outcome == "applied"
        metrics = metrics_text(first)
        assert (
            f'dra_gitops_notifications_total{{kind="github",result="delivered",target="{TARGET}"}} 2.0'
            in metrics
        )
        assert (
            f'dra_gitops_notifications_total{{kind="webhook",result="delivered",target="{TARGET}"}} 1.0'
            in metrics
        )

        edit(
            remote,
            "10-driver/kubelet-plugin.yaml",
            lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
                image="registry.example.com/gpu-example-driver:v0.4.0"
            ),
        )
        denied = remote.commit_and_push("driver v0.4.0 straight to main")
        second = controller_for(client, remote, tmp_path, forge.url, hook.url, "replica-a")
        result = second.run_once()[TARGET]
        assert result is not None and result.outcome == "denied"
        # Held: the next pass reports nothing new.
        third = controller_for(client, remote, tmp_path, forge.url, hook.url, "replica-a")
        result = third.run_once()[TARGET]
        assert result is not None and result.outcome == "held"
        statuses, hooks = forge.requests(), hook.requests()

    assert [(r.path, r.json()["state"]) for r in statuses] == [
        (f"/repos/platform/dra/statuses/{good}", "pending"),
        (f"/repos/platform/dra/statuses/{good}", "success"),
        (f"/repos/platform/dra/statuses/{denied}", "pending"),
        (f"/repos/platform/dra/statuses/{denied}", "failure"),
    ]
    assert {r.headers["Authorization"] for r in statuses} == {f"Bearer {TOKEN}"}
    assert {r.json()["context"] for r in statuses} == {f"dra-gitops/{TARGET}"}
    assert {r.json()["target_url"] for r in statuses} == {f"https://dash.example.com/{TARGET}"}
    assert statuses[1].json()["description"].startswith("applied and verified")
    failure = statuses[3].json()["description"]
    assert failure.startswith("denied by policy: 10-driver/kubelet-plugin.yaml:")
    assert "driver-canary" in failure and len(failure) <= 140

    assert [(r.path, r.json()["event"], r.json()["sha"]) for r in hooks] == [
        (HOOK_PATH, "applied", good),
        (HOOK_PATH, "denied", denied),
    ]
    for request in hooks:
        expected = "sha256=" + hmac.new(HOOK_SECRET.encode(), request.body, hashlib.sha256).hexdigest()
        assert request.headers["X-Dra-Gitops-Signature"] == expected
    assert "driver-canary" in hooks[1].json()["message"]

    logged = "\n".join(record.getMessage() for record in caplog.records)
    exposed = metrics_text(second)
    # What the cluster keeps: the state ConfigMap and the Events of the state namespace.
    kept = json.dumps(
        [
            client.list_kind("", "ConfigMap", namespace=DEFAULT_STATE_NAMESPACE),
            client.list_kind("", "Event", namespace=DEFAULT_STATE_NAMESPACE),
        ]
    )
    assert f"dra-gitops-{TARGET}" in kept
    for secret in (TOKEN, HOOK_SECRET, "SeCrEt", hook.url):
        assert secret not in logged
        assert secret not in exposed
        assert secret not in kept


def test_a_hanging_forge_and_a_webhook_that_is_down_never_hold_a_pass(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    sha = remote.commit_and_push("example")
    with Recorder() as forge:
        forge.release.clear()  # the forge takes each request and does not answer until released
        controller = controller_for(client, remote, tmp_path, forge.url, closed_port_url(), "replica-a")
        controller.notifier.start()
        try:
            controller.ensure_namespaces()
            controller.leases.contend()
            result = controller.workers[TARGET].run_pass()
            # The pass ended, applied and verified, while the forge still held its first request unanswered.
            assert result is not None and (result.outcome, result.sha) == ("applied", sha)
            # Nothing came of the forge's request yet: no answer, no timeout (a pass that waited for it would
            # have seen one of them first).
            assert 'kind="github"' not in metrics_text(controller)
            assert forge.holding.wait(60)
            wait_for(
                lambda: 'kind="webhook",result="failed"' in metrics_text(controller),
                60,
                "the webhook given up",
            )
            metrics = metrics_text(controller)
            assert (
                f'dra_gitops_notifications_total{{kind="webhook",result="retried",target="{TARGET}"}} 2.0'
                in metrics
            )
            forge.release.set()
            wait_for(lambda: len(forge.requests()) == 2, 60, "the success status after the pending one")
            assert [r.json()["state"] for r in forge.requests()] == ["pending", "success"]
        finally:
            controller.leases.stop()
            controller.close()


def test_a_commit_that_fails_verification_is_a_failure_with_why_and_its_rollback_is_notified(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    with Recorder() as forge, Recorder(default=204) as hook:
        remote.commit_and_push("example")
        result = controller_for(client, remote, tmp_path, forge.url, hook.url, "replica-a").run_once()[TARGET]
        assert result is not None and result.outcome == "applied"
        edit(remote, "40-workloads/trainer.yaml", lambda d: d["spec"].update(replicas=4))
        bad = remote.commit_and_push("4 trainers: more GPUs than exist")
        result = controller_for(client, remote, tmp_path, forge.url, hook.url, "replica-a").run_once()[TARGET]
        assert result is not None and result.outcome == "rolled-back"
        statuses = [r.json() for r in forge.requests()][2:]
        events = [r.json() for r in hook.requests()]
    assert [s["state"] for s in statuses] == ["pending", "failure"]
    assert statuses[1]["description"].startswith("verify-failed, rolled back: ")
    assert [(e["event"], e["sha"]) for e in events][1:] == [("rolled-back", bad)]
    assert events[1]["message"] == result.message


def test_dra_gitops_run_reports_to_the_forge_and_counts_it_in_metrics(tmp_path: Path) -> None:
    """The `run` command as a process: its config file's `commitStatus` reaches the forge, `/metrics` counts
    it, and neither its log nor `/metrics` holds the token."""
    remote = example_remote(tmp_path / "git")
    sha = remote.commit_and_push("example")
    (tmp_path / "token").write_text(TOKEN + "\n")
    with SimCluster() as sim, Recorder() as forge:
        plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
        config = tmp_path / "targets.yaml"
        config.write_text(
            f"""\
targets:
  - name: {TARGET}
    repo: {remote.url}
    grace: 5s
    pollInterval: 1h
    commitStatus: {{provider: gitea, apiUrl: "{forge.url}/api/v1", repository: platform/dra, tokenFile: {tmp_path / "token"}}}
"""
        )
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        run = Running(
            [
                "--config",
                str(config),
                "--kubeconfig",
                str(kubeconfig),
                "--cache-dir",
                str(tmp_path / "cache"),
            ],
            free_port(),
            tmp_path / "run.log",
        )
        try:
            wait_for(lambda: len(forge.requests()) == 2, 120, "pending and success")
            wait_for(lambda: 'result="delivered"' in run.text("/metrics"), 30, "counted in /metrics")
            metrics = run.text("/metrics")
        finally:
            assert run.stop() == 0, run.log.read_text()[-3000:]
            plane.stop()
    assert [(r.path, r.json()["state"]) for r in forge.requests()] == [
        (f"/api/v1/repos/platform/dra/statuses/{sha}", "pending"),
        (f"/api/v1/repos/platform/dra/statuses/{sha}", "success"),
    ]
    assert {r.headers["Authorization"] for r in forge.requests()} == {f"token {TOKEN}"}
    assert (
        f'dra_gitops_notifications_total{{kind="gitea",result="delivered",target="{TARGET}"}} 2.0' in metrics
    )
    assert TOKEN not in metrics
    assert TOKEN not in run.log.read_text()
