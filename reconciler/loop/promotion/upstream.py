"""Where a promoted target reads what its upstream verified (an `UpstreamReader`, for `passes/promotionstep.py`).

* `state_reader`: the upstream target's state, with a client of the cluster that state lives in (today
  the controller's own; a target on another cluster passes that cluster's client).
* `ref_reader`: a ref the upstream publishes to Git (`publishVerified`), fetched from this target's own
  repository, so no controller needs another cluster's credentials.
"""

from __future__ import annotations

from collections.abc import Callable

from reconciler.cluster.client import ClusterClient
from reconciler.loop.store.records import VerifiedCommit
from reconciler.loop.store.state import StateStore
from reconciler.source.remote import GitSource

# The upstream's verified commits, newest first; raises DraGitopsError when they cannot be read.
UpstreamReader = Callable[[], list[VerifiedCommit]]


def state_reader(client: ClusterClient, name: str, namespace: str) -> UpstreamReader:
    """Read at each pass; nothing is asked of that cluster before (it may be unreachable for a while)."""

    def read() -> list[VerifiedCommit]:
        return StateStore(client, name, namespace).load().verified

    return read


def ref_reader(source: GitSource, ref: str) -> UpstreamReader:
    """The commit the ref points at (no time: the downstream counts its soak from when it saw it)."""

    def read() -> list[VerifiedCommit]:
        sha = source.fetch_ref(ref)
        return [] if sha is None else [VerifiedCommit(sha=sha)]

    return read
