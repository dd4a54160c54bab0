"""A stand-in for an OPA 1.x server, for the OPA-engine tests when no real server is given.

No OPA server binary can be installed from the registries this project's machines reach, so the tests
start this on 127.0.0.1 instead (`DRA_GITOPS_OPA_URL` makes them use a real server). It speaks the part
of OPA's REST API the engine uses, with OPA's semantics for what a run could get wrong:

* `PUT /v1/policies/{id}`: ids are opaque strings (slashes included); a module that does not parse, or
  whose rules conflict with another module's in the same package (a rule that is a function in one and
  not in the other, single-value against multi-value, two `default`s, a rule where a package is), is
  refused with 400 and `rego_parse_error` / `rego_type_error`, and the store is left as it was;
* `DELETE /v1/policies/{id}` removes the module and its rules (404 when there is no such id);
* `GET /v1/policies` and `GET /v1/policies/{id}` give `id` and `raw`;
* `POST /v1/data/{path}` evaluates `data.<path>` over every stored module, so the rules of several
  modules of one package merge; undefined is `{}`, an evaluation error is 500.

Evaluation is regorus's, so Rego semantics are the embedded engine's; the real-server run
(`DRA_GITOPS_OPA_URL`) is the authority on OPA itself.
"""

from __future__ import annotations

import json
import re
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_LOCATION = re.compile(r"-->\s*(?P<file>[^\n]+?):(?P<row>\d+):(?P<col>\d+)")


def _message(exc: Exception) -> str:
    """regorus's own message (`error: ...`), without its source excerpt or a Rust backtrace."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return next(
        (line.removeprefix("error:").strip() for line in lines if line.startswith("error:")), lines[-1]
    )


class RegoRejected(Exception):
    def __init__(self, code: str, message: str, module_id: str, row: int = 0, col: int = 0) -> None:
        super().__init__(message)
        self.error = {
            "code": code,
            "message": message,
            "location": {"file": module_id, "row": row, "col": col},
        }


def _ref_path(node: dict[str, Any]) -> tuple[list[str], bool]:
    """A rule head's reference as names, and whether it ends in a variable key (a multi-value object)."""
    if "Var" in node:
        return [node["Var"]["value"]], False
    if "RefDot" in node:
        names, dynamic = _ref_path(node["RefDot"]["refr"])
        return names + [node["RefDot"]["field"][1]], dynamic
    if "RefBrack" in node:
        names, _ = _ref_path(node["RefBrack"]["refr"])
        index = node["RefBrack"]["index"]
        if "String" in index:
            return names + [index["String"]["value"]], False
        return names, True
    return ["?"], False


def _rule_kinds(module_id: str, text: str) -> tuple[str, list[tuple[str, str, int]]]:
    """The module's package and (rule path, kind, line) of every rule; raises RegoRejected if it does not parse."""
    import regorus

    engine = regorus.Engine()
    engine.set_rego_v0(False)
    try:
        engine.add_policy(module_id, text)
    except RuntimeError as exc:
        match = _LOCATION.search(str(exc))
        row, col = (int(match["row"]), int(match["col"])) if match else (0, 0)
        raise RegoRejected("rego_parse_error", _message(exc), module_id, row, col) from None
    (module,) = json.loads(engine.get_ast_as_json())
    package_names, _ = _ref_path(module["ast"]["package"]["refr"])
    package = ".".join(package_names)
    rules = []
    for rule in module["ast"]["rules"]:
        if "Default" in rule:
            names, _ = _ref_path(rule["Default"]["refr"])
            kind, line = "default", rule["Default"]["span"]["line"]
        else:
            ((head_kind, head),) = rule["Spec"]["head"].items()
            names, dynamic = _ref_path(head["refr"])
            line = head["span"]["line"]
            if head_kind == "Func":
                kind = f"function/{len(head['args'])}"
            elif head_kind == "Set" or dynamic:
                kind = "multi-value"
            else:
                kind = "single-value"
        rules.append((".".join([package, *names]), kind, line))
    return package, rules


def check_conflicts(modules: dict[str, str], new_id: str) -> None:
    """Refuse `new_id` when its rules conflict with another stored module's, as OPA's compiler does."""
    kinds: dict[str, set[str]] = {}
    defaults: dict[str, int] = {}
    other_packages: set[str] = set()
    new_package, new_rules = "", []
    for module_id, text in modules.items():
        package, rules = _rule_kinds(module_id, text)
        if module_id == new_id:
            new_package, new_rules = package, rules
        else:
            other_packages.add(package)
        for path, kind, _ in rules:
            if kind == "default":
                defaults[path] = defaults.get(path, 0) + 1
                kind = "single-value"
            kinds.setdefault(path, set()).add(kind)
    for path, kind, line in new_rules:
        if len(kinds[path]) > 1:
            raise RegoRejected("rego_type_error", f"conflicting rules data.{path} found", new_id, line, 1)
        if kind == "default" and defaults[path] > 1:
            raise RegoRejected(
                "rego_type_error", f"multiple default rules data.{path} found", new_id, line, 1
            )
        if any(p == path or p.startswith(path + ".") for p in other_packages):
            raise RegoRejected(
                "rego_type_error", f"rule data.{path} conflicts with a package", new_id, line, 1
            )
    if any(new_package == r or new_package.startswith(r + ".") for r in kinds):
        raise RegoRejected("rego_type_error", f"package data.{new_package} conflicts with a rule", new_id)


