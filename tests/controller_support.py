"""A `dra-gitops run` controller as a real process, and what tests do around it (tests/reconcile, tests/faults):
start it on a free port, talk to it over HTTP as a forge would, read the state it wrote, kill it."""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import yaml
from helpers import GitRemote

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.state import StateStore
from reconciler.sim.server import SimCluster

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = REPO / "manifests-example"
SECRET = "s3cret-for-tests"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Running:
    def __init__(self, args: list[str], port: int, log: Path) -> None:
        self.port = port
        self.log = log
        env = {**os.environ, "PYTHONPATH": str(REPO), "RUST_BACKTRACE": "0"}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "run", *args, "--listen", f"127.0.0.1:{port}"],
            stdout=subprocess.DEVNULL,
            stderr=log.open("w"),
            env=env,
        )

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def get(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.url(path), timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)
        except OSError:
            return 0

    def text(self, path: str) -> str:
        with urllib.request.urlopen(self.url(path), timeout=5) as answer:
            return str(answer.read().decode())

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> int:
        request = urllib.request.Request(self.url(path), data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(answer.status)
        except urllib.error.HTTPError as exc:
            return int(exc.code)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def github_push(remote: GitRemote, secret: str = SECRET) -> tuple[bytes, dict[str, str]]:
    body = json.dumps({"ref": "refs/heads/main", "repository": {"clone_url": remote.url}}).encode()
    signature = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return body, {
        "X-GitHub-Event": "push",
        "X-Hub-Signature-256": signature,
        "Content-Type": "application/json",
    }


def example_remote(root: Path) -> GitRemote:
    remote = GitRemote(root)
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


def edit(remote: GitRemote, relative: str, change: Any) -> None:
    path = remote.work / relative
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    change(docs[0])
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))


def state_of(sim: SimCluster, target: str = "default") -> Any:
    with ClusterClient.for_url(sim.url) as client:
        return StateStore(client, target).load()


def readyz(run: Running) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(run.url("/readyz"), timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
