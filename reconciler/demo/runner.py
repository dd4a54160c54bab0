"""The demo's world (an embedded cluster, a Git server, the controller) and the play of the story on it.

Everything is real except the hardware: the simulated cluster serves the Kubernetes API over HTTP on
127.0.0.1 with its scheduler, controllers, kubelets and the `gpu.example.com` driver; the Git server is a
bare repository the controller fetches from; the controller is the one `dra-gitops run` starts, triggered
by its generic webhook after each push. Nothing outside the demo's temporary directory is touched.

The hardware has one flaw, set up with the cluster and said when it starts: on the nodes of `BAD_ZONE` the
kubelet makes the plugin of `BAD_IMAGE` crash-loop (an older GPU firmware), so that build passes the canary
and halts the upgrade in waves at the first wave with a node of that zone. What the story then shows about
it (the wave, the node, the evidence) is what the reconciler recorded.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import secrets
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler.demo.story import (
    BAD_IMAGE,
    BAD_ZONE,
    GPUS_PER_NODE,
    NODE_ZONES,
    SEED_EDITS,
    STORY,
    ZONE_LABEL,
    Step,
)
from reconciler.demo.terminal import Narrator
from reconciler.errors import DraGitopsError, EnvironmentProblem, UserError
from reconciler.outcome import Outcome

TARGET = "default"
DRIVER = "gpu.example.com"
CANARY_LABEL = "dra-gitops.io/canary"
EXAMPLE = Path(__file__).resolve().parent / "example"
# Passes that are not the answer to a push.
SETTLED = (Outcome.UNCHANGED, Outcome.HELD, Outcome.DRIFT_CORRECTED)
# How often the demo looks at the state, the Events and the taint rules while a rollout in waves runs.
WATCH_INTERVAL = 0.05


class DemoFailed(DraGitopsError):
    """A step did not end the way the story needs."""


@dataclass
class DemoOptions:
    workdir: Path | None = None  # kept afterwards when given; a temporary directory otherwise
    keep: bool = False
    grace: float = 5.0
    poll_interval: float = 5.0
    step_timeout: float = 120.0


class DemoRepo:
    """The Git server (a bare repository) and the team's working clone that commits and pushes to it."""

    def __init__(self, root: Path) -> None:
        self.bare = root / "server.git"
        self.work = root / "work"
        root.mkdir(parents=True, exist_ok=True)
        self._git("init", "--quiet", "--bare", "--initial-branch=main", str(self.bare), cwd=root)
        self._git("init", "--quiet", "--initial-branch=main", str(self.work), cwd=root)
        self.git("remote", "add", "origin", str(self.bare))

    def _git(self, *args: str, cwd: Path) -> str:
        identity = ["-c", "user.name=Platform Team", "-c", "user.email=platform@example.com"]
        env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
        for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
            env.pop(name, None)
        try:
            done = subprocess.run(
                ["git", *identity, "-c", "commit.gpgsign=false", *args],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
        except FileNotFoundError as exc:
            raise EnvironmentProblem("the demo needs the `git` command; install git") from exc
        except subprocess.CalledProcessError as exc:
            raise EnvironmentProblem(f"git {' '.join(args)}: {exc.stderr.strip()}", where=str(cwd)) from exc
        return done.stdout.strip()

    def git(self, *args: str) -> str:
        return self._git(*args, cwd=self.work)

    def seed(self, source: Path) -> None:
        shutil.copytree(source, self.work, dirs_exist_ok=True, ignore=shutil.ignore_patterns(".git"))

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "--quiet", "-m", message)
        return self.git("rev-parse", "HEAD")

    def revert_head(self) -> str:
        self.git("revert", "--no-edit", "HEAD")
        return self.git("rev-parse", "HEAD")

    def push(self) -> None:
        self.git("push", "--quiet", "origin", "HEAD:refs/heads/main")


