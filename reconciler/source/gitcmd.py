"""Running the `git` binary for remote operations: credentials from files, secrets kept out of every text.

Fetch and push go through the `git` binary (not GitPython's wrappers) so that the environment of each
command is ours alone: credentials reach git through `GIT_SSH_COMMAND` and `GIT_CONFIG_*` variables for that
one process, never through the URL, the command line or the cache's config file. Every text that may leave
this module (exception messages, log lines) passes through `GitRunner.scrub` first.
"""

from __future__ import annotations

import base64
import os
import re
import shlex
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from reconciler.errors import EnvironmentProblem, UserError

# ext:: runs arbitrary commands and is never wanted; file is allowed for local mirrors and tests.
_ALLOWED_PROTOCOLS = "file:git:http:https:ssh"
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)(?P<user>[^/@\s:]*):[^/@\s]*@")
# Inherited variables that would point git at another repository or another configuration.
_INHERITED_GIT_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_CEILING_DIRECTORIES",
    "GIT_CONFIG_PARAMETERS",
)


@dataclass(frozen=True)
class GitCredentials:
    """Where the secrets are. Files are read at each command, so a rotated Secret is picked up.

    With no credential at all, git and ssh use the caller's own configuration (ssh-agent, credential
    helpers), which is what a person running the CLI on a laptop expects. With any credential set, the
    user's and the system's git configuration are ignored so nothing but these files is used.
    """

    ssh_key_file: Path | None = None
    known_hosts_file: Path | None = None
    token_file: Path | None = None
    username: str = "git"
    bearer: bool = False  # token as `Authorization: Bearer`; default is HTTP basic with `username`
    allow_http: bool = False  # a token over plain http:// travels in clear text: refused unless allowed

    @property
    def isolated(self) -> bool:
        return any(f is not None for f in (self.ssh_key_file, self.known_hosts_file, self.token_file))


def redact_url(url: str) -> str:
    """The URL as it may be shown: any password in it replaced by `***`."""
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", url)


def check_url(url: str) -> None:
    """Refuse URLs that would carry a secret or be read by git as an option."""
    shown = redact_url(url)
    if not url or url.startswith("-"):
        raise UserError("a Git URL must not be empty or start with '-'", where=shown)
    if shown != url:
        raise UserError(
            "the Git URL contains a password: put the token in a file (--token-file)", where=shown
        )


class GitFailed(EnvironmentProblem):
    """A git command failed; `stderr` is already scrubbed of secrets.

    Callers translate it into an error that says what could not be done (clone, fetch, push).
    """

    def __init__(self, args: list[str], returncode: int, stderr: str) -> None:
        self.returncode = returncode
        self.stderr = stderr
        super().__init__(f"git {args[0] if args else ''} exited with {returncode}: {stderr}")

    def summary(self) -> str:
        """The lines of git's stderr that explain the failure, on one line."""
        lines = [line.strip() for line in self.stderr.splitlines() if line.strip()]
        wanted = [line for line in lines if line.startswith(("fatal:", "error:", "ssh:", "remote:"))]
        text = "; ".join(wanted or lines[-3:]) or f"exit status {self.returncode}"
        return text.replace("fatal: ", "").replace("error: ", "")


