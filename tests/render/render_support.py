"""The loop tests' harness: a bare Git remote seeded with one of examples/, and a Reconciler following it
(through GitSource and GitRevisions, as the controller builds it) on the pass harness's cluster."""

from __future__ import annotations

import shutil
from pathlib import Path

from helpers import GitRemote
from pass_support import TARGET

from reconciler.cluster.client import ClusterClient
from reconciler.delivery.check import CheckOptions
from reconciler.delivery.pipeline import DeliverOptions
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile import Reconciler
from reconciler.loop.passes.reconcile_types import ReconcileOptions
from reconciler.loop.passes.revisions import GitRevisions
from reconciler.source.remote import GitSource

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def seeded(tmp_path: Path, example: str) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLES / example, remote.work, dirs_exist_ok=True)
    return remote


def follow(client: ClusterClient, remote: GitRemote, tmp_path: Path, path: str = "") -> Reconciler:
    source = GitSource(remote.url, tmp_path / "cache", branch="main", path=path)
    options = ReconcileOptions(DeliverOptions(target=TARGET, grace=5, stage_timeout=60, verify_timeout=60))
    return Reconciler(
        client, GitRevisions(source, kept=KeptRevision(client, TARGET)), options, CheckOptions()
    )
