"""`dra-gitops ui` as a user runs it: a process serving the dashboard of the sim after a demo-like history,
reading the targets file, fetching the Git source into its own cache for commit subjects and reports."""

from __future__ import annotations

import http.client
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers import wait_for
from pass_support import TARGET
from ui_support import HOSTILE_MESSAGE, World

from reconciler.cli import cli

TOKEN = "t0ken-" + "u" * 32


def fetch(url: str, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    host_port = url.removeprefix("http://").rstrip("/")
    host, port = host_port.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=120)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    finally:
        conn.close()


@pytest.fixture
def ui_process(world: World, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    config = tmp_path / "targets.yaml"
    config.write_text(f"targets:\n  - name: {TARGET}\n    repo: {world.remote.url}\n    branch: main\n")
    token = tmp_path / "token"
    token.write_text(TOKEN + "\n")
    command = [
        sys.executable, "-m", "reconciler", "ui", "--kubeconfig", str(world.kubeconfig), "--config", str(config),
        "--cache-dir", str(tmp_path / "cache"), "--listen", "127.0.0.1:0", "--token-file", str(token),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        url = process.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:"), (
            url,
            process.stderr.read() if process.poll() is not None else "",
        )
        yield url, process
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)


def test_ui_serves_the_state_commits_and_reports(
    world: World, ui_process: tuple[str, subprocess.Popen[str]]
) -> None:
    url, process = ui_process
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert fetch(url, "/")[0] == 401
    code, page = fetch(url, "/", auth)
    assert code == 200 and world.shas["bad"][:12] in page
    # Commit subjects come from its own clone of the remote (fetched when a page first names a commit).
    code, page = fetch(url, f"/targets/{TARGET}/history", auth)
    assert code == 200
    wait_for(
        lambda: "driver back to v0.3.0" in fetch(url, f"/targets/{TARGET}/history", auth)[1],
        120,
        "commit subjects",
    )
    code, markdown = fetch(
        url, f"/targets/{TARGET}/commits/{world.shas['denied']}/report?format=markdown", auth
    )
    assert code == 200 and "driver-canary" in markdown
    code, page = fetch(url, f"/targets/{TARGET}/commits/{world.shas['denied']}", auth)
    assert HOSTILE_MESSAGE not in page and "&lt;script&gt;" in page
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=60) == 0


def test_ui_refuses_an_empty_token_file_naming_it(world: World, tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("\n")
    done = CliRunner().invoke(cli, ["ui", "--kubeconfig", str(world.kubeconfig), "--token-file", str(empty)])
    assert done.exit_code == 1
    assert f"{empty}:1: the dashboard token file is empty" in done.output


def test_ui_refuses_to_serve_the_network_open_unless_told(world: World, tmp_path: Path) -> None:
    base = ["ui", "--kubeconfig", str(world.kubeconfig), "--listen", "0.0.0.0:0"]
    done = CliRunner().invoke(cli, base)
    assert done.exit_code == 1
    assert "--listen: the dashboard would be open to anyone who reaches 0.0.0.0" in done.output
    assert "--ui-insecure-open" in done.output


def test_ui_listens_on_this_machine_only_by_default() -> None:
    done = CliRunner().invoke(cli, ["ui", "--help"])
    assert done.exit_code == 0 and "127.0.0.1:8090" in done.output


def test_the_dra_reader_role_is_enough(world: World) -> None:
    """Every page's reads, made with a dra-reader token (the sim's RBAC deciding), are allowed."""
    import yaml
    from werkzeug.test import Client

    from reconciler.cluster.client import ClusterClient, Forbidden
    from reconciler.ui.app import Dashboard
    from reconciler.ui.gather import ClusterData

    root = Path(__file__).resolve().parents[2]
    for path in (
        root / "deploy" / "namespace" / "namespace.yaml",
        root / "deploy" / "reader" / "rbac-reader.yaml",
    ):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                world.client.apply(doc)
    answer = world.client.request(
        "POST", "/api/v1/namespaces/dra-gitops/serviceaccounts/dra-reader/token", body={"spec": {}}
    )
    with ClusterClient.for_url(world.cluster.url, token=answer["status"]["token"]) as reader:
        with pytest.raises(Forbidden):  # the token is really held to the role: no Secrets
            reader.list_kind("", "Secret", "dra-gitops")
        browser = Client(Dashboard(ClusterData(reader, state_namespace="dra-gitops")))
        for path in (
            "/",
            f"/targets/{TARGET}/history",
            f"/targets/{TARGET}/commits/{world.shas['bad']}",
            "/devices",
            "/api/version",
        ):
            got = browser.get(path)
            assert got.status_code == 200, (path, got.data[:300])
        assert world.shas["bad"][:12] in browser.get("/").get_data(as_text=True)
