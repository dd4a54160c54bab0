"""The OPA-server engine: the policy set evaluated by an OPA server that loaded it as a bundle.

A run writes nothing to the server. The server loads the bundle `dra-gitops policy bundle` makes
(`reconciler/policy/bundle.py`; `deploy/overlays/opa` mounts it), and a run:

* computes the revision of the bundle of its own policy set (a digest of the policies and data);
* asks one question, `POST /v1/data/dra/gitops_entrypoint/answer` with the input: the generated entry
  point answers with the revision of the bundle it belongs to and the `deny` and `warn` sets of every
  rule package, from one snapshot of the server's store, so a bundle activated meanwhile cannot mix in;
* refuses the answer (exit 4, naming both revisions) when the server's revision is not its own; the
  server's bundles and their revisions come from `data.system.bundles` for the message.

Every failure of the server is an `EnvironmentProblem` (exit 4) with the server's own message: refused
connection, no answer within the read timeout, a 4xx/5xx with OPA's JSON error or a plain-text body.
`policy test --opa-url` checks the revision the same way and then evaluates each `test_*` rule of the
loaded bundle, as `opa test` reports them; nothing is put on the server and nothing is left behind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from reconciler.errors import EnvironmentProblem, UserError
from reconciler.policy.bundle import ENTRYPOINT_PACKAGE, bundle_revision
from reconciler.policy.engine import PolicySet, bundled_policy_dir, load_policy_set
from reconciler.policy.testing import TestReport, run_tests_with

DEFAULT_TIMEOUT = 30.0


class OpaAnswerError(EnvironmentProblem):
    """The server answered with an error status (its message is in the text)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _client(url: str, token: str | None, timeout: float) -> Any:
    from opa_client import OpaClient

    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise UserError(f"the OPA URL must be http://host:port or https://host:port, not {url!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 8181)
    return OpaClient(
        host=parsed.hostname or "", port=port, ssl=parsed.scheme == "https", token=token, timeout=timeout
    )


def server_message(response: Any) -> str:
    """The server's own words: OPA's JSON error (`code: message`, then each error), else its text."""
    try:
        body = response.json()
    except ValueError:
        text = " ".join((response.text or "").split())
        return text[:300] or "(empty body)"
    if not isinstance(body, dict):
        return json.dumps(body)[:300]
    parts = [": ".join(str(body[k]) for k in ("code", "message") if body.get(k))]
    for error in body.get("errors") or []:
        if isinstance(error, dict):
            location = error.get("location") or {}
            where = f"{location.get('file')}:{location.get('row')}: " if location.get("file") else ""
            parts.append(f"{where}{error.get('code')}: {error.get('message')}")
    return "; ".join(p for p in parts if p) or json.dumps(body)[:300]


class OpaServerEngine:
    """Evaluates on an OPA server that serves this policy set's bundle; one query per evaluation."""

    name = "opa"

    def __init__(
        self,
        url: str,
        policy_set: PolicySet,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ) -> None:
        self.url = url
        self.timeout = timeout
        self.revision = bundle_revision(policy_set)
        self._client = _client(url, token, timeout)
        self.requests = 0  # round trips made (bench_check reports them)

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        """One request; the decoded JSON answer, or EnvironmentProblem with the server's message."""
        import requests

        self.requests += 1
        address = f"{self._client.root_url}/{path}"
        try:
            response = self._client._session.request(method, address, json=body, timeout=self.timeout)
        except requests.Timeout as exc:
            raise EnvironmentProblem(
                f"OPA server at {self.url} did not answer {method} /v1/{path} within {self.timeout:g}s (--opa-timeout)"
            ) from exc
        except requests.RequestException as exc:
            reason = exc.__class__.__name__
            raise EnvironmentProblem(f"OPA server at {self.url} is unreachable ({reason}): {exc}") from exc
        if response.status_code >= 400:
            raise OpaAnswerError(
                f"OPA server at {self.url} answered {response.status_code} to {method} /v1/{path}: "
                f"{server_message(response)}",
                response.status_code,
            )
        try:
            return response.json()
        except ValueError as exc:
            raise EnvironmentProblem(
                f"OPA server at {self.url} answered {method} /v1/{path} with something that is not JSON: "
                f"{' '.join(response.text.split())[:200]!r}"
            ) from exc

    def _served(self) -> str:
        """The server's bundles and their revisions (`data.system.bundles`), for a refusal's message."""
        try:
            bundles = self._call("GET", "data/system/bundles").get("result") or {}
        except EnvironmentProblem:
            return "its bundles could not be read"
        if not isinstance(bundles, dict) or not bundles:
            return "it has loaded no bundle"
        revisions = [
            f"{name} at revision {((info or {}).get('manifest') or {}).get('revision') or '(none)'}"
            for name, info in sorted(bundles.items())
        ]
        return "it serves " + ", ".join(revisions)

    def _refuse(self, served: object) -> EnvironmentProblem:
        if served is None:
            found = f"has no dra-gitops entry point (data.{'.'.join(ENTRYPOINT_PACKAGE)}); {self._served()}"
        else:
            found = f"serves policy bundle revision {served}"
        return EnvironmentProblem(
            f"OPA server at {self.url} {found}, but these policies are revision {self.revision}: load "
            "the bundle `dra-gitops policy bundle` makes of the same policies (see deploy/overlays/opa)"
        )

    def evaluate(self, input_doc: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        body = {"input": json.loads(json.dumps(input_doc, default=str))}
        answer = self._call("POST", "data/" + "/".join(ENTRYPOINT_PACKAGE) + "/answer", body)
        result = answer.get("result") if isinstance(answer, dict) else None
        served = result.get("revision") if isinstance(result, dict) else None
        if served != self.revision:
            raise self._refuse(served)
        assert isinstance(result, dict)
        return {
            package: {"deny": list(sets.get("deny") or []), "warn": list(sets.get("warn") or [])}
            for package, sets in (result.get("findings") or {}).items()
        }

    def check_revision(self) -> None:
        """Refuse (exit 4) unless the server serves this policy set's bundle: one query."""
        answer = self._call("POST", "data/" + "/".join(ENTRYPOINT_PACKAGE) + "/revision", {"input": {}})
        served = answer.get("result") if isinstance(answer, dict) else None
        if served != self.revision:
            raise self._refuse(served)

    def query(self, path: tuple[str, ...]) -> Any:
        """The value of a rule (a test), evaluated with an empty input; None when undefined."""
        from urllib.parse import quote

        try:
            answer = self._call("POST", "data/" + "/".join(quote(p, safe="") for p in path), {"input": {}})
        except OpaAnswerError as exc:
            if exc.status == 500:  # the rule's evaluation failed: that test's error, as `opa test` says
                raise RuntimeError(str(exc)) from exc
            raise
        return answer.get("result") if isinstance(answer, dict) else None

    def close(self) -> None:
        self._client.close_connection()


def opa_test_policy_set(dirs: list[Path]) -> PolicySet:
    """The policy set `policy test --opa-url DIRS` asks the server about: the bundled pack and DIRS, the
    same set as `check --policy DIRS` and `policy bundle --policy-dir DIRS`."""
    bundled = bundled_policy_dir().resolve()
    return load_policy_set([d for d in dirs if d.resolve() != bundled])


def run_policy_tests_on_opa(
    url: str,
    dirs: list[Path],
    name_filter: str | None = None,
    *,
    token: str | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> TestReport:
    """Run the `test_*` rules of the bundle the server serves, once it is this policy set's bundle."""
    policy_set = opa_test_policy_set(dirs)
    engine = OpaServerEngine(url, policy_set, token=token, timeout=timeout)
    packages: dict[tuple[str, ...], Any] = {}

    def query(path: tuple[str, ...]) -> Any:
        """A test's value from its package's, asked once per package; a package whose evaluation fails
        (one erring rule spoils the whole document) is asked test by test, so only that test errs."""
        package = path[:-1]
        if package not in packages:
            try:
                packages[package] = engine.query(package)
            except RuntimeError:
                packages[package] = None
        value = packages[package]
        if value is None:
            return engine.query(path)
        return value.get(path[-1]) if isinstance(value, dict) else None

    try:
        engine.check_revision()
        return run_tests_with(query, policy_set, name_filter)
    finally:
        engine.close()
