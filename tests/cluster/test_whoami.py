"""`requester`: the name a verb records for who ran it."""

from __future__ import annotations

import getpass
import socket
from pathlib import Path

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.whoami import cluster_user, local_user, requester
from reconciler.sim.server import SimCluster


def test_local_user_names_the_login_and_the_host() -> None:
    assert local_user() == f"{getpass.getuser()}@{socket.gethostname()}"


def test_requester_is_the_local_login_when_the_server_names_no_user(sim_cluster: SimCluster) -> None:
    # A server that will not say (older than 1.28, or a refusal): only the local login is known.
    sim_cluster.fail_next(1, 404, match="selfsubjectreviews")
    with ClusterClient.for_url(sim_cluster.url) as client:
        who = requester(client)
    assert who == local_user()


def test_requester_names_the_user_the_api_server_authenticated(
    sim_cluster: SimCluster, tmp_path: Path
) -> None:
    # The admin kubeconfig's token: the sim's admin user, as SelfSubjectReview reports it.
    kubeconfig = sim_cluster.write_kubeconfig(tmp_path / "kubeconfig")
    with ClusterClient.from_kubeconfig(str(kubeconfig)) as client:
        user = cluster_user(client)
        who = requester(client)
    assert user and who == f"{user} ({local_user()})"
