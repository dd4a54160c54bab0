"""The cluster's identity in the target's state (issue 29, item 7): the first pass records the uid of the
kube-system Namespace; a pass that finds another one writes nothing and fails as an environment problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import GitRemote
from pass_support import reconciler_for

from reconciler.cluster.client import ClusterClient
from reconciler.loop.passes.passbase import ClusterChanged
from reconciler.loop.store.state import StateStore
from reconciler.outcome import Outcome


def test_a_pass_on_another_cluster_writes_nothing(
    client: ClusterClient, remote: GitRemote, tmp_path: Path
) -> None:
    remote.commit_and_push("example")
    reconciler = reconciler_for(client, remote, tmp_path)
    assert reconciler.reconcile().outcome == Outcome.APPLIED
    store = StateStore(client, reconciler.options.target)
    uid = client.get(client.resource_for("v1", "Namespace"), None, "kube-system")["metadata"]["uid"]
    assert store.load().cluster_id == uid

    # As if this state had been written in another cluster: the one answering now is not it.
    store.update(lambda state: setattr(state, "cluster_id", "0000-another-cluster"))
    before = client.writes_sent
    fresh = reconciler_for(client, remote, tmp_path)  # a new process: only the state remembers
    with pytest.raises(ClusterChanged) as refused:
        fresh.reconcile()
    assert uid in str(refused.value) and "0000-another-cluster" in str(refused.value)
    assert client.writes_sent == before
