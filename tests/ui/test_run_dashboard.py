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
    token.write_text("let-me-in\n")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    command = [
        sys.executable, "-m", "reconciler", "run", "--repo", remote.url, "--kubeconfig", str(kubeconfig),
        "--listen", f"127.0.0.1:{port}", "--cache-dir", str(tmp_path / "cache"), "--poll-interval", "1s",
        "--ui-token-file", str(token), "-q",
    ]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    auth = {"Authorization": "Bearer let-me-in"}
    try:
        wait_for(lambda: get(port, "/healthz")[0] == 200, 120, "the controller's HTTP port")
        assert get(port, "/")[0] == 401
        assert get(port, "/metrics")[0] == 200  # the token is the dashboard's only
        wait_for(lambda: sha[:12] in get(port, "/", auth)[1], 120, "the first pass on the targets page")
        history = "/targets/default/history"
        wait_for(lambda: f'id="{sha}"' in get(port, history, auth)[1], 120, "the first pass's record")
        code, page = get(port, f"/targets/default/commits/{sha}", auth)
        assert code == 200 and "settings for &lt;b&gt;team&lt;/b&gt;" in page
        code, markdown = get(port, f"/targets/default/commits/{sha}/report?format=markdown", auth)
        assert code == 200 and markdown.startswith("## dra-gitops policy check")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
