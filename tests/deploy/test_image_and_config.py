"""The Dockerfile and the Deployment agree with each other and with the CLI: pinned slim base, multi-stage,
non-root, `dra-gitops run` by default with flags `run` accepts, a HEALTHCHECK that really probes /healthz,
the Git tools the Git source needs; and the shipped targets file is a valid `run --config`."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from deploy_support import KUBECTL, NO_KUBECTL, ROOT, kustomize
from helpers import GitRemote, wait_for

from reconciler.cli import cli
from reconciler.loop.config.targetfile import load_targets
from reconciler.sim.server import SimCluster

DOCKERFILE = ROOT / "Dockerfile"
TARGETS = ROOT / "deploy" / "base" / "config" / "targets.yaml"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (word, _) in enumerate(steps) if word == "FROM")
    return steps[last_from:]


def exec_form(value: str) -> list[str]:
    parsed = json.loads(value)
    assert isinstance(parsed, list) and all(isinstance(p, str) for p in parsed), value
    return parsed


def test_pinned_slim_multi_stage_base() -> None:
    steps = instructions()
    args = dict(a.split("=", 1) for word, a in steps if word == "ARG" and "=" in a)
    froms = [a.split()[0] for word, a in steps if word == "FROM"]
    assert len(froms) >= 2, "multi-stage: wheels are built in a stage of their own"
    for image in froms:
        resolved = args.get(image.strip("${}"), image)
        assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm", resolved), resolved


def test_non_root_and_runs_the_reconciler_by_default() -> None:
    stage = final_stage()
    users = [a for word, a in stage if word == "USER"]
    assert users == ["65532:65532"]
    assert exec_form(next(a for w, a in stage if w == "ENTRYPOINT")) == ["dra-gitops"]
    command = exec_form(next(a for w, a in stage if w == "CMD"))
    assert command[0] == "run"
    env = " ".join(a for w, a in stage if w == "ENV")
    assert "HOME=/tmp" in env  # the only writable place


def test_default_command_flags_are_runs_and_match_the_deployment() -> None:
    command = exec_form(next(a for w, a in final_stage() if w == "CMD"))
    help_text = CliRunner().invoke(cli, ["run", "--help"]).output
    for arg in command[1:]:
        flag = arg.split("=", 1)[0]
        assert re.search(rf"(^|\s){re.escape(flag)}[\s,=]", help_text), flag
    if KUBECTL is None:
        pytest.skip(NO_KUBECTL)
    (deployment,) = [d for d in kustomize("base") if d["kind"] == "Deployment"]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    config = next(a for a in command if a.startswith("--config="))
    assert config in container["args"]
    config_mount = next(m for m in container["volumeMounts"] if m["name"] == "config")["mountPath"]
    assert config.split("=", 1)[1] == f"{config_mount}/{TARGETS.name}"
    listen_port = int(next(a for a in command if a.startswith("--listen=")).rsplit(":", 1)[1])
    assert container["ports"][0]["containerPort"] == listen_port


def test_git_source_tools_are_installed() -> None:
    apt = " ".join(a for w, a in final_stage() if w == "RUN" and "apt-get install" in a)
    for package in ("git", "openssh-client", "gnupg", "ca-certificates"):
        assert re.search(rf"\s{re.escape(package)}(\s|$)", apt), package


def test_shipped_targets_are_a_valid_config_using_the_mounted_secret() -> None:
    (target,) = load_targets(TARGETS.read_text(), str(TARGETS))
    assert target.state_namespace == "dra-gitops"
    for path in (target.ssh_key_file, target.known_hosts_file):
        assert path is not None and path.startswith("/etc/dra-gitops/git/")
    if KUBECTL is None:
        pytest.skip(NO_KUBECTL)
    (deployment,) = [d for d in kustomize("base") if d["kind"] == "Deployment"]
    mounts = {
        m["name"]: m["mountPath"]
        for m in deployment["spec"]["template"]["spec"]["containers"][0]["volumeMounts"]
    }
    assert mounts["git-credentials"] == "/etc/dra-gitops/git"
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert volumes["git-credentials"]["secret"]["secretName"] == "dra-gitops-git"


def healthcheck_command(port: int) -> list[str]:
    steps = final_stage()
    value = next(a for w, a in steps if w == "HEALTHCHECK")
    options, _, command = value.partition("CMD ")
    assert "--interval" in options and "--timeout" in options
    argv = exec_form(command)
    assert argv[0] == "python" and "/healthz" in argv[-1]
    # the image's python is the test's python; the port is the test controller's
    return [sys.executable, *[a.replace("127.0.0.1:8080", f"127.0.0.1:{port}") for a in argv[1:]]]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_healthcheck_probes_a_running_controller(tmp_path: Path) -> None:
    port = free_port()
    check = healthcheck_command(port)
    assert subprocess.run(check, capture_output=True, timeout=30).returncode != 0  # nothing listens yet
    remote = GitRemote(tmp_path / "git")
    (remote.work / "ns.yaml").write_text("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: health\n")
    remote.commit_and_push("one namespace")
    with SimCluster() as sim:
        kubeconfig = sim.write_kubeconfig(tmp_path / "kubeconfig")
        controller = subprocess.Popen(
            [
                sys.executable, "-m", "reconciler", "run", "--repo", remote.url, "--kubeconfig", str(kubeconfig),
                "--cache-dir", str(tmp_path / "cache"), "--listen", f"127.0.0.1:{port}", "--poll-interval", "1h",
            ],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:

            def healthy() -> Any:
                return subprocess.run(check, capture_output=True, timeout=30).returncode == 0

            wait_for(healthy, timeout=30, what="the HEALTHCHECK command to pass", interval=0.2)
        finally:
            controller.terminate()
            controller.wait(timeout=60)
    assert subprocess.run(check, capture_output=True, timeout=30).returncode != 0


def test_healthcheck_is_a_one_liner_without_curl() -> None:
    argv = healthcheck_command(8080)
    assert "curl" not in " ".join(argv) and "wget" not in " ".join(argv)
    compile(argv[-1], "<healthcheck>", "exec")
