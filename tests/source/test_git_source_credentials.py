"""Credentials come from files, reach git only through its environment, and never show up in any text."""

from __future__ import annotations

import base64
import logging
import socket
from pathlib import Path

import pytest
from gitrepos import Remote, manifest
from httpgit import git_http_server

from reconciler.errors import EnvironmentProblem, UserError
from reconciler.source.gitcmd import GitCredentials, GitRunner, redact_url
from reconciler.source.remote import GitSource

TOKEN = "s3cr3t-t0ken-4f9a2c"


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends: nobody listens there


def every_form(token: str, username: str = "git") -> list[str]:
    return [token, base64.b64encode(f"{username}:{token}".encode()).decode()]


def assert_nowhere(texts: list[str], token: str) -> None:
    for text in texts:
        for form in every_form(token):
            assert form not in text


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    return path


def test_token_never_leaks_when_the_server_is_unreachable(
    tmp_path: Path, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    url = f"https://127.0.0.1:{closed_port()}/team/manifests.git"
    source = GitSource(url, tmp_path / "cache", credentials=GitCredentials(token_file=token_file))
    with source, pytest.raises(EnvironmentProblem) as caught:
        source.fetch()
    message = str(caught.value)
    assert message.startswith(f"{url}: cannot clone:") and "Failed to connect to 127.0.0.1" in message
    assert_nowhere([message, repr(caught.value), caplog.text], TOKEN)


def test_token_reaches_the_server_and_only_the_server(
    remote: Remote, tmp_path: Path, token_file: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    sha = remote.commit({"a.yaml": manifest("a")})
    remote.push()
    with git_http_server(remote.root, "deploy-bot", TOKEN) as server:
        url = f"{server.url}/server.git"
        for credentials in (
            GitCredentials(token_file=token_file, username="deploy-bot", allow_http=True),
            GitCredentials(token_file=token_file, bearer=True, allow_http=True),
        ):
            cache = tmp_path / f"cache-{credentials.bearer}"
            with GitSource(url, cache, credentials=credentials) as source:
                assert source.fetch().sha == sha
                assert [p for p, _ in source.tree(sha).blobs] == ["a.yaml"]
            stored = [
                p.read_text(errors="replace")
                for p in cache.rglob("*")
                if p.is_file() and p.stat().st_size < 65536
            ]
            assert_nowhere(stored, TOKEN)  # not in the cache's config, nor in any other small file
        assert any(auth.startswith("Basic ") for auth in server.seen_auth)
        assert f"Bearer {TOKEN}" in server.seen_auth

        wrong = tmp_path / "wrong-token"
        wrong.write_text("not-the-token")
        refused = GitCredentials(token_file=wrong, allow_http=True)
        source = GitSource(url, tmp_path / "refused", credentials=refused)
        with source, pytest.raises(EnvironmentProblem) as caught:
            source.fetch()
        assert "terminal prompts disabled" in str(caught.value)  # asked for a login: never prompts
        assert_nowhere([str(caught.value), caplog.text], "not-the-token")
    assert_nowhere([caplog.text], TOKEN)


def test_secrets_are_refused_where_they_would_leak(tmp_path: Path, token_file: Path) -> None:
    with pytest.raises(UserError, match="contains a password") as caught:
        GitSource(f"https://bot:{TOKEN}@git.example.com/x.git", tmp_path / "c")
    assert TOKEN not in str(caught.value)
    assert str(caught.value).startswith("https://bot:***@git.example.com/x.git:")
    with pytest.raises(UserError, match="refusing to send a token over plain http"):
        GitSource(
            "http://127.0.0.1:1/x.git", tmp_path / "c", credentials=GitCredentials(token_file=token_file)
        )
    assert redact_url("see ssh://u:pw@h/r and https://h/r") == "see ssh://u:***@h/r and https://h/r"


def test_unreadable_or_empty_token_file_is_a_clear_error(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.write_text("\n")
    for path, message in (
        (tmp_path / "missing", "cannot read the token file"),
        (empty, "the token file is empty"),
    ):
        with (
            GitSource(
                "https://127.0.0.1:1/x.git", tmp_path / "c", credentials=GitCredentials(token_file=path)
            ) as source,
            pytest.raises(UserError, match=message),
        ):
            source.fetch()


def test_ssh_key_is_used_without_prompting(tmp_path: Path) -> None:
    key = tmp_path / "id_ed25519"
    key.write_text("not really a key\n")
    key.chmod(0o600)
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")
    credentials = GitCredentials(ssh_key_file=key, known_hosts_file=known_hosts)
    url = f"ssh://git@127.0.0.1:{closed_port()}/manifests.git"
    source = GitSource(url, tmp_path / "cache", credentials=credentials, timeout=20)
    with source, pytest.raises(EnvironmentProblem) as caught:
        source.fetch()
    message = str(caught.value)
    assert message.startswith(f"{url}: cannot clone:")
    assert "Connection refused" in message and "not really a key" not in message
    ssh = GitRunner(url, credentials, 5).environment(remote=True)["GIT_SSH_COMMAND"]
    assert f"-i {key} -o IdentitiesOnly=yes" in ssh and "-o StrictHostKeyChecking=yes" in ssh
    assert f"-o UserKnownHostsFile={known_hosts}" in ssh and "-o BatchMode=yes" in ssh
