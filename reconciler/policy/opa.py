"""The OPA-server engine: the same policy set evaluated by an OPA server through opa-python-client.

Modules are uploaded under ids prefixed `dra-gitops/` (so our modules never overwrite someone else's), the
input is posted to `/v1/data/dra`, and the answer has the same shape as the embedded engine's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

from reconciler.errors import EnvironmentProblem, PolicyError
from reconciler.policy.engine import Module, PolicySet, load_policy_set, packages_of

POLICY_ID_PREFIX = "dra-gitops/"


def _client(url: str, token: str | None = None, timeout: float = 30.0) -> Any:
    from opa_client import OpaClient

    parsed = urlparse(url if "://" in url else f"http://{url}")
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise PolicyError(f"--opa-url must look like http://host:port, not {url!r}")
    port = parsed.port or (443 if parsed.scheme == "https" else 8181)
    return OpaClient(
        host=parsed.hostname, port=port, ssl=parsed.scheme == "https", token=token, timeout=timeout
    )


def _policy_id(module: Module) -> str:
    return POLICY_ID_PREFIX + module.path.replace("\\", "/").lstrip("./")


class OpaServerEngine:
    """Evaluates on an OPA server; policy upload happens once, at construction."""

    name = "opa"

    def __init__(
        self, url: str, policy_set: PolicySet, *, token: str | None = None, with_tests: bool = False
    ) -> None:
        self.url = url
        self._client = _client(url, token)
        modules = policy_set.modules + (policy_set.tests if with_tests else [])
        try:
            for module in modules:
                self._client.update_policy_from_string(module.text, _policy_id(module), rego_compat=False)
        except Exception as exc:  # noqa: BLE001 - opa_client raises requests' and its own error types
            raise _translate(exc, url, modules) from None

    def evaluate(self, input_doc: dict[str, Any]) -> dict[str, dict[str, list[dict[str, Any]]]]:
        try:
            answer = self._client.query_rule(json.loads(json.dumps(input_doc, default=str)), "dra")
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, self.url, []) from None
        return packages_of(answer.get("result") or {})

    def query(self, path: str) -> Any:
        """The value of a data path (for test rules), evaluated with an empty input."""
        try:
            answer = self._client.query_rule({}, path)
        except Exception as exc:  # noqa: BLE001
            raise _translate(exc, self.url, []) from None
        return answer.get("result")

    def close(self) -> None:
        self._client.close_connection()


def _translate(exc: Exception, url: str, modules: list[Module]) -> Exception:
    """Connection problems are environment problems (exit 4); rejected modules are policy errors."""
    name = exc.__class__.__name__
    text = str(exc)
    if "RegoParse" in name or "rego_parse_error" in text or "rego_compile_error" in text:
        for module in modules:
            if _policy_id(module) in text or module.path in text:
                return PolicyError(f"OPA rejected the module: {text}", where=module.path)
        return PolicyError(f"OPA rejected a module: {text}")
    return EnvironmentProblem(f"OPA server at {url} failed: {name}: {text}")


def run_policy_tests_on_opa(url: str, dirs: list[Path], name_filter: str | None = None) -> Any:
    """Run the `test_*` rules of the given directories on an OPA server (same report as the embedded run)."""
    from reconciler.policy.testing import run_tests_with

    policy_set = load_policy_set(dirs, include_bundled=False)
    engine = OpaServerEngine(url, policy_set, with_tests=True)
    try:
        return run_tests_with(engine.query, policy_set, name_filter)
    finally:
        engine.close()