class DemoWorld:
    """Starts and stops the cluster, the Git server and the controller, all under one directory."""

    def __init__(self, root: Path, options: DemoOptions) -> None:
        self.root = root
        self.options = options
        self.kubeconfig = root / "kubeconfig"
        self.webhook_token = secrets.token_urlsafe(24)
        self.cluster: Any = None
        self.control: Any = None
        self.client: Any = None
        self.watch_client: Any = None  # the demo's own reads while the controller works
        self.controller: Any = None
        self.repo: DemoRepo | None = None
        self.port = 0
        self.passes: queue.Queue[Any] = queue.Queue()

    def start_cluster(self) -> None:
        from reconciler.sim import controlplane
        from reconciler.sim.server import SimCluster

        # v1beta2 beside v1: the cluster serves DeviceTaintRule, which the waves' drain writes.
        self.cluster = SimCluster(port=0, served_versions=("v1", "v1beta2")).start()
        labels = [{ZONE_LABEL: zone} for zone in NODE_ZONES]
        labels[0][CANARY_LABEL] = "true"
        self.control = controlplane.install(
            self.cluster,
            nodes=len(NODE_ZONES),
            devices_per_node=GPUS_PER_NODE,
            drivers=[DRIVER],
            node_labels=labels,
        )
        bad_nodes = {f"sim-node-{i}" for i, zone in enumerate(NODE_ZONES) if zone == BAD_ZONE}
        bad_image = BAD_IMAGE.split(": ", 1)[1]
        self.control.fail_pods(
            lambda pod: (
                (pod.get("spec") or {}).get("nodeName") in bad_nodes
                and any(c.get("image") == bad_image for c in (pod.get("spec") or {}).get("containers") or [])
            ),
            "CrashLoopBackOff",
        )
        self.cluster.write_kubeconfig(self.kubeconfig)

    def start_repo(self) -> DemoRepo:
        self.repo = DemoRepo(self.root / "git")
        self.repo.seed(EXAMPLE)
        for edit in SEED_EDITS:
            edit.apply(self.repo.work)
        return self.repo

    def start_controller(self) -> int:
        from reconciler.cluster.client import ClusterClient
        from reconciler.delivery.check import CheckOptions
        from reconciler.loop.config.targets import Secret, Target, WebhookAuth
        from reconciler.loop.run.controller import Controller
        from reconciler.loop.run.settings import ControllerOptions
        from reconciler.ui.build import build_dashboard

        assert self.repo is not None
        self.client = ClusterClient.from_kubeconfig(str(self.kubeconfig))
        self.watch_client = ClusterClient.from_kubeconfig(str(self.kubeconfig))
        target = Target(
            name=TARGET,
            repo=str(self.repo.bare),
            branch="main",
            poll_interval=self.options.poll_interval,
            grace=self.options.grace,
            webhooks=WebhookAuth(generic_token=Secret(value=self.webhook_token)),
            origin="demo",
        )
        options = ControllerOptions(
            cache_dir=self.root / "cache",
            port=0,
            identity="dra-gitops-demo",
            stage_timeout=self.options.step_timeout,
            verify_timeout=self.options.step_timeout,
            shutdown_timeout=10.0,
            check=CheckOptions(),
        )
        options.dashboard = build_dashboard(self.client, targets=[target], cache_dir=options.cache_dir)
        self.controller = Controller(self.client, [target], options)
        self.controller.pass_listeners.append(lambda _target, result: self.passes.put(result))
        self.port = self.controller.start()
        return self.port

    def push_hook(self) -> None:
        """What the Git server's webhook does after a push: POST /hooks/generic with the bearer token."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/hooks/generic",
            data=json.dumps({"target": TARGET}).encode(),
            headers={"Authorization": f"Bearer {self.webhook_token}", "Content-Type": "application/json"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            if answer.status != 202:
                raise DemoFailed(f"webhook answered {answer.status}", where="/hooks/generic")

    def wait_for_pass(self, sha: str, timeout: float, tick: Callable[[], None] | None = None) -> Any:
        """The controller's answer to the push of `sha`: its first pass of that sha that did something.
        `tick` is called about every WATCH_INTERVAL while waiting (and once more at the end)."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                result = self.passes.get(timeout=min(left, WATCH_INTERVAL) if tick else left)
            except queue.Empty:
                if tick is not None:
                    tick()
                    continue
                break
            if tick is not None:
                tick()
            if result.sha == sha and result.outcome not in SETTLED:
                return result
            if result.outcome == Outcome.SOURCE_ERROR:
                raise DemoFailed(f"the controller could not read Git: {result.message}", where=sha[:12])
        raise DemoFailed(f"no pass of {sha[:12]} finished within {timeout:.0f} s", where=TARGET)

    def stop(self) -> None:
        if self.controller is not None:
            self.controller.stop()
        if self.client is not None:
            self.client.close()
        if self.watch_client is not None:
            self.watch_client.close()
        if self.control is not None:
            self.control.stop()
        if self.cluster is not None:
            self.cluster.stop()


