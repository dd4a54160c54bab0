"""Real Git repositories for the source tests (imported by their conftest and test modules): a bare "server" repository and a working clone pushing to it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# The developer's own git configuration (signing, hooks, templates) must not leak into the tests.
GIT_ENV = {
    **{k: v for k, v in os.environ.items() if not k.startswith("GIT_")},
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_AUTHOR_NAME": "Dev",
    "GIT_AUTHOR_EMAIL": "dev@example.com",
    "GIT_COMMITTER_NAME": "Dev",
    "GIT_COMMITTER_EMAIL": "dev@example.com",
}


def run_git(cwd: Path, *args: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        ["git", *args], cwd=cwd, env={**GIT_ENV, **(env or {})}, check=True, capture_output=True, text=True
    )
    return result.stdout.strip()


class Remote:
    """A bare repository standing in for the Git server, and a clone of it to commit and push from."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.server = root / "server.git"
        self.work = root / "work"
        root.mkdir(parents=True)
        run_git(root, "init", "--quiet", "--bare", "-b", "main", str(self.server))
        run_git(root, "init", "--quiet", "-b", "main", str(self.work))
        self.git("remote", "add", "origin", str(self.server))

    @property
    def url(self) -> str:
        return self.server.as_uri()  # file:///...

    def git(self, *args: str, env: dict[str, str] | None = None) -> str:
        return run_git(self.work, *args, env=env)

    def commit(self, files: dict[str, str | None], message: str = "change", *sign: str) -> str:
        """Write (or, for None, delete) files, commit them and return the new sha (not pushed)."""
        for name, text in files.items():
            path = self.work / name
            if text is None:
                path.unlink()
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        self.git("add", "-A")
        self.git(*sign, "commit", "--quiet", "--allow-empty", "-m", message)
        return self.head()

    def head(self, rev: str = "HEAD") -> str:
        return self.git("rev-parse", rev)

    def push(self, ref: str = "main", force: bool = False) -> None:
        self.git("push", "--quiet", *(["--force"] if force else []), "origin", ref)

    def server_head(self, branch: str) -> str:
        return run_git(self.server, "rev-parse", f"refs/heads/{branch}")


def manifest(name: str, data: str = "v1") -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: {name}, namespace: default}}\ndata: {{v: {data}}}\n"
