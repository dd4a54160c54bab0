"""The Kubernetes edge: one small client over the official `kubernetes` package.

Composed of parts, each its own module: `errors.py` (the API server's error answers as typed errors),
`transport.py` (`ApiTransport`: one request, rate limit, retries, counters), `discovery.py` (`Discovery`
over a transport: the groups, versions and resources the cluster serves), `podexec.py` (a command run in
a pod through the exec API) and `cluster_client.py` (`ClusterClient`, which holds a transport and its
discovery: construction, get/list/apply/delete, logs, exec).
"""

from reconciler.cluster.client.cluster_client import FIELD_MANAGER, ClusterClient
from reconciler.cluster.client.discovery import GroupInfo, ResourceInfo, ServedKinds
from reconciler.cluster.client.errors import ApiError, Conflict, Forbidden, Invalid, NotFound
from reconciler.cluster.client.podexec import exec_outcome
from reconciler.cluster.client.transport import NoAnswer, RequestLog

__all__ = [
    "FIELD_MANAGER",
    "ApiError",
    "ClusterClient",
    "Conflict",
    "Forbidden",
    "GroupInfo",
    "Invalid",
    "NoAnswer",
    "NotFound",
    "RequestLog",
    "ResourceInfo",
    "ServedKinds",
    "exec_outcome",
]