class _ToNarrator(logging.Handler):
    """The controller's and the sim's log lines become the spinner's detail line."""

    def __init__(self, narrator: Narrator) -> None:
        super().__init__(logging.INFO)
        self.narrator = narrator
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if record.levelno >= logging.WARNING:
            self.warnings.append(message)
        self.narrator.detail(message.splitlines()[0] if message else "")


def _route_logs(handler: logging.Handler) -> list[tuple[logging.Logger, int, bool]]:
    saved = []
    for name in ("dra_gitops", "reconciler"):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.setLevel(logging.INFO)
        logger.propagate = False
        logger.addHandler(handler)
    return saved


def _restore_logs(handler: logging.Handler, saved: list[tuple[logging.Logger, int, bool]]) -> None:
    for logger, level, propagate in saved:
        logger.removeHandler(handler)
        logger.setLevel(level)
        logger.propagate = propagate


def run_demo(options: DemoOptions, narrator: Narrator, wait_forever: Any = None) -> int:
    """Play the story; 0 when every step ended as the story says. `wait_forever` blocks for --keep."""
    from reconciler.demo.narrate import describe_result, history_table

    if not EXAMPLE.is_dir():
        raise EnvironmentProblem(
            "the example manifests are missing from this installation", where=str(EXAMPLE)
        )
    if options.workdir is not None and options.workdir.exists() and any(options.workdir.iterdir()):
        raise UserError(
            "the demo's --workdir must be empty or new (the demo creates its repositories there)",
            where=str(options.workdir),
        )
    root = options.workdir or Path(tempfile.mkdtemp(prefix="dra-gitops-demo-"))
    root.mkdir(parents=True, exist_ok=True)
    world = DemoWorld(root, options)
    handler = _ToNarrator(narrator)
    saved = _route_logs(handler)
    started = time.monotonic()
    try:
        narrator.say("dra-gitops demo: a GitOps history of a GPU stack, reconciled on an embedded cluster")
        narrator.begin(f"Starting a cluster ({_cluster_text()})")
        world.start_cluster()
        repo = world.start_repo()
        narrator.end(True, f"cluster at {world.cluster.url}; Git server {repo.bare}")
        failures = 0
        previous_failed = False
        for number, step in enumerate(STORY, start=1):
            tick = _wave_ticker(world, step, narrator)  # made before the push: what follows it is new
            sha = _push_step(world, repo, step, previous_failed, narrator, number)
            if number == 1:
                narrator.detail("starting the controller")
                world.start_controller()
            else:
                world.push_hook()
            result = world.wait_for_pass(sha, options.step_timeout, tick)
            ok, lines = describe_result(world.client, step, result)
            previous_failed = result.outcome != Outcome.APPLIED
            narrator.end(ok, lines[0])
            for line in lines[1:]:
                narrator.say(f"    {line}")
            if not ok:
                failures += 1
                break
        narrator.say()
        narrator.say(history_table(world.client, TARGET))
        total = time.monotonic() - started
        if failures:
            narrator.say(f"demo: a step did not end as the story says ({total:.1f} s)")
            return 1
        narrator.say(f"demo: {len(STORY)} pushes, every one ended as expected, in {total:.1f} s")
        if options.keep and wait_forever is not None:
            _keep_running(world, narrator, wait_forever, options)
        return 0
    finally:
        narrator.close()
        _restore_logs(handler, saved)
        world.stop()
        if options.workdir is None:
            shutil.rmtree(root, ignore_errors=True)


