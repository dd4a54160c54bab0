"""A frozen API server (a `dra-gitops sim serve` process stopped with SIGSTOP): every request gives up
within its timeout and says what went unanswered; a write that may have been carried out is not sent again."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import freeze_process, wait_for

from reconciler.cluster.client import ClusterClient, NoAnswer
from reconciler.cluster.lease import LeaseLock

REPO = Path(__file__).resolve().parents[2]


class Frozen:
    """A sim server in its own process, which the test freezes and thaws."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        command = [sys.executable, "-m", "reconciler", "sim", "serve", "--port", "0", "--components", ""]
        self.proc = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        assert self.proc.stdout is not None
        self.url = self.proc.stdout.readline().strip()
        assert self.url.startswith("http://"), self.url

    def freeze(self) -> None:
        freeze_process(self.proc.pid)

    def thaw(self) -> None:
        os.kill(self.proc.pid, signal.SIGCONT)

    def stop(self) -> None:
        self.thaw()
        self.proc.send_signal(signal.SIGINT)  # how `sim serve` is stopped (Ctrl-C)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)


@pytest.fixture
def server() -> Iterator[Frozen]:
    frozen = Frozen()
    try:
        yield frozen
    finally:
        frozen.stop()


def test_a_read_gives_up_and_names_what_went_unanswered(server: Frozen) -> None:
    with ClusterClient.for_url(server.url, timeout=1, retries=4) as client:
        namespaces = client.resource_for("v1", "Namespace")
        assert client.get(namespaces, None, "default") is not None
        server.freeze()
        before = client.requests_sent
        with pytest.raises(NoAnswer) as error:
            client.get(namespaces, None, "default")
        assert str(error.value) == (
            "Namespace/default: GET /api/v1/namespaces/default: no answer from the API server within 1s"
        )
        assert error.value.exit_code == 4
        # Sent once more (not four times, nor three more inside each attempt): a frozen server stays so.
        assert client.requests_sent - before == 2
        server.thaw()
        assert client.get(namespaces, None, "default") is not None  # answers again once thawed


def test_a_write_that_may_have_happened_is_not_sent_again(server: Frozen) -> None:
    with ClusterClient.for_url(server.url, timeout=1, retries=4) as client:
        configmaps = client.resource_for("v1", "ConfigMap")
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "state", "namespace": "default"},
        }
        created = client.create(configmaps, {**body, "data": {"n": "1"}})
        server.freeze()
        before = client.requests_sent
        change = {**created, "data": {"n": "2"}}
        with pytest.raises(NoAnswer, match=r"^ConfigMap/default/state: PUT .*/configmaps/state: no answer"):
            client.replace(configmaps, change)
        assert client.requests_sent - before == 1
        server.thaw()
        # The server carried it out once it could: a retry at the old resourceVersion would have been
        # refused as a Conflict, as if someone else had written.
        # Thawed, the server answers the PUT it had read and a new GET side by side: wait for the PUT.
        wait_for(
            lambda: (client.get(configmaps, "default", "state") or {}).get("data") == {"n": "2"}, 30, "n: 2"
        )


def test_a_lease_round_on_a_frozen_server_fails_and_says_why(server: Frozen) -> None:
    with ClusterClient.for_url(server.url, timeout=30) as client:
        lease_client = client.bounded(timeout=1, retries=1)
        lock = LeaseLock(lease_client, "default", "dra-gitops-prod", "replica-a")
        assert lock.try_acquire_or_renew() and lock.error is None
        server.freeze()
        assert not lock.try_acquire_or_renew()
        assert lock.error == (
            "cannot acquire or renew the lease: "
            "GET /apis/coordination.k8s.io/v1/namespaces/default/leases/dra-gitops-prod: "
            "no answer from the API server within 1s"
        )
        server.thaw()
        assert lock.try_acquire_or_renew() and lock.error is None
