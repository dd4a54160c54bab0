"""A stand-in for an OPA 1.x server that loads policy bundles, for the OPA-engine tests.

No OPA server binary can be installed from the registries this project's machines reach, so the tests
start this on 127.0.0.1 instead (`DRA_GITOPS_OPA_URL` makes them use a real server). It does what OPA does
with what a run could get wrong, as OPA's documentation describes it (management-bundles, rest-api):

* a bundle is activated whole or not at all (`activate`, what OPA's bundle plugin does with a download
  or `opa run -b FILE` at start): with a verification key, `.signatures.json` must hold a JWT whose file
  list is exactly the bundle's files with their SHA-256; every module's package and every data file must
  lie under a root of `.manifest`; every module must parse and the modules must compile together
  (`compile_modules`); a refused bundle leaves the active one serving;
* `data.system.bundles[name].manifest` holds the active bundle's manifest (`GET /v1/data/system/bundles`);
* `GET /v1/status` reports each bundle's `active_revision`, as OPA's status plugin does;
* `POST /v1/data/{path}` evaluates `data.<path>` over the active bundle's modules and data in one
  snapshot (every call runs on one worker thread, so an activation never interleaves with a query);
  undefined is `{}`, an evaluation error is 500 `internal_error`;
* `PUT /v1/policies/{id}` of a module under a bundle root is refused (OPA protects a bundle's roots).

Compilation (`opa_compiler.py`) refuses what OPA's compiler refuses and regorus accepts at load time, for
the constructs these policies use. Rego semantics are otherwise regorus's; the real-server run
(`DRA_GITOPS_OPA_URL`) is the authority on OPA itself.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opa_compiler import RegoRejected, compile_modules, message_of, parse

from reconciler.policy.rego_ast import ref_parts


def read_tar_gz(data: bytes) -> dict[str, bytes]:
    """{name without the leading `/`: content} of a bundle tarball."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            extracted = tar.extractfile(member) if member.isfile() else None
            if extracted is not None:
                files[member.name.lstrip("/")] = extracted.read()
    return files


class BundleRejected(Exception):
    pass


