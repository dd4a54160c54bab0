"""One exception hierarchy for the whole project.

Every message starts with where the problem is: ``path:line`` for files, ``Kind/ns/name`` for objects.
Each class carries the exit code of its branch in ``exit_code``; the CLI exits with it
(``reconciler/cli/options.py``, ``handle_errors``), so no layer below it needs to know about exits.

* ``UserError`` (exit 1): bad input (a manifest, a flag, a policy, a config file). Retrying cannot help.
* ``EnvironmentProblem`` (exit 4): something outside our input is wrong or unreachable; its
  ``TemporaryError`` is worth retrying with backoff.
* The other direct subclasses of ``DraGitopsError`` (exit 1) are the rest of the work refused or stopped:
  the API server refusing a request (``cluster/client/errors.py``), a state written by someone else
  (``loop/store/state.py``), a pass stopped between stages (``loop/passes/reconcile_types.py``), the search giving up
  (``dra/search.py``), the simulated cluster's answers (``sim/``).

A rollback that fails is an outcome of the pass, not an exception: its exit code 5 comes from the outcome
(``reconciler/outcome.py``). A translated error keeps the original as its cause (``raise … from exc``),
for logs and debugging; users see the one-line message only. Where the cause must not travel (it holds
unscrubbed output) or says no more than the message, ``from None`` follows a comment ``# cause hidden: why``
(``tests/test_errors.py`` checks both).
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


class EnvironmentProblem(DraGitopsError):
    """Something outside our input is wrong or unreachable: cluster, git remote, OPA server, DRA API."""

    exit_code = 4


class TemporaryError(EnvironmentProblem):
    """Worth retrying with backoff (timeouts, 5xx, 429)."""

    def __init__(self, message: str, *, where: str | None = None, delay: float = 1.0) -> None:
        super().__init__(message, where=where)
        self.delay = delay
