"""`dra-gitops run` serves the dashboard at `/` of its HTTP port, guarded by `--ui-token-file`, next to its
probes and metrics (which keep their own rules); commit subjects and reports come from its workers' Git
caches."""

from __future__ import annotations

import http.client
import signal
import socket
import subprocess
import sys
from pathlib import Path

from helpers import GitRemote, wait_for

from reconciler.sim.server import SimCluster

MANIFEST = """apiVersion: v1
kind: Namespace
metadata:
  name: team
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: team
data:
  note: "<script>window.pwned=1</script>"
"""


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", path, headers=headers or {})
        answer = conn.getresponse()
        return answer.status, answer.read().decode()
    except OSError:
        return 0, ""
    finally:
        conn.close()


def test_run_serves_the_dashboard(sim_cluster: SimCluster, tmp_path: Path) -> None:
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    remote = GitRemote(tmp_path / "git")
    (remote.work / "app.yaml").write_text(MANIFEST)
    sha = remote.commit_and_push("settings for <b>team</b>")
    token = tmp_path / "ui-token"
    token.write_text("let-me-in-" + "k" * 32 + "\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable, "-m", "reconciler", "run", "--repo", remote.url, "--kubeconfig", str(kubeconfig),
        "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp_path / "cache"), "--poll-interval", "1s",
        "--ui-token-file", str(token), "-q",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    auth = {"Authorization": "Bearer let-me-in-" + "k" * 32}
    try:
        wait_for(lambda: get(port, "/healthz")[0] == 200, 120, "the controller's HTTP port")
        assert get(port, "/")[0] == 401
        assert get(port, "/metrics")[0] == 200  # the token is the dashboard's only
        wait_for(lambda: sha[:12] in get(port, "/", auth)[1], 120, "the first pass on the targets page")
        history = "/targets/default/history"
        wait_for(lambda: f'title="{sha}"' in get(port, history, auth)[1], 120, "the first pass's record")
        code, page = get(port, f"/targets/default/commits/{sha}", auth)
        assert code == 200 and "settings for &lt;b&gt;team&lt;/b&gt;" in page
        code, markdown = get(port, f"/targets/default/commits/{sha}/report?format=markdown", auth)
        assert code == 200 and markdown.startswith(f"## Policy report of {sha}")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err


def test_run_refuses_an_open_dashboard_on_the_network(tmp_path: Path) -> None:
    """Closed by default: a non-loopback operator port needs a token, a proxy, or saying it is open."""
    from click.testing import CliRunner

    from reconciler.cli import cli

    args = ["run", "--repo", str(tmp_path / "none.git"), "--kubeconfig", str(tmp_path / "missing"), "--once"]
    done = CliRunner().invoke(cli, [*args, "--listen", "0.0.0.0:0"])
    assert done.exit_code == 1 and "--listen: the dashboard would be open to anyone" in done.output
    short = tmp_path / "short"
    short.write_text("x" * 31 + "\n")
    done = CliRunner().invoke(cli, [*args, "--listen", "0.0.0.0:0", "--ui-token-file", str(short)])
    assert done.exit_code == 1 and "is 31 bytes; at least 32 are needed" in done.output
    done = CliRunner().invoke(cli, [*args, "--listen", "0.0.0.0:0", "--ui-auth", "proxy"])
    assert done.exit_code == 1 and "--ui-auth=proxy needs --ui-proxy-cidr" in done.output
    assert "127.0.0.1:8080" in CliRunner().invoke(cli, ["run", "--help"]).output
