"""The reconcile pass's view of a Git remote: the head sha, the desired state at a sha, signatures, reverts.

Wraps `source.remote.GitSource` (the only Git I/O) and the loader. The reconciler keeps the desired
states it read, so a steady-state pass reads nothing from Git but one `git fetch`.
"""

from __future__ import annotations

from reconciler.delivery.desired import DesiredState, desired_from_trees
from reconciler.loop.reconcile_types import SourceHead
from reconciler.model.loader import DEFAULT_LIMITS, Limits
from reconciler.source.remote import GitSource


class GitRevisions:
    def __init__(self, source: GitSource, limits: Limits = DEFAULT_LIMITS) -> None:
        self.source = source
        self.limits = limits
        self._seen: str | None = None

    def head(self, previous: str | None = None) -> SourceHead:
        # The state's last attempted sha survives restarts; the one seen in this process is the fallback.
        fetched = self.source.fetch(previous=previous or self._seen)
        self._seen = fetched.sha
        return SourceHead(sha=fetched.sha, ref=fetched.ref, forced=fetched.forced, previous=fetched.previous)

    def desired(self, sha: str) -> DesiredState:
        return desired_from_trees([self.source.tree(sha, self.limits)], self.source.path, self.limits)[0]

    def verify(self, sha: str) -> tuple[bool, str]:
        check = self.source.verify(sha)
        who = f" by {check.signer}" if check.signer else ""
        return check.ok, f"signature {check.status}{who}: {check.reason}"

    def revert(self, sha: str, branch: str) -> str:
        return self.source.revert(sha, branch, reason="dra-gitops rolled it back: it failed verification")

    def close(self) -> None:
        self.source.close()
