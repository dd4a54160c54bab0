"""A different cluster answering at the target's cluster's address (issue 29, item 7): the API server went
away and another, empty one came up at the same address. The controller recorded the cluster's identity
(the uid of its kube-system Namespace) at the first pass; it writes nothing of the target there, its
passes fail as an environment problem and `/readyz` answers 503 naming both identities.
"""

from __future__ import annotations

import shutil
import signal
import urllib.error
import urllib.request
from pathlib import Path

from controller_support import Running, example_remote, free_port
from faults_support import ServedSim, write_markers
from helpers import wait_for


def readyz(run: Running) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(run.url("/readyz"), timeout=5) as answer:
            return int(answer.status), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode()
    except OSError:
        return 0, ""


def identity(served: ServedSim) -> str:
    with served.client() as client:
        live = client.get(client.resource_for("v1", "Namespace"), None, "kube-system")
    return str((live or {}).get("metadata", {}).get("uid") or "")


def test_another_cluster_at_the_same_address_is_never_written(tmp_path: Path) -> None:
    served = ServedSim(tmp_path)
    remote = example_remote(tmp_path / "git")
    write_markers(remote, "a")
    good = remote.commit_and_push("revision a")
    args = ["--repo", remote.url, "--kubeconfig", str(served.kubeconfig), "--poll-interval", "1s"]
    args += ["--cache-dir", str(tmp_path / "cache"), "--lease-duration", "3", "--request-timeout", "3s"]
    run = Running(args, free_port(), tmp_path / "run.log")
    try:
        wait_for(lambda: served.state().last_good == good, 90, "the first pass")
        first = identity(served)
        assert served.state().cluster_id == first

        # The API server goes away; another cluster (empty, its own identity) answers at the same address.
        served.kill()
        shutil.rmtree(served.data)
        served.start()
        other = identity(served)
        assert other and other != first
        status, text = wait_for(lambda: (r := readyz(run))[0] == 503 and first in r[1] and r, 60, "503")
        assert other in text, text
        write_markers(remote, "b")
        remote.commit_and_push("revision b")  # a new commit changes nothing: still another cluster
        wait_for(lambda: "another cluster answers" in run.log.read_text(), 60, "the Lease rounds refusing")
        # Nothing of the controller's is written in the other cluster, not even its namespace or Lease; the
        # passes stopped with the Lease (a pass that ran would refuse too: the state's recorded identity).
        wait_for(lambda: "lease lost" in run.log.read_text(), 60, "the Lease run out")
        assert readyz(run)[0] == 503
        with served.client() as client:
            namespaces = client.resource_for("v1", "Namespace")
            assert client.get(namespaces, None, "dra-gitops") is None
            assert client.get(namespaces, None, "ml-team") is None
    finally:
        run.stop(signal.SIGKILL)
        served.stop()
