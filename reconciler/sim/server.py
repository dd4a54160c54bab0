"""``SimCluster``: the simulated API server on 127.0.0.1 over real HTTP/1.1, plus its built-in helpers.

The built-in helpers are what a real control plane does to every cluster and what the API half owns:
the ``default`` ServiceAccount of each new Namespace, and CRD registration (a created CRD serves its
custom resources and reports ``Established``). Scheduler, controllers, driver and kubelet are separate
components added with :meth:`SimCluster.add_component`.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import parse_qsl, urlsplit

import yaml

from reconciler.sim import rbac
from reconciler.sim.apibase import ApiOptions
from reconciler.sim.apiserver import ApiServer, Request, Response
from reconciler.sim.audit import AuditLog
from reconciler.sim.limits import MAX_REQUEST_BODY_BYTES
from reconciler.sim.persist import Journal
from reconciler.sim.store import Store
from reconciler.sim.storebase import AlreadyExists, Change, ResourceType, now

log = logging.getLogger(__name__)

_REASON_PHRASES = {
    200: "OK",
    201: "Created",
    202: "Accepted",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    409: "Conflict",
    410: "Gone",
    413: "Request Entity Too Large",
    415: "Unsupported Media Type",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class Component(Protocol):
    """A simulated control-plane part: started with the store and a stop event, stopped on shutdown."""

    def start(self, store: Store, stop_event: threading.Event) -> None: ...

    def stop(self) -> None: ...


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr: tuple[str, int], api: ApiServer) -> None:
        self.api = api
        self.stop_event = threading.Event()
        self.conns: set[socket.socket] = set()
        self.conns_lock = threading.Lock()
        super().__init__(addr, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def setup(self) -> None:
        super().setup()
        # one write per response, and no Nagle delay between a response and the next request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self.server.conns_lock:
            self.server.conns.add(self.connection)

    def finish(self) -> None:
        with self.server.conns_lock:
            self.server.conns.discard(self.connection)
        with contextlib.suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature of the base class
        log.debug("sim apiserver: " + format, *args)

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        # kube-apiserver reads one byte past its limit and answers 413 (the API server does, for the verbs
        # that read a body); the rest is read and dropped so the connection stays usable
        body = self.rfile.read(min(length, MAX_REQUEST_BODY_BYTES + 1)) if length else b""
        rest = length - len(body)
        while rest > 0:
            chunk = self.rfile.read(min(rest, 1 << 16))
            if not chunk:
                break
            rest -= len(chunk)
        pairs = parse_qsl(url.query, keep_blank_values=True)
        req = Request(
            method=self.command,
            path=url.path,
            query=dict(pairs),
            headers={k.lower(): v for k, v in self.headers.items()},
            body=body,
            query_pairs=pairs,
        )
        resp = self.server.api.handle(req)
        if self.server.stop_event.is_set():
            self.close_connection = True
            return
        if resp.upgrade is not None:
            self._send_upgrade(resp)
        elif resp.stream is not None:
            self._send_stream(resp)
        else:
            self._send(resp)

    def _head(self, resp: Response, extra: list[tuple[str, str]]) -> bytes:
        lines = [f"HTTP/1.1 {resp.status} {_REASON_PHRASES.get(resp.status, 'Unknown')}"]
        lines.append(f"Content-Type: {resp.content_type}")
        lines.append("Cache-Control: no-cache, private")
        lines.extend(f"{k}: {v}" for k, v in resp.headers + extra)
        if self.close_connection:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")

    def _send(self, resp: Response) -> None:
        head = self._head(resp, [("Content-Length", str(len(resp.body)))])
        self.wfile.write(head + resp.body)

    def _send_upgrade(self, resp: Response) -> None:
        """101 Switching Protocols, then the new protocol owns the connection until it is closed."""
        assert resp.upgrade is not None
        lines = ["HTTP/1.1 101 Switching Protocols", *(f"{k}: {v}" for k, v in resp.headers)]
        self.close_connection = True
        try:
            self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
            resp.upgrade(self.wfile)
        except OSError:
            pass

    def _send_stream(self, resp: Response) -> None:
        assert resp.stream is not None
        self.wfile.write(self._head(resp, [("Transfer-Encoding", "chunked")]))

        def write(data: bytes) -> None:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

        try:
            resp.stream(write)
            self.wfile.write(b"0\r\n\r\n")
        except OSError:
            self.close_connection = True

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve


class SimCluster:
    """The simulated cluster: an API server over HTTP on 127.0.0.1 backed by one :class:`Store`.

    ``served_versions`` are the resource.k8s.io versions to serve (preferred: the newest); a
    ``("v1beta1",)`` cluster reports Kubernetes 1.32 unless ``kube_version`` says otherwise. With
    ``data_dir`` the store is kept there (:mod:`reconciler.sim.persist`) and a new SimCluster on the same
    directory serves what the last one had (:class:`reconciler.sim.persist.DataDirError` if it cannot).
    """

    def __init__(
        self,
        port: int = 0,
        served_versions: tuple[str, ...] = ("v1",),
        token: str | None = None,
        kube_version: str | None = None,
        store: Store | None = None,
        audit: bool | Path = False,
        data_dir: Path | None = None,
        namespace_content_delay: float = 0.0,
    ) -> None:
        self.store = store if store is not None else Store()
        # How long a deleted Namespace stays Terminating with its content before the namespace controller
        # deletes it (seconds on a real cluster; 0: within the DELETE).
        self.store.namespace_content_delay = namespace_content_delay
        self.api = ApiServer(self.store, ApiOptions(tuple(served_versions), token, kube_version))
        self._journal = None if data_dir is None else self._restore(Path(data_dir))
        if audit:
            self.api.audit = AuditLog(audit if isinstance(audit, Path) else None)
        self.token = token
        self.port = port
        self.components: list[Component] = []
        self.stop_event = threading.Event()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._unsubscribe = self.store.subscribe_raw(self._builtin_controllers)
        self._bootstrap()

    # ------------------------------------------------------------------ lifecycle

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> SimCluster:
        """Start listening (in a background thread) and start the components."""
        self._listen()
        for c in self.components:
            c.start(self.store, self.stop_event)
        return self

    def stop(self) -> None:
        self.stop_event.set()
        for c in reversed(self.components):
            try:
                c.stop()
            except Exception:  # noqa: BLE001 - stopping must go on
                log.exception("stopping sim component %r", c)
        self.api.close()
        self._shutdown_listener()
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def restart(self) -> None:
        """Stop the HTTP listener (dropping open connections) and listen again on the same port."""
        self._shutdown_listener()
        self.api.stopping.clear()
        self._listen()

    def add_component(self, component: Component) -> None:
        """Add a control-plane part; started now if the cluster is already running."""
        self.components.append(component)
        if self._httpd is not None:
            component.start(self.store, self.stop_event)

    def __enter__(self) -> SimCluster:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _listen(self) -> None:
        httpd = _HTTPServer(("127.0.0.1", self.port), self.api)
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"sim-apiserver-{self.port}",
            daemon=True,
        )
        self._thread.start()

    def _shutdown_listener(self) -> None:
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        httpd.stop_event.set()
        self.api.stopping.set()  # ends watch streams and injected delays
        httpd.shutdown()
        httpd.server_close()
        with httpd.conns_lock:
            conns = list(httpd.conns)
        for conn in conns:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------------ faults

    def fail_next(self, n: int = 1, status: int = 500, *, match: str | None = None) -> None:
        """Answer the next ``n`` requests (whose "METHOD /path" contains ``match``) with ``status``."""
        self.api.faults.add(n, "fail", status, match)

    def timeout_next(self, n: int = 1, seconds: float = 30.0, *, match: str | None = None) -> None:
        """Hold the next ``n`` requests for ``seconds`` before serving them (clients time out)."""
        self.api.faults.add(n, "timeout", seconds, match)

    def clear_faults(self) -> None:
        self.api.faults.clear()

    # ------------------------------------------------------------------ kubeconfig

    def kubeconfig(self, namespace: str = "default", *, token: str | None = None) -> dict[str, Any]:
        """A kubeconfig for the admin (the sim's token, if any), or for whoever ``token`` belongs to."""
        token = token or self.token
        user: dict[str, Any] = {"token": token} if token else {}
        return {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "dra-gitops-sim", "cluster": {"server": self.url}}],
            "users": [{"name": "dra-gitops-sim", "user": user}],
            "contexts": [
                {
                    "name": "dra-gitops-sim",
                    "context": {
                        "cluster": "dra-gitops-sim",
                        "user": "dra-gitops-sim",
                        "namespace": namespace,
                    },
                }
            ],
            "current-context": "dra-gitops-sim",
        }

    def write_kubeconfig(self, path: str | Path, *, token: str | None = None) -> Path:
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(yaml.safe_dump(self.kubeconfig(token=token), sort_keys=False))
        p.chmod(0o600)
        return p

    # ------------------------------------------------------------------ persistence

    def _restore(self, data_dir: Path) -> Journal:
        """Load the store from ``data_dir`` (custom resources once their CRDs serve them again), then
        journal every change there."""
        journal = Journal(data_dir)
        try:
            restored = journal.load()
            left = self.store.restore(restored.rv, restored.records())
            for crd in self.store.list("apiextensions.k8s.io", "customresourcedefinitions"):
                self._crd_changed("ADDED", crd)
            for group, plural, ns, name, _ in self.store.restore(restored.rv, left):
                # its CRD's deletion removes them; a kill half-way through leaves some behind
                log.warning("sim: %s: dropping %s/%s: no CRD serves %s.%s", data_dir, ns, name, plural, group)
            self.store.persist_to(journal)
        except BaseException:
            journal.close()
            raise
        return journal

    # ------------------------------------------------------------------ built-in controllers

    def _bootstrap(self) -> None:
        for ns in ("default", "kube-system", "kube-public", "kube-node-lease"):
            if self.store.get_ref("", "namespaces", "", ns) is None:
                self.store.create("", "namespaces", {"metadata": {"name": ns}})
        rbac.bootstrap(self.store)  # cluster-admin, system:discovery, system:basic-user, ...
        # The two PriorityClasses every real cluster has (driver DaemonSets use system-node-critical).
        for name, value in (("system-node-critical", 2000001000), ("system-cluster-critical", 2000000000)):
            if self.store.get_ref("scheduling.k8s.io", "priorityclasses", "", name) is None:
                self.store.create(
                    "scheduling.k8s.io",
                    "priorityclasses",
                    {"metadata": {"name": name}, "value": value, "globalDefault": False},
                )

    def _builtin_controllers(self, change: Change) -> None:
        event, rtype, obj = change[1], change[2], change[3]
        if rtype.group == "" and rtype.plural == "namespaces" and event == "ADDED":
            # real clusters admit Pods only once this exists; we create it at once
            with contextlib.suppress(AlreadyExists):
                self.store.create(
                    "",
                    "serviceaccounts",
                    {"metadata": {"name": "default", "namespace": obj["metadata"]["name"]}},
                )
        elif rtype.group == "apiextensions.k8s.io" and rtype.plural == "customresourcedefinitions":
            self._crd_changed(event, obj)

    def _crd_changed(self, event: str, crd: dict[str, Any]) -> None:
        spec = crd.get("spec") or {}
        names = spec.get("names") or {}
        group, plural = spec.get("group", ""), names.get("plural", "")
        if not group or not plural:
            return
        if event == "DELETED":
            self.api.crd_versions.pop((group, plural), None)
            for o in self.store.list(group, plural):
                md = o["metadata"]
                self.store.delete(group, plural, md.get("namespace", ""), md["name"])
            self.store.unregister_type(group, plural)
            return
        versions = [v for v in spec.get("versions") or [] if v.get("served", True)]
        if not versions:
            return
        storage = next((v for v in versions if v.get("storage")), versions[0])
        rtype = ResourceType(
            group=group,
            version=storage["name"],
            plural=plural,
            kind=names.get("kind", ""),
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
            subresources=("status",) if "status" in (storage.get("subresources") or {}) else (),
            singular=names.get("singular", names.get("kind", "").lower()),
            short_names=tuple(names.get("shortNames") or ()),
            categories=tuple(names.get("categories") or ()),
        )
        self.store.register_type(rtype)
        self.api.crd_versions[(group, plural)] = [storage["name"]] + [
            v["name"] for v in versions if v["name"] != storage["name"]
        ]
        conds = {c.get("type"): c.get("status") for c in (crd.get("status") or {}).get("conditions") or []}
        if conds.get("Established") == "True":
            return
        md = crd["metadata"]

        def establish(o: dict[str, Any]) -> None:
            ts = now()
            o["status"] = {
                "conditions": [
                    {
                        "type": "NamesAccepted",
                        "status": "True",
                        "reason": "NoConflicts",
                        "message": "no conflicts found",
                        "lastTransitionTime": ts,
                    },
                    {
                        "type": "Established",
                        "status": "True",
                        "reason": "InitialNamesAccepted",
                        "message": "the initial names have been accepted",
                        "lastTransitionTime": ts,
                    },
                ],
                "acceptedNames": names,
                "storedVersions": [storage["name"]],
            }

        self.store.mutate(
            "apiextensions.k8s.io", "customresourcedefinitions", "", md["name"], establish, status=True
        )
