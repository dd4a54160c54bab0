"""The reconcile pass's view of a Git remote: the head sha, the desired state at a sha, signatures, reverts.

Wraps `source.remote.GitSource` (the only Git I/O) and the loader. The reconciler keeps the desired
states it read, so a steady-state pass reads nothing from Git but one `git fetch`. With a `KeptRevision`,
the last good revision's files are kept beside the state (`keep`), and read from there when its commit
can be fetched no more (`desired`).
"""

from __future__ import annotations

import logging
from dataclasses import replace

from reconciler.delivery.desired import DesiredState, desired_from_trees
from reconciler.errors import EnvironmentProblem
from reconciler.loop.passes.keep import KeptRevision
from reconciler.loop.passes.reconcile_types import SourceHead
from reconciler.model.loader import DEFAULT_LIMITS, Limits
from reconciler.source.git import TreeFiles
from reconciler.source.remote import GitSource
from reconciler.source.treecopy import decode_tree, encode_tree

log = logging.getLogger("dra_gitops.revisions")


class GitRevisions:
    def __init__(
        self, source: GitSource, limits: Limits = DEFAULT_LIMITS, kept: KeptRevision | None = None
    ) -> None:
        self.source = source
        self.limits = limits
        self.kept = kept
        self._seen: str | None = None
        self._trees: dict[str, TreeFiles] = {}  # the trees last read, to keep one without reading it again

    def head(self, previous: str | None = None) -> SourceHead:
        # The state's last attempted sha survives restarts; the one seen in this process is the fallback.
        fetched = self.source.fetch(previous=previous or self._seen)
        self._seen = fetched.sha
        return SourceHead(sha=fetched.sha, ref=fetched.ref, forced=fetched.forced, previous=fetched.previous)

    def desired(self, sha: str) -> DesiredState:
        try:
            tree = self.source.tree(sha, self.limits)
        except EnvironmentProblem as exc:
            kept = self.kept
            payload = kept.load(sha) if kept is not None else None
            if kept is None or payload is None:
                raise
            log.warning(
                "%s: %s; reading it from %s", self.source.url, exc.detail, kept.ref, extra={"sha": sha}
            )
            tree = decode_tree(payload, kept.ref)
        desired = desired_from_trees([tree], self.source.path, self.limits)[0]
        if tree.support:  # keep of the revision's files only those its rendering read
            tree = replace(tree, support=[(p, d) for p, d in tree.support if p in desired.render_inputs])
        if len(self._trees) >= 4:
            self._trees.pop(next(iter(self._trees)))
        self._trees[sha] = tree
        return desired

    def keep(self, sha: str) -> None:
        """`sha` is the last good revision: keep its files beside the state, unless a copy of it is there
        (one GET a pass: a copy lost with its namespace is written again)."""
        kept = self.kept
        if kept is None or kept.has(sha):
            return
        tree = self._trees.get(sha)
        if tree is None:
            try:
                self.desired(sha)  # read again (the trees kept in memory are the last few)
            except EnvironmentProblem as exc:
                log.warning("%s: no copy of %s kept: %s", kept.ref, sha[:12], exc.detail, extra={"sha": sha})
                return
            tree = self._trees.get(sha)
        if tree is not None and kept.save(sha, encode_tree(tree)):
            log.info("%s: the files of %s kept", kept.ref, sha[:12], extra={"sha": sha})

    def verify(self, sha: str) -> tuple[bool, str]:
        check = self.source.verify(sha)
        who = f" by {check.signer}" if check.signer else ""
        return check.ok, f"signature {check.status}{who}: {check.reason}"

    def revert(self, sha: str, branch: str) -> str:
        return self.source.revert(sha, branch, reason="dra-gitops rolled it back: it failed verification")

    def publish(self, sha: str, ref: str) -> None:
        self.source.publish(sha, ref)

    def close(self) -> None:
        self.source.close()
