"""Who is running a command, for the records a verb writes (`requestedBy`, `suspended.by`).

The API server's own answer comes first (a SelfSubjectReview, served since Kubernetes 1.28): the user
its authenticators saw, which is what RBAC judged. The local login and host follow, because a shared
service account or an admin kubeconfig names no person.
"""

from __future__ import annotations

import getpass
import socket

from reconciler.cluster.client import ClusterClient
from reconciler.errors import DraGitopsError

SELF_SUBJECT_REVIEW_PATH = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


def cluster_user(client: ClusterClient) -> str | None:
    """The user name the API server authenticated this client as; None when it will not say."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    try:
        review = client.request("POST", SELF_SUBJECT_REVIEW_PATH, body=body, where="SelfSubjectReview")
    except DraGitopsError:
        return None
    user = ((review or {}).get("status") or {}).get("userInfo") or {}
    name = user.get("username")
    return str(name) if name else None


def local_user() -> str:
    try:
        login = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry for the uid (a container's random uid)
        login = "unknown"
    return f"{login}@{socket.gethostname()}"


def requester(client: ClusterClient) -> str:
    """`alice (alice@laptop)`: the cluster's name for the caller, then the local login."""
    user = cluster_user(client)
    local = local_user()
    return f"{user} ({local})" if user else local