def _wave_ticker(world: DemoWorld, step: Step, narrator: Narrator) -> Callable[[], None] | None:
    """For a step whose push upgrades the driver in waves: tell each wave as it happens."""
    from reconciler.demo.waves import WaveWatch

    if not step.waves:
        return None
    watch = WaveWatch(world.watch_client, TARGET)

    def tick() -> None:
        for line in watch.poll():
            narrator.say(f"    {line}")

    return tick


def _cluster_text() -> str:
    zones: dict[str, list[str]] = {}
    for index, zone in enumerate(NODE_ZONES):
        zones.setdefault(zone, []).append(f"sim-node-{index}")
    where = "; ".join(f"{zone}: {', '.join(nodes)}" for zone, nodes in zones.items())
    gpus = f"{GPUS_PER_NODE} GPU{'s' if GPUS_PER_NODE > 1 else ''} each"
    flaw = f"{BAD_ZONE}'s GPUs run an older firmware that driver {BAD_IMAGE.rsplit(':', 1)[1]} crash-loops on"
    return f"{len(NODE_ZONES)} nodes, driver {DRIVER}, {gpus}, sim-node-0 the canary; {where}; {flaw}"


def _push_step(
    world: DemoWorld, repo: DemoRepo, step: Step, previous_failed: bool, narrator: Narrator, number: int
) -> str:
    narrator.say()
    narrator.begin(f"[{number}/{len(STORY)}] {step.title}: {step.why}")
    if step.revert_previous and previous_failed:
        reverted = repo.git("rev-parse", "--short=12", "HEAD")
        repo.revert_head()
        narrator.say(f"    git revert {reverted} (the failed commit)")
    for edit in step.edits:
        for line in edit.apply(repo.work):
            narrator.say(f"    {line}")
    sha = repo.commit(step.message)
    repo.push()
    narrator.say(f"    pushed {sha[:12]} {step.message!r}; expecting: {_expectation(step)}")
    return sha


def _expectation(step: Step) -> str:
    return {
        Outcome.APPLIED: "applied and verified",
        Outcome.DENIED: "denied by policy, nothing written",
        Outcome.ROLLED_BACK: f"applied, verification fails ({step.expect_diagnosis}), rolled back",
    }[step.expect]


def _keep_running(world: DemoWorld, narrator: Narrator, wait_forever: Any, options: DemoOptions) -> None:
    assert world.repo is not None
    lines = [
        "",
        "The cluster and the reconciler keep running. In another terminal:",
        f"  export KUBECONFIG={world.kubeconfig}",
        "  kubectl get nodes,resourceslices,resourceclaims -A",
        "  dra-gitops status",
        "  dra-gitops checklist",
        f"  cd {world.repo.work}   # edit, commit, `git push origin HEAD:main`",
        f"The reconciler polls every {options.poll_interval:.0f} s; its webhook is "
        f"http://127.0.0.1:{world.port}/hooks/generic, metrics on /metrics.",
        f"Dashboard: http://127.0.0.1:{world.port}/",
        "Ctrl-C stops everything"
        + (" and removes the demo's files." if options.workdir is None else f"; {world.root} stays."),
    ]
    for line in lines:
        narrator.say(line)
    wait_forever()