def _canonical(content: bytes) -> bytes:
    return json.dumps(json.loads(content), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def verify_signature(files: dict[str, bytes], key: bytes | str, algorithm: str) -> None:
    """OPA's check of `.signatures.json` (management-bundles, "Signature verification")."""
    import jwt

    if ".signatures.json" not in files:
        raise BundleRejected("bundle missing .signatures.json file")
    tokens = json.loads(files[".signatures.json"]).get("signatures") or []
    if len(tokens) != 1:
        raise BundleRejected(".signatures.json: expected exactly one signature")
    try:
        payload = jwt.decode(tokens[0], key, algorithms=[algorithm])
    except jwt.PyJWTError as exc:
        raise BundleRejected(f"failed to verify the signature: {exc}") from exc
    listed = {entry["name"].lstrip("/"): entry["hash"] for entry in payload.get("files") or []}
    for name, content in files.items():
        if name == ".signatures.json":
            continue
        if name not in listed:
            raise BundleRejected(f"file {name} not included in bundle signature")
        digest = hashlib.sha256(_canonical(content) if name.endswith((".json", ".manifest")) else content)
        if digest.hexdigest() != listed.pop(name):
            raise BundleRejected(f"{name}: digest mismatch")
    if listed:
        raise BundleRejected(f"file(s) {sorted(listed)} specified in bundle signature but not found")


def _under(path: list[str], roots: list[str]) -> bool:
    joined = "/".join(path)
    return any(not r or joined == r or joined.startswith(r.rstrip("/") + "/") for r in roots)


def _set_path(data: dict[str, Any], path: list[str], value: Any) -> None:
    for part in path[:-1]:
        data = data.setdefault(part, {})
    if path:
        data[path[-1]] = value
    else:
        data.update(value)


class OpaStandIn:
    """The active bundle and the evaluator; every call runs on one worker thread (regorus engines must be
    used and dropped on the thread that made them), so an activation is atomic to queries."""

    def __init__(self, verification_key: bytes | str | None = None, algorithm: str = "RS256") -> None:
        self.verification_key = verification_key
        self.algorithm = algorithm
        self.modules: dict[str, str] = {}
        self.data: dict[str, Any] = {}
        self.bundles: dict[str, dict[str, Any]] = {}
        self.compiled: Any = None
        self.queries = 0  # evaluations (POST or GET /v1/data)
        self.requests = 0  # every HTTP request, of any kind

    def activate(self, name: str, tarball: bytes) -> None:
        files = read_tar_gz(tarball)
        if self.verification_key is not None:
            verify_signature(files, self.verification_key, self.algorithm)
        manifest = json.loads(files.get(".manifest", b"{}"))
        roots = manifest.get("roots") or [""]
        modules, data = {}, {}
        for path, content in files.items():
            if path.endswith(".rego"):
                module_id = f"{name}/{path}"
                package = ref_parts(parse(module_id, content.decode())["package"]["refr"])[0]
                if not _under(package, roots):
                    raise BundleRejected(
                        f"manifest roots {roots} do not permit 'package {'.'.join(package)}' in module "
                        f"file '{path}'"
                    )
                modules[module_id] = content.decode()
            elif path.endswith("data.json"):
                where = [p for p in path.split("/")[:-1] if p]
                if not _under(where, roots):
                    raise BundleRejected(
                        f"manifest roots {roots} do not permit data at path '/{'/'.join(where)}'"
                    )
                _set_path(data, where, json.loads(content))
        try:
            compile_modules(modules)
        except RegoRejected as exc:
            raise BundleRejected(str(exc)) from exc
        self.modules, self.data, self.compiled = modules, data, None
        self.bundles = {name: {"manifest": manifest}}

    def status(self) -> tuple[int, dict[str, Any]]:
        bundles = {
            name: {"name": name, "active_revision": info["manifest"].get("revision", "")}
            for name, info in self.bundles.items()
        }
        return 200, {"result": {"bundles": bundles}}

    def put_policy(self, module_id: str, text: str) -> tuple[int, dict[str, Any]]:
        roots = [r for info in self.bundles.values() for r in info["manifest"].get("roots") or [""]]
        try:
            package = ref_parts(parse(module_id, text)["package"]["refr"])[0]
        except RegoRejected as exc:
            return 400, {"code": "invalid_parameter", "message": "error(s) occurred", "errors": [exc.error]}
        if self.bundles and _under(package, roots):
            return 400, {
                "code": "invalid_parameter",
                "message": f"path data/{'/'.join(package)} is owned by bundle",
            }
        return 400, {"code": "invalid_parameter", "message": "the stand-in holds bundle modules only"}

    def query(self, path: str, input_doc: Any) -> tuple[int, dict[str, Any]]:
        import regorus

        self.queries += 1
        parts = [part for part in path.strip("/").split("/") if part]
        if parts[:2] == ["system", "bundles"]:
            value: Any = self.bundles
            for part in parts[2:]:
                value = value.get(part) if isinstance(value, dict) else None
            return 200, ({"result": value} if value is not None else {})
        if self.compiled is None:
            self.compiled = regorus.Engine()
            self.compiled.set_rego_v0(False)
            for module_id, text in self.modules.items():
                self.compiled.add_policy(module_id, text)
            self.compiled.add_data_json(json.dumps(self.data))
        engine = self.compiled.clone()
        if input_doc is not None:
            engine.set_input_json(json.dumps(input_doc))
        query = "data" + "".join(f"[{json.dumps(part)}]" for part in parts)
        try:
            answer = json.loads(engine.eval_query_as_json(query))
        except RuntimeError as exc:
            return 500, {"code": "internal_error", "message": message_of(exc)}
        results = answer.get("result") or []
        return 200, ({"result": results[0]["expressions"][0]["value"]} if results else {})


def _handler(state: OpaStandIn, worker: ThreadPoolExecutor) -> type[BaseHTTPRequestHandler]:
    lock = threading.Lock()

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
            with lock:
                state.requests += 1
            path = self.path.split("?")[0]
            for prefix in ("/v1/policies", "/v1/data", "/v1/status", "/health"):
                if path == prefix or path.startswith(prefix + "/"):
                    return prefix, urllib.request.url2pathname(path.removeprefix(prefix).removeprefix("/"))
            return "", path

        def do_GET(self) -> None:  # noqa: N802 - http.server naming
            route, rest = self._route()
            if route == "/health":
                self._send(200, {})
            elif route == "/v1/status":
                self._send(*on_worker(state.status))
            elif route == "/v1/data":
                self._send(*on_worker(state.query, rest, None))
            else:
                self._send(404, {"code": "resource_not_found", "message": "not found"})

        def do_PUT(self) -> None:  # noqa: N802
            route, rest = self._route()
            body = self._body()
            if route == "/v1/policies" and rest:
                self._send(*on_worker(state.put_policy, rest, body.decode()))
            else:
                self._send(404, {"code": "resource_not_found", "message": "not found"})

        def do_POST(self) -> None:  # noqa: N802
            route, rest = self._route()
            body = self._body()
            if route == "/v1/data":
                self._send(*on_worker(state.query, rest, json.loads(body or b"{}").get("input")))
            else:
                self._send(404, {"code": "resource_not_found", "message": "not found"})

    return Handler


class StandInServer:
    """A served stand-in: its URL, and `activate` to load a bundle as OPA's bundle plugin would."""

    def __init__(self, url: str, state: OpaStandIn, worker: ThreadPoolExecutor) -> None:
        self.url = url
        self.state = state
        self._worker = worker

    def activate(self, tarball: bytes, name: str = "dra-gitops") -> None:
        """Activate a bundle; raises BundleRejected (the active bundle keeps serving)."""
        self._worker.submit(self.state.activate, name, tarball).result()

    def unload(self) -> None:
        """No bundle at all, as a server started without one."""

        def clear() -> None:
            self.state.bundles, self.state.modules, self.state.data, self.state.compiled = {}, {}, {}, None

        self._worker.submit(clear).result()

    @property
    def queries(self) -> int:
        return self.state.queries

    @property
    def requests(self) -> int:
        return self.state.requests


@contextmanager
def serve_opa_standin(
    bundle: bytes | None = None, verification_key: bytes | str | None = None, algorithm: str = "RS256"
) -> Iterator[StandInServer]:
    """Serve a stand-in on 127.0.0.1 for the duration of the block (with `bundle` active, as
    `opa run --server -b bundle.tar.gz` starts)."""
    state = OpaStandIn(verification_key, algorithm)
    worker = ThreadPoolExecutor(max_workers=1)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(state, worker))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    handle = StandInServer(f"http://127.0.0.1:{server.server_address[1]}", state, worker)
    try:
        if bundle is not None:
            handle.activate(bundle)
        yield handle
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
