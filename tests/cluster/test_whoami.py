"""`requester`: the name a verb records for who ran it."""

from __future__ import annotations

import getpass
import socket

from reconciler.cluster.client import ClusterClient
from reconciler.cluster.whoami import local_user, requester


def test_local_user_names_the_login_and_the_host() -> None:
    assert local_user() == f"{getpass.getuser()}@{socket.gethostname()}"


def test_requester_is_the_local_login_when_the_server_names_no_user(sim_url: str) -> None:
    # The sim answers no SelfSubjectReview for an anonymous client: only the local login is known.
    with ClusterClient.for_url(sim_url) as client:
        who = requester(client)
    assert who == local_user()
