"""examples/ci/ promotion pipelines (github/promote.yml, gitlab/promote.gitlab-ci.yml), run through ci_runner
against a real controller: staging and production on two simulated clusters (staging's in the
controller's own, production's reached through the kubeconfig its `run --config` entry names), one Git
remote, production `promoteFrom: staging` with a soak and `approval: manual`, and the commit statuses
posted to a local GitHub API double whose requests are the `status` events the workflow reacts to."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Iterator
from contextlib import ExitStack
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from ci_runner import (
    CI,
    GITHUB,
    GITLAB_PROMOTE,
    ROOT,
    JobRun,
    Workspace,
    load,
    run_github,
    run_gitlab,
    unmatched,
)
from controller_support import free_port
from helpers import GitRemote, wait_for
from notify_support import Recorder

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.loop.config.targetfile import load_targets
from reconciler.loop.promotion.decide import parse_time
from reconciler.loop.run.controller import Controller
from reconciler.loop.run.settings import ControllerOptions
from reconciler.loop.store.state import StateStore, TargetState
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

EXAMPLE = ROOT / "manifests-example"
REPOSITORY = "platform/dra"  # the forge's name of the manifests repository
WAIT = 300  # seconds: generous, the machine is shared


@dataclass
class Flow:
    remote: GitRemote
    home: ClusterClient  # the controller's cluster, where staging lives too
    production: ClusterClient
    home_kubeconfig: Path
    forge: Recorder
    tmp: Path

    def state(self, target: str) -> TargetState:
        client = self.home if target == "staging" else self.production
        return StateStore(client, target).load()

    def statuses(self, sha: str) -> list[tuple[str, str]]:
        """(context, state) of every commit status posted for `sha`, in order."""
        path = f"/repos/{REPOSITORY}/statuses/{sha}"
        return [(r.json()["context"], r.json()["state"]) for r in self.forge.requests() if r.path == path]


def cluster(stack: ExitStack) -> SimCluster:
    sim = stack.enter_context(SimCluster())
    plane = install(sim, nodes=2, devices_per_node=2, node_labels=[{"dra-gitops.io/canary": "true"}, {}])
    stack.callback(plane.stop)
    return sim


@pytest.fixture
def flow(tmp_path: Path) -> Iterator[Flow]:
    with ExitStack() as stack:
        home_sim, production_sim = cluster(stack), cluster(stack)
        home_kubeconfig = home_sim.write_kubeconfig(tmp_path / "home.kubeconfig")
        production_kubeconfig = production_sim.write_kubeconfig(tmp_path / "clusters" / "production")
        forge = stack.enter_context(Recorder())
        token = tmp_path / "forge-token"
        token.write_text("forge-token-for-tests\n")
        remote = GitRemote(tmp_path / "git")
        shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
        # What the pipelines read from the repository: the controller's config, the gate script.
        (remote.work / ".dra-gitops").mkdir()
        shutil.copy(CI / "promotion-gate.py", remote.work / ".dra-gitops" / "promotion-gate.py")
        config = remote.work / ".dra-gitops" / "targets.yaml"
        config.write_text(
            textwrap.dedent(f"""\
            defaults:
              repo: {remote.url}
              pollInterval: 2s
              grace: 5s
              commitStatus:
                provider: github
                apiUrl: {forge.url}
                repository: {REPOSITORY}
                tokenFile: {token}
            targets:
              - name: staging
              - name: production
                kubeconfig: {production_kubeconfig}
                pollInterval: 1h
                promoteFrom: staging
                soak: 5s
                approval: manual
            """)
        )
        remote.commit_and_push("the example GPU stack, and the controller's config")
        home = stack.enter_context(ClusterClient.for_url(home_sim.url))
        production = stack.enter_context(ClusterClient.for_url(production_sim.url))
        options = ControllerOptions(
            cache_dir=tmp_path / "cache",
            port=0,
            stage_timeout=90,
            verify_timeout=90,
            check=CheckOptions(),
            kubeconfig=str(home_kubeconfig),
        )
        controller = Controller(home, load_targets(config.read_text(), str(config)), options)
        controller.start()
        stack.callback(controller.stop)
        yield Flow(remote, home, production, home_kubeconfig, forge, tmp_path)


def results(runs: dict[str, JobRun]) -> dict[str, str]:
    return {job: run.result for job, run in runs.items()}


def detail(runs: dict[str, JobRun]) -> str:
    return "\n".join(
        f"--- {j.id} {j.result}\n" + "\n".join(s.output[-3000:] for s in j.steps) for j in runs.values()
    )


def commands(ws: Workspace, job: str) -> list[tuple[str, int]]:
    return [(i.argv[0], i.code) for i in ws.invocations() if i.job == job]


def four_trainers(work: Path) -> None:
    path = work / "40-workloads" / "trainer.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    docs[0]["spec"]["replicas"] = 4
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def owner(work: Path, team: str) -> None:
    path = work / "40-workloads" / "notebook.yaml"
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    docs[0]["metadata"].setdefault("annotations", {})["example.com/owner"] = team
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def trainer_replicas(client: ClusterClient) -> int:
    deployment = client.get(client.resource_for("apps/v1", "Deployment"), "ml-team", "trainer")
    assert deployment is not None
    return int(deployment["spec"]["replicas"])


def status_event(sha: str, context: str, state: str) -> dict[str, str]:
    """The github context of a workflow run for a `status` event (GITHUB_SHA: the default branch's head)."""
    return {
        "event_name": "status",
        "sha": sha,
        "ref_name": "main",
        "event.sha": sha,
        "event.context": context,
        "event.state": state,
    }


def github_workflow() -> dict[str, Any]:
    workflow = load(GITHUB["promote"])
    workflow["env"] |= {
        "POLL_SECONDS": "1",
        "GATE_WAIT_SECONDS": str(WAIT),
        "DELIVERY_WAIT_SECONDS": str(WAIT),
    }
    return workflow


def test_github_promote_approves_what_staging_verified_and_refuses_what_it_did_not(flow: Flow) -> None:
    secrets = {
        "DRA_OPERATOR_KUBECONFIG": flow.home_kubeconfig.read_text(),
        "DRA_READER_KUBECONFIG": flow.home_kubeconfig.read_text(),
    }
    good = flow.remote.git("rev-parse", "HEAD")

    # Staging verified the commit; production, woken by it, awaits approval. The forge saw staging's
    # statuses in order: the `success` one is the event the workflow runs for.
    wait_for(lambda: flow.state("staging").last_good == good, WAIT, "staging verified")
    awaiting = wait_for(lambda: flow.state("production").approval, WAIT, "production awaiting approval")
    assert awaiting.sha == good and not awaiting.approved_by
    # Only once staging held it for the soak.
    verified_at = next(v.at for v in flow.state("staging").verified if v.sha == good)
    assert parse_time(awaiting.since) - parse_time(verified_at) >= timedelta(seconds=5)
    assert flow.state("production").last_good is None
    wait_for(lambda: ("dra-gitops/staging", "success") in flow.statuses(good), 60, "staging's status")
    assert [s for s in flow.statuses(good) if s[0] == "dra-gitops/staging"] == [
        ("dra-gitops/staging", "pending"),
        ("dra-gitops/staging", "success"),
    ]

    # 1. The reviewers approved the environment: the job checks production awaits this very commit,
    # approves it, and the next job waits until production verified it.
    ws = Workspace(flow.remote.work, flow.tmp / "runner-1")
    runs = run_github(github_workflow(), ws, status_event(good, "dra-gitops/staging", "success"), secrets)
    assert results(runs) == {"approve": "success", "outcome": "success"}, detail(runs)
    assert runs["approve"].outputs == {"verdict": "awaiting"}
    assert commands(ws, "approve") == [("status", 0), ("status", 0), ("approve", 0)]
    approve = [i for i in ws.invocations() if i.argv[0] == "approve"][0]
    assert approve.argv[-1] == good and approve.argv[1:5] == [
        "--config",
        ".dra-gitops/targets.yaml",
        "--target",
        "production",
    ]
    outcome = commands(ws, "outcome")
    assert outcome[-1] == ("status", 0) and all(code == 0 for _, code in outcome)
    assert unmatched(runs, ws) == []
    summary = (ws.scratch / "outcome.summary.md").read_text()
    assert summary.startswith(f"### production: applied {good[:12]} applied and verified")
    assert "::notice title=Promoted::production: applied" in runs["outcome"].steps[-1].output

    after = flow.state("production")
    assert after.last_good == good and after.approval is None
    delivered = next(r for r in after.history if r.sha == good and r.outcome == "applied")
    assert delivered.approval and delivered.approval["by"]
    assert delivered.promoted and delivered.promoted["from"] == "staging"
    assert trainer_replicas(flow.production) == 2
    wait_for(lambda: ("dra-gitops/production", "success") in flow.statuses(good), 60, "production's status")

    # 2. More GPUs than exist: staging fails verification and rolls back; its `failure` status starts no
    # job, and a `success` status for it (set by anyone with statuses: write) is refused by the gate.
    four_trainers(flow.remote.work)
    bad = flow.remote.commit_and_push("4 trainers")
    wait_for(
        lambda: (a := flow.state("staging").last_attempted) is not None and a.sha == bad and a.rolled_back,
        WAIT,
        "staging rolled the bad commit back",
    )
    wait_for(lambda: ("dra-gitops/staging", "failure") in flow.statuses(bad), 60, "staging's failure status")
    ws = Workspace(flow.remote.work, flow.tmp / "runner-2")
    runs = run_github(github_workflow(), ws, status_event(bad, "dra-gitops/staging", "failure"), secrets)
    assert results(runs) == {"approve": "skipped", "outcome": "skipped"}
    assert ws.invocations() == []

    ws = Workspace(flow.remote.work, flow.tmp / "runner-3")
    runs = run_github(github_workflow(), ws, status_event(bad, "dra-gitops/staging", "success"), secrets)
    assert results(runs) == {"approve": "failure", "outcome": "skipped"}, detail(runs)
    assert commands(ws, "approve") == [("status", 0), ("status", 1)]  # staging's last attempt failed
    gate = next(s for s in runs["approve"].steps if s.name == "Production awaits this commit")
    assert f"::error title=Not approved::production: the upstream did not verify {bad[:12]}" in gate.output
    assert [s.outcome for s in runs["approve"].steps][-1] == "skipped"  # `dra-gitops approve` never ran
    assert unmatched(runs, ws) == []
    after = flow.state("production")
    assert after.last_good == good and after.approval is None
    assert trainer_replicas(flow.production) == 2
    assert not any(s[0] == "dra-gitops/production" for s in flow.statuses(bad))

    # 3. The controller's cluster (staging's state) cannot be reached from the runner: exit 4 from
    # `status`, passed on as the job's failure, not taken for a refusal.
    nowhere = yaml.safe_load(flow.home_kubeconfig.read_text())
    nowhere["clusters"][0]["cluster"]["server"] = f"http://127.0.0.1:{free_port()}"
    ws = Workspace(flow.remote.work, flow.tmp / "runner-4")
    unreachable = {**secrets, "DRA_OPERATOR_KUBECONFIG": yaml.safe_dump(nowhere)}
    runs = run_github(github_workflow(), ws, status_event(good, "dra-gitops/staging", "success"), unreachable)
    assert results(runs) == {"approve": "failure", "outcome": "skipped"}, detail(runs)
    assert commands(ws, "approve") == [("status", 0), ("status", 4)]
    assert (
        "Not approved"
        not in next(s for s in runs["approve"].steps if s.name == "Production awaits this commit").output
    )


def test_gitlab_promote_waits_for_staging_then_approves_in_the_protected_environment(flow: Flow) -> None:
    config = load(GITLAB_PROMOTE)
    config["variables"] |= {
        "POLL_SECONDS": "1",
        "GATE_WAIT_SECONDS": str(WAIT),
        "DELIVERY_WAIT_SECONDS": str(WAIT),
    }
    project = {
        "DRA_OPERATOR_KUBECONFIG": str(flow.home_kubeconfig),
        "DRA_READER_KUBECONFIG": str(flow.home_kubeconfig),
    }

    def predefined(sha: str) -> dict[str, str]:
        return {
            "CI_PIPELINE_SOURCE": "push",
            "CI_COMMIT_BRANCH": "main",
            "CI_DEFAULT_BRANCH": "main",
            "CI_COMMIT_SHA": sha,
        }

    # 1. The pipeline of the push runs while the controller works: `staging-verified` waits until staging
    # verified the commit and production awaits it; nobody played the manual job yet.
    good = flow.remote.git("rev-parse", "HEAD")
    ws = Workspace(flow.remote.work, flow.tmp / "runner-0")
    runs = run_gitlab(config, ws, predefined(good), project, play_manual=False)
    assert results(runs) == {"staging-verified": "success", "approve-production": "manual"}, detail(runs)
    assert f"production: awaiting {good[:12]} awaits approval" in runs["staging-verified"].steps[0].output
    assert flow.state("production").last_good is None

    # Played in the protected environment: approved, delivered, verified.
    ws = Workspace(flow.remote.work, flow.tmp / "runner-1")
    runs = run_gitlab(config, ws, predefined(good), project)
    assert results(runs) == {"staging-verified": "success", "approve-production": "success"}, detail(runs)
    played = commands(ws, "approve-production")
    assert played[:2] == [("status", 0), ("approve", 0)] and played[-1] == ("status", 0)
    assert unmatched(runs, ws) == []
    assert (
        f"production: applied {good[:12]} applied and verified" in runs["approve-production"].steps[0].output
    )
    assert flow.state("production").last_good == good

    # 2. A commit staging rolled back: `staging-verified` refuses it, the manual job never becomes playable.
    four_trainers(flow.remote.work)
    bad = flow.remote.commit_and_push("4 trainers")
    ws = Workspace(flow.remote.work, flow.tmp / "runner-2")
    runs = run_gitlab(config, ws, predefined(bad), project)
    assert results(runs) == {"staging-verified": "failure", "approve-production": "skipped"}, detail(runs)
    assert (
        f"production: refused the upstream did not verify {bad[:12]}"
        in runs["staging-verified"].steps[0].output
    )
    assert "approve" not in [argv for argv, _ in commands(ws, "staging-verified")]
    assert flow.state("production").last_good == good
    assert trainer_replicas(flow.production) == 2

    # 3. Its fix goes through: the pipeline waits for staging again, then production takes the fix.
    shutil.copy(EXAMPLE / "40-workloads" / "trainer.yaml", flow.remote.work / "40-workloads" / "trainer.yaml")
    owner(flow.remote.work, "ml-platform")
    fix = flow.remote.commit_and_push("2 trainers again; the notebook's owner")
    ws = Workspace(flow.remote.work, flow.tmp / "runner-3")
    runs = run_gitlab(config, ws, predefined(fix), project)
    assert results(runs) == {"staging-verified": "success", "approve-production": "success"}, detail(runs)
    assert flow.state("production").last_good == fix
    notebook = flow.production.get(
        flow.production.resource_for("apps/v1", "Deployment"), "ml-team", "notebook"
    )
    assert notebook is not None and notebook["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