class GitRunner:
    """Runs git with the credentials of one remote, a timeout, and scrubbed output."""

    def __init__(self, url: str, credentials: GitCredentials, timeout: float) -> None:
        check_url(url)
        self.url = url
        self.shown_url = redact_url(url)
        self.credentials = credentials
        self.timeout = timeout
        scheme = urlsplit(url).scheme
        if credentials.token_file is not None and scheme == "http" and not credentials.allow_http:
            raise UserError(
                "refusing to send a token over plain http:// (use https:// or allow http explicitly)",
                where=self.shown_url,
            )

    def _token(self) -> str | None:
        path = self.credentials.token_file
        if path is None:
            return None
        try:
            token = path.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise UserError(f"cannot read the token file ({exc.strerror})", where=str(path)) from exc
        if not token:
            raise UserError("the token file is empty", where=str(path))
        return token

    def _auth_header(self, token: str) -> str:
        if self.credentials.bearer:
            return f"Authorization: Bearer {token}"
        pair = f"{self.credentials.username}:{token}".encode()
        return f"Authorization: Basic {base64.b64encode(pair).decode('ascii')}"

    def _secrets(self) -> list[str]:
        token = self._token()
        if token is None:
            return []
        header = self._auth_header(token)
        return [header, header.split(" ", 2)[2], token]

    def scrub(self, text: str) -> str:
        """`text` with every secret of this remote, and any URL password, replaced by `***`."""
        for secret in self._secrets():
            text = text.replace(secret, "***")
        return redact_url(text)

    def environment(self, *, remote: bool) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in _INHERITED_GIT_VARS}
        env.update(LC_ALL="C", LANGUAGE="C", GIT_TERMINAL_PROMPT="0", GIT_ALLOW_PROTOCOL=_ALLOWED_PROTOCOLS)
        config: list[tuple[str, str]] = [("gc.auto", "0"), ("maintenance.auto", "false")]
        creds = self.credentials
        if creds.isolated:
            env.update(GIT_CONFIG_GLOBAL=os.devnull, GIT_CONFIG_NOSYSTEM="1", GIT_ASKPASS="", SSH_ASKPASS="")
            config.append(("credential.helper", ""))
        if remote and creds.ssh_key_file is not None:
            ssh = ["ssh", "-F", os.devnull, "-i", str(creds.ssh_key_file), "-o", "IdentitiesOnly=yes"]
            ssh += ["-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=yes"]
            if creds.known_hosts_file is not None:
                ssh += ["-o", f"UserKnownHostsFile={creds.known_hosts_file}"]
            env["GIT_SSH_COMMAND"] = shlex.join(ssh)
        token = self._token() if remote else None
        if token is not None:
            config.append(("http.extraHeader", self._auth_header(token)))
        env["GIT_CONFIG_COUNT"] = str(len(config))
        for index, (key, value) in enumerate(config):
            env[f"GIT_CONFIG_KEY_{index}"] = key
            env[f"GIT_CONFIG_VALUE_{index}"] = value
        return env

    def execute(
        self,
        args: list[str],
        *,
        cwd: Path,
        remote: bool = False,
        stdin: bytes | None = None,
        extra_env: dict[str, str] | None = None,
    ) -> tuple[int, str, str]:
        """Run `git args` in `cwd`: exit status, stdout, scrubbed stderr. A timeout is an EnvironmentProblem."""
        env = self.environment(remote=remote)
        env.update(extra_env or {})
        process = subprocess.Popen(
            ["git", *args],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # no terminal to prompt on; a timeout kills git and its helpers together
        )
        try:
            out, err = process.communicate(stdin, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
            # cause hidden: TimeoutExpired holds git's output unscrubbed, and says no more than this message
            raise EnvironmentProblem(
                f"git {args[0]} did not finish within {self.timeout:g} s", where=self.shown_url
            ) from None
        return process.returncode, out.decode("utf-8", "replace"), self.scrub(err.decode("utf-8", "replace"))

    def run(self, args: list[str], *, cwd: Path, remote: bool = False, stdin: bytes | None = None) -> str:
        """Run `git args` in `cwd` and return its stdout; a failure raises GitFailed (scrubbed)."""
        status, out, err = self.execute(args, cwd=cwd, remote=remote, stdin=stdin)
        if status != 0:
            raise GitFailed(args, status, err)
        return out


def fetch_remote_ref(
    runner: GitRunner, repo_dir: Path, remote_ref: str, local_ref: str, what: str
) -> str | None:
    """Fetch `remote_ref` into the private `local_ref` of the cache and return its commit; None when the
    remote has no such ref. `what` names it in the error of a remote that cannot be reached."""
    args = ["fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--end-of-options", runner.url]
    try:
        runner.run([*args, f"+{remote_ref}:{local_ref}"], cwd=repo_dir, remote=True)
    except GitFailed as exc:
        if "couldn't find remote ref" in exc.stderr.lower():
            return None
        raise EnvironmentProblem(f"cannot fetch {what}: {exc.summary()}", where=runner.shown_url) from exc
    return runner.run(["rev-parse", "--verify", f"{local_ref}^{{commit}}"], cwd=repo_dir).strip()
