"""A revision's manifest files (and, for a kustomization, the files it renders from) as one compressed value, and back: what the state side keeps of the last
good revision so that it can be read again when its commit is gone from the remote (a force-push) and
from the cache (a restart). Pure."""

from __future__ import annotations

import base64
import gzip
import json
from typing import Any

from reconciler.errors import EnvironmentProblem
from reconciler.source.git import CommitInfo, TreeFiles


def encode_tree(tree: TreeFiles) -> bytes:
    """The tree's commit, manifest files and repository config, gzip-compressed JSON."""
    document: dict[str, Any] = {
        "commit": {
            "sha": tree.commit.sha,
            "parent": tree.commit.parent,
            "message": tree.commit.message,
            "author": tree.commit.author,
            "signed": tree.commit.signed,
        },
        "blobs": [[path, base64.b64encode(data).decode()] for path, data in tree.blobs],
        "config": [tree.config[0], base64.b64encode(tree.config[1]).decode()] if tree.config else None,
        "kustomizations": tree.kustomizations,
        "support": [[path, base64.b64encode(data).decode()] for path, data in tree.support],
    }
    return gzip.compress(json.dumps(document, separators=(",", ":")).encode(), mtime=0)


def decode_tree(payload: bytes, where: str) -> TreeFiles:
    try:
        document = json.loads(gzip.decompress(payload))
        commit = CommitInfo(**document["commit"])
        blobs = [(str(path), base64.b64decode(data)) for path, data in document["blobs"]]
        config = document.get("config")
        support = [(str(path), base64.b64decode(data)) for path, data in document.get("support") or []]
        return TreeFiles(
            commit,
            blobs,
            (str(config[0]), base64.b64decode(config[1])) if config else None,
            kustomizations=[str(path) for path in document.get("kustomizations") or []],
            support=support,
        )
    except (OSError, EOFError, ValueError, KeyError, TypeError) as exc:
        raise EnvironmentProblem(
            f"the kept copy of the last good revision is damaged: {exc}", where=where
        ) from exc