class OpaStandIn:
    """The policy store and evaluator. Connections are served concurrently, as OPA does (a client keeps its
    connection open between requests), but every call here runs on one worker thread: regorus engines must
    be used and dropped on the thread that made them."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.compiled: Any = None

    def put_policy(self, module_id: str, text: str) -> tuple[int, dict[str, Any]]:
        candidate = {**self.modules, module_id: text}
        try:
            check_conflicts(candidate, module_id)
        except RegoRejected as exc:
            return 400, {
                "code": "invalid_parameter",
                "message": "error(s) occurred while compiling module(s)",
                "errors": [exc.error],
            }
        self.modules = candidate
        self.compiled = None
        return 200, {}

    def get_policies(self, module_id: str) -> tuple[int, dict[str, Any]]:
        """The list (`module_id` empty) or one module."""
        if not module_id:
            return 200, {"result": [{"id": k, "raw": v} for k, v in self.modules.items()]}
        if module_id not in self.modules:
            return 404, _not_found(module_id)
        return 200, {"result": {"id": module_id, "raw": self.modules[module_id]}}

    def delete_policy(self, module_id: str) -> tuple[int, dict[str, Any]]:
        if module_id not in self.modules:
            return 404, _not_found(module_id)
        del self.modules[module_id]
        self.compiled = None
        return 200, {}

    def query(self, path: str, input_doc: Any) -> tuple[int, dict[str, Any]]:
        import regorus

        if self.compiled is None:
            self.compiled = regorus.Engine()
            self.compiled.set_rego_v0(False)
            for module_id, text in self.modules.items():
                self.compiled.add_policy(module_id, text)
        engine = self.compiled.clone()
        if input_doc is not None:
            engine.set_input_json(json.dumps(input_doc))
        query = "data" + "".join(f".{part}" for part in path.strip("/").split("/") if part)
        try:
            answer = json.loads(engine.eval_query_as_json(query))
        except RuntimeError as exc:
            return 500, {"code": "internal_error", "message": _message(exc)}
        results = answer.get("result") or []
        return 200, ({"result": results[0]["expressions"][0]["value"]} if results else {})


def _not_found(module_id: str) -> dict[str, Any]:
    return {"code": "resource_not_found", "message": f'storage_not_found_error: policy id "{module_id}"'}


def _handler(state: OpaStandIn, worker: ThreadPoolExecutor) -> type[BaseHTTPRequestHandler]:
    def on_worker(call: Callable[..., tuple[int, dict[str, Any]]], *args: Any) -> tuple[int, dict[str, Any]]:
        return worker.submit(call, *args).result()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return None

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length else b""

        def _send(self, status: int, payload: Any) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str]:
            path = self.path.split("?")[0]
            for prefix in ("/v1/policies", "/v1/data", "/health"):
                if path == prefix or path.startswith(prefix + "/"):
                    return prefix, path.removeprefix(prefix).removeprefix("/")
            return "", path

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            route, rest = self._route()
            if route == "/health":
                self._send(200, {})
            elif route == "/v1/policies":
                self._send(*on_worker(state.get_policies, rest))
            elif route == "/v1/data":
                self._send(*on_worker(state.query, rest, None))
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_PUT(self) -> None:  # noqa: N802
            route, rest = self._route()
            body = self._body()
            if route == "/v1/policies" and rest:
                self._send(*on_worker(state.put_policy, rest, body.decode()))
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_POST(self) -> None:  # noqa: N802
            route, rest = self._route()
            body = self._body()
            if route == "/v1/data":
                self._send(*on_worker(state.query, rest, json.loads(body or b"{}").get("input")))
            else:
                self._send(404, {"code": "resource_not_found"})

        def do_DELETE(self) -> None:  # noqa: N802
            route, rest = self._route()
            if route == "/v1/policies" and rest:
                self._send(*on_worker(state.delete_policy, rest))
            else:
                self._send(404, {"code": "resource_not_found"})

    return Handler


@contextmanager
def serve_opa_standin() -> Iterator[str]:
    """Serve a stand-in on 127.0.0.1 for the duration of the block; yields its URL."""
    state = OpaStandIn()
    worker = ThreadPoolExecutor(max_workers=1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, worker))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        thread.join()
        server.server_close()
        worker.submit(setattr, state, "compiled", None).result()  # dropped on the thread that made it
        worker.shutdown()


def call(url: str, method: str, path: str, body: str | None = None) -> tuple[int, Any]:
    """One request to an OPA server (real or stand-in) without our engine: status and JSON answer."""
    request = urllib.request.Request(
        url + path, method=method, data=body.encode() if body is not None else None
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def stored_modules(url: str, prefix: str = "") -> dict[str, str]:
    """{id: raw} of the modules on the server whose id starts with `prefix`."""
    status, answer = call(url, "GET", "/v1/policies")
    assert status == 200, answer
    return {p["id"]: p["raw"] for p in answer.get("result", []) if p["id"].startswith(prefix)}
