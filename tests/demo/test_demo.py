"""`dra-gitops demo`: the whole story as a user runs it (a subprocess), plus its parts."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
import yaml
from helpers import wait_for

from reconciler.cluster.client import ClusterClient
from reconciler.demo.story import SEED_EDITS, STORY, Edit
from reconciler.demo.terminal import Narrator
from reconciler.errors import DraGitopsError

ROOT = Path(__file__).resolve().parents[2]


def _env(tmp_path: Path) -> dict[str, str]:
    # The demo's temporary directory goes under tmp_path, so the test can see nothing is left behind.
    return {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT), "RUST_BACKTRACE": "0"}


def test_the_story_plays_to_the_end_and_leaves_nothing(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    verdicts = [
        line.strip() for line in out.splitlines() if line.startswith("  ✓ ") or line.startswith("  ✗ ")
    ]
    # One verdict for the cluster, one per push; all of them ticks.
    assert len(verdicts) == len(STORY) + 1, verdicts
    assert all(v.startswith("✓") for v in verdicts), verdicts
    n = len(STORY)

    def step(number: int) -> str:
        return out.split(f"[{number}/{n}]")[1].split(f"[{number + 1}/{n}]" if number < n else "target:")[0]

    assert verdicts[1].startswith("✓ applied and verified: 12 to create")
    baseline = step(1)
    assert baseline.count("inside pod ml-team/trainer-") == 2 and "printenv GPU_DEVICE_0 → gpu-" in baseline
    assert verdicts[2].startswith("✓ denied by policy; nothing written")
    assert (
        "class-before-template: ResourceClaimTemplate/ml-team/single-gpu requests DeviceClass gpu-large"
        in out
    )
    assert verdicts[3].startswith("✓ denied by policy")
    assert (
        "driver-canary: DaemonSet/gpu-system/gpu-example-kubelet-plugin changes the driver's pod template"
        in out
    )
    # The canary step: v0.4.0 on the canary node only.
    canary = step(4)
    assert (
        "driver pod gpu-example-kubelet-plugin-canary-" in canary and "on sim-node-0: v0.4.0, ready" in canary
    )
    assert all(f"on sim-node-{i}: v0.3.0, ready" in canary for i in range(1, 5))
    # Upgrades in waves declared: the DaemonSet goes OnDelete, nothing moves.
    declared = step(5)
    assert verdicts[5].startswith("✓ applied and verified: 0 to create, 1 to update")
    assert all(f"on sim-node-{i}: v0.3.0, ready" in declared for i in range(1, 5))
    assert "[Event" not in declared
    # The promotion in waves: canary node first (none: it has its own DaemonSet), then zones in turn.
    promotion = step(6)
    assert _told(promotion, "Event") == [
        "[Event WaveStarted] wave 1 of 3: sim-node-1",
        "[Event WaveVerified] wave 1 of 3: 1/4 node(s) done",
        "[Event WaveStarted] wave 2 of 3: sim-node-3",
        "[Event WaveVerified] wave 2 of 3: 2/4 node(s) done",
        "[Event WaveStarted] wave 3 of 3: sim-node-2, sim-node-4",
        "[Event WaveVerified] wave 3 of 3: 4/4 node(s) done",
        "[Event RolloutComplete] 4 node(s) upgraded in 3 wave(s)",
    ]
    told = _told(promotion, "")
    for wave, nodes in ((1, ["sim-node-1"]), (2, ["sim-node-3"]), (3, ["sim-node-2", "sim-node-4"])):
        started = told.index(f"[Event WaveStarted] wave {wave} of 3: {', '.join(nodes)}")
        verified = next(
            i for i, line in enumerate(told) if line.startswith(f"[Event WaveVerified] wave {wave}")
        )
        # each of the wave's pools drained (if the demo's poll saw it) and undrained between the two Events
        for line in told[started + 1 : verified]:
            assert any(f"pool {node} " in line for node in nodes), told
            assert f"(wave-{wave})" in line or "undrained" in line, told
        soak = [i for i, line in enumerate(told) if line.startswith(f"[state] soaking: wave {wave} of 3 ")]
        if soak:  # then the soak, from the state (if the demo's poll saw it: it lasts 0.5 s)
            assert soak == [verified + 1] and "next soak ends at " in told[verified + 1], told
    # (the demo polls every 0.05 s: it sees the drains and the soaks, if not always every one)
    assert sum("drained: the gpu.example.com devices of pool" in line for line in told) >= 1
    assert sum(line.startswith("[state] soaking: wave ") for line in told) >= 1
    assert verdicts[6].startswith("✓ applied and verified")
    assert all(f"on sim-node-{i}: v0.4.0, ready" in promotion for i in range(0, 5))
    # A build that runs on the canary but crash-loops on zone-b: halted at wave 2, reverted, rolled back.
    assert "on sim-node-0: v0.4.1, ready" in step(7)
    bad = step(8)
    assert verdicts[8].startswith("✓ rolled back to ")
    events = _told(bad, "Event")
    assert events[:4] == [
        "[Event WaveStarted] wave 1 of 3: sim-node-1",
        "[Event WaveVerified] wave 1 of 3: 1/4 node(s) done",
        "[Event WaveStarted] wave 2 of 3: sim-node-3",
        events[3],
    ]
    assert events[3].startswith("[Event WaveFailed] wave 2 of 3 failed on node sim-node-3: pod ")
    assert "CrashLoopBackOff" in events[3]
    assert events[4:] == [
        "[Event RolloutReverting] the old plugin back on sim-node-1, sim-node-3",
        events[5],
    ]
    assert events[5].startswith("[Event RolloutReverted] old plugin back on 2 node(s)")
    assert "diagnosis driver-wave-failed: the upgrade of driver gpu.example.com halted at wave 2 of 3" in bad
    assert "evidence: wave 2, node sim-node-3: pod gpu-example-kubelet-plugin-" in bad
    assert "sim-node-4" not in "".join(events)  # wave 3 never started
    # More GPUs than exist, then the fix.
    assert verdicts[9].startswith("✓ rolled back to ")
    assert "diagnosis exhaustion: " in out
    # the capacity rule foresaw it: the fifth trainer has no device left
    assert "warned before applying: capacity: Deployment/ml-team/trainer: pod ml-team/trainer-" in step(9)
    fix = step(10)
    assert fix.count("claim ml-team/") == 5  # the notebook's shared GPU and four trainers: all 5 devices
    # It ends with status's history: newest first, the rollbacks recorded.
    history = out.split("history (newest first):")[1]
    assert history.count("verify-failed → rolled back to") == 1
    assert history.count("apply-failed → rolled back to") == 1  # the wave that halted
    assert history.count(" denied") == 2
    assert "every one ended as expected" in out
    # Piped: the story, and no spinner or terminal control codes anywhere.
    assert "\x1b" not in out and "\x1b" not in done.stderr and "\r" not in done.stderr
    assert list(tmp_path.iterdir()) == []


def _told(text: str, source: str) -> list[str]:
    """The lines of the waves' narration (`[Event ...]`, `[DeviceTaintRule] ...`, `[state] ...`), stripped;
    only those of `source` when given."""
    return [
        line.strip() for line in text.splitlines() if line.strip().startswith("[" + source) and "] " in line
    ]


def test_keep_leaves_a_cluster_to_explore_until_stopped(tmp_path: Path) -> None:
    out_file = tmp_path / "out.txt"
    with out_file.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "demo", "--keep", "--plain"],
            env=_env(tmp_path),
            stdout=out,
            stderr=subprocess.PIPE,
            text=True,
        )
    try:
        wait_for(
            lambda: "Ctrl-C stops everything" in out_file.read_text(), timeout=240, what="the demo to finish"
        )
        text = out_file.read_text()
        kubeconfig = next(
            line.split("=", 1)[1] for line in text.splitlines() if "export KUBECONFIG=" in line
        ).strip()
        with ClusterClient.from_kubeconfig(kubeconfig) as client:
            claims = client.list_kind("resource.k8s.io", "ResourceClaim", "ml-team")
            assert len(claims) == 5  # the notebook's and the fix's four trainers'
            assert all((c.get("status") or {}).get("allocation") for c in claims)
            state = client.get(client.resource_for("v1", "ConfigMap"), "dra-gitops", "dra-gitops-default")
            assert state is not None and state["data"]["lastGood"]
        status = subprocess.run(
            [sys.executable, "-m", "reconciler", "status", "--kubeconfig", kubeconfig],
            env=_env(tmp_path),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert status.returncode == 0, status.stderr
        assert "last attempt:" in status.stdout and " applied" in status.stdout
        # The dashboard of the demo's controller, at the URL it printed: the story's history is there.
        url = next(
            line.split("Dashboard: ", 1)[1] for line in text.splitlines() if "Dashboard: " in line
        ).strip()
        with urllib.request.urlopen(url.rstrip("/") + "/targets/default/history", timeout=60) as answer:
            page = answer.read().decode()
        assert answer.status == 200 and page.count("data-record=") >= 7
        assert "rolled back" in page.lower() and "denied" in page
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "demo: stopping" in err
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_workdir_is_kept(tmp_path: Path) -> None:
    workdir = tmp_path / "demo"
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--workdir", str(workdir), "--plain"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (workdir / "kubeconfig").is_file()
    log = subprocess.run(
        ["git", "-C", str(workdir / "git" / "work"), "log", "--format=%s"], capture_output=True, text=True
    ).stdout.splitlines()
    # The pushes and the four reverts of the failed commits, newest first.
    assert log[0] == STORY[-1].message and log[-1] == STORY[0].message
    assert sum(1 for subject in log if subject.startswith("Revert ")) == 4
    assert len(log) == len(STORY) + 4

    # A second run into the same directory is refused with a clear message, and touches nothing.
    again = subprocess.run(
        [sys.executable, "-m", "reconciler", "demo", "--workdir", str(workdir), "--plain"],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 1
    assert f"{workdir}: the demo's --workdir must be empty or new" in again.stderr
    assert (workdir / "kubeconfig").is_file()


def test_edit_replaces_exactly_one_line_and_keeps_indentation(tmp_path: Path) -> None:
    file = tmp_path / "a.yaml"
    file.write_text("spec:\n  replicas: 2  \n  other: x\n")
    told = Edit("a.yaml", "replicas: 2", "replicas: 4").apply(tmp_path)
    assert file.read_text() == "spec:\n  replicas: 4\n  other: x\n"
    assert told == ["a.yaml: replicas: 2 → replicas: 4"]
    with pytest.raises(DraGitopsError, match="expected exactly one line 'replicas: 2', found 0"):
        Edit("a.yaml", "replicas: 2", "replicas: 3").apply(tmp_path)
    # Several consecutive lines, compared without their indentation, become the new text.
    file.write_text("spec:\n  strategy:\n    type: A\n    a: 1\n  other: x\n")
    edit = Edit("a.yaml", "strategy:\ntype: A\na: 1", "strategy:\n    type: B")
    told = edit.apply(tmp_path)
    assert file.read_text() == "spec:\n  strategy:\n    type: B\n  other: x\n"
    # told as the lines removed and added, without the first line both keep
    assert told == ["a.yaml:", "  -     type: A", "  -     a: 1", "  +     type: B"]
    with pytest.raises(DraGitopsError, match="found 0"):
        Edit("a.yaml", "strategy:\nother: x", "y").apply(tmp_path)


def test_every_story_edit_applies_to_the_example(tmp_path: Path) -> None:
    import shutil

    def seeded() -> None:
        shutil.copytree(ROOT / "manifests-example", tmp_path / "repo")
        for edit in SEED_EDITS:
            edit.apply(tmp_path / "repo")

    seeded()
    trainer = yaml.safe_load((tmp_path / "repo" / "40-workloads" / "trainer.yaml").read_text())
    assert trainer["metadata"]["annotations"] == {"dra-gitops.io/verify-exec": "printenv GPU_DEVICE_0"}
    for step in STORY:
        if step.revert_previous:
            shutil.rmtree(tmp_path / "repo")
            seeded()
        for edit in step.edits:
            edit.apply(tmp_path / "repo")


def test_narrator_spins_on_a_terminal_and_is_plain_otherwise() -> None:
    out, err = io.StringIO(), io.StringIO()
    narrator = Narrator(out=out, err=err, animate=True)
    narrator.begin("step one")
    narrator.detail("stage 4 workloads: waiting")
    wait_for(lambda: "stage 4 workloads: waiting" in err.getvalue(), 10, "the spinner drew the detail")
    narrator.end(True, "applied")
    assert "stage 4 workloads: waiting" in err.getvalue() and "\r\x1b[2K" in err.getvalue()
    assert out.getvalue().startswith("step one\n  ✓ applied (")

    out, err = io.StringIO(), io.StringIO()
    narrator = Narrator(out=out, err=err, animate=False)
    narrator.begin("step one")
    narrator.detail("stage 4 workloads: waiting")
    narrator.end(False, "denied")
    assert err.getvalue() == ""
    assert "✗ denied" in out.getvalue()
