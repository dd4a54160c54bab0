"""One exception hierarchy for the whole project.

Every message starts with where the problem is: ``path:line`` for files, ``Kind/ns/name`` for objects.
The CLI maps each class to an exit code (see ``EXIT_CODE``), so no layer below it needs to know about exits.
"""

from __future__ import annotations


class DraGitopsError(Exception):
    """Base of every error this project raises on purpose."""

    exit_code = 1

    def __init__(self, message: str, *, where: str | None = None) -> None:
        self.where = where
        self.detail = message
        super().__init__(f"{where}: {message}" if where else message)


class UserError(DraGitopsError):
    """Bad input from the user: a manifest, a flag, a policy. Never retried."""

    exit_code = 1


class ManifestError(UserError):
    """A manifest file cannot be loaded (syntax, limits, missing fields, hostile content)."""


class NotAnObject(ManifestError):
    """A document of a manifest file is not a Kubernetes object at all (a values file, a tool's config).

    The loader adds how to leave the file out (the repository config's `exclude`) where it knows the root.
    """


class PolicyError(UserError):
    """A Rego policy does not compile or a data file is malformed."""


class PolicyDenied(DraGitopsError):
    """Policies denied the change."""

    exit_code = 1


class EnvironmentProblem(DraGitopsError):
    """Something outside our input is wrong or unreachable: cluster, git remote, OPA server, DRA API."""

    exit_code = 4


class TemporaryError(EnvironmentProblem):
    """Worth retrying with backoff (timeouts, 5xx, 429)."""

    def __init__(self, message: str, *, where: str | None = None, delay: float = 1.0) -> None:
        super().__init__(message, where=where)
        self.delay = delay


class PermanentError(DraGitopsError):
    """Retrying will not help; stall and report."""

    exit_code = 1


class RollbackFailed(DraGitopsError):
    """The rollback itself failed: the cluster needs a human."""

    exit_code = 5
