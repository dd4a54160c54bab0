"""The simulated kube-apiserver: routing, discovery, verbs, watch, errors shaped as real ``Status`` objects.

Request handling is transport-independent (``ApiServer.handle`` takes a ``Request`` and returns a
``Response``); ``reconciler.sim.server`` puts it behind ``http.server``.
"""

from __future__ import annotations

import base64
import json
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from reconciler.sim import conversion, fieldmanager, patch, schema, tables
from reconciler.sim.resources import DRA_PLURALS, RESOURCE_GROUP, RESOURCE_VERSIONS, Served
from reconciler.sim.selectors import SelectorError
from reconciler.sim.store import (
    Change,
    NotFound,
    Obj,
    Store,
    StoreError,
    clone,
)

DEFAULT_KUBE_VERSION = "v1.36.2"
# what the simulated cluster reports for a resource.k8s.io setup that only a 1.32 server had
V1BETA1_ONLY_KUBE_VERSION = "v1.32.9"
NO_DRA_KUBE_VERSION = "v1.30.14"
WATCH_DEFAULT_TIMEOUT = 1800.0
DEPRECATION_WARNINGS = {
    "v1beta1": "deprecated in v1.35+, unavailable in v1.38+",
    "v1beta2": "deprecated in v1.36+, unavailable in v1.39+",
}
BUILTIN_GROUP_ORDER = (
    "apps",
    "events.k8s.io",
    "batch",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    RESOURCE_GROUP,
)
REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}


@dataclass
class Request:
    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]  # lower-case names
    body: bytes = b""


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)
    # for watch: called with a chunk writer instead of sending ``body``
    stream: Callable[[Callable[[bytes], None]], None] | None = None


class ApiError(Exception):
    """An error answered with a Status object."""

    def __init__(
        self,
        code: int,
        message: str,
        reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason if reason is not None else REASONS.get(code, "")
        self.details = details


def status_body(code: int, message: str, reason: str, details: dict[str, Any] | None = None) -> Obj:
    body: Obj = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
    }
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def _ok(obj: Any, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, _json(obj), headers=headers or [])


@dataclass
class Route:
    served: Served | None
    namespace: str  # "" for cluster scope or all namespaces
    name: str
    sub: str  # "" or "status"
    discovery: str = ""  # discovery path when not a resource route


class Faults:
    """Injected failures for the next requests (optionally only those whose "METHOD path" matches)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rules: list[list[Any]] = []  # [remaining, kind, value, match]

    def add(self, n: int, kind: str, value: float, match: str | None) -> None:
        with self._lock:
            self._rules.append([n, kind, value, match])

    def clear(self) -> None:
        with self._lock:
            self._rules.clear()

    def take(self, method: str, path: str) -> tuple[str, float] | None:
        line = f"{method} {path}"
        with self._lock:
            for rule in self._rules:
                if rule[0] > 0 and (rule[3] is None or rule[3] in line):
                    rule[0] -= 1
                    out = (str(rule[1]), float(rule[2]))
                    self._rules = [r for r in self._rules if r[0] > 0]
                    return out
        return None


class ApiServer:
    """Serves the Kubernetes REST API from a :class:`Store`."""

    def __init__(
        self,
        store: Store,
        *,
        served_versions: tuple[str, ...] = ("v1",),
        token: str | None = None,
        kube_version: str | None = None,
    ) -> None:
        unknown = [v for v in served_versions if v not in RESOURCE_VERSIONS]
        if unknown:
            raise ValueError(f"unsupported resource.k8s.io versions: {unknown}")
        self.store = store
        self.served_versions = tuple(v for v in RESOURCE_VERSIONS if v in served_versions)
        self.token = token
        if kube_version is None:
            if not self.served_versions:
                kube_version = NO_DRA_KUBE_VERSION  # DRA off, as on a default 1.30 cluster
            else:
                kube_version = (
                    DEFAULT_KUBE_VERSION if "v1" in self.served_versions else V1BETA1_ONLY_KUBE_VERSION
                )
        self.kube_version = kube_version
        self.faults = Faults()
        self.stopping = threading.Event()
        # custom resources: (group, plural) -> versions served by their CRD (storage version first)
        self.crd_versions: dict[tuple[str, str], list[str]] = {}

    # ------------------------------------------------------------------ resolution

    def served(self, group: str, version: str, plural: str) -> Served | None:
        if group == "events.k8s.io":
            if version == "v1" and plural == "events":
                return Served(group, version, self.store.resource_type("", "events"))
            return None
        if group == RESOURCE_GROUP:
            if version in self.served_versions and plural in DRA_PLURALS.get(version, ()):
                return Served(group, version, self.store.resource_type(group, plural))
            return None
        try:
            rtype = self.store.resource_type(group, plural)
        except NotFound:
            return None
        crd = self.crd_versions.get((group, plural))
        if crd is not None:
            return Served(group, version, rtype) if version in crd else None
        return Served(group, version, rtype) if rtype.version == version else None

    def group_versions(self) -> dict[str, list[str]]:
        """Group -> served versions, preferred first (core excluded)."""
        out: dict[str, list[str]] = {}
        types = self.store.types()
        for g in BUILTIN_GROUP_ORDER:
            if g == RESOURCE_GROUP:
                if self.served_versions:  # an empty group is not listed at all, as on a real server
                    out[g] = list(self.served_versions)
            elif g == "events.k8s.io" or any(t.group == g for t in types):
                out[g] = ["v1"]
        for (g, _plural), versions in sorted(self.crd_versions.items()):
            lst = out.setdefault(g, [])
            lst.extend(v for v in versions if v not in lst)
        return out

    def resources_in(self, group: str, version: str) -> list[Served]:
        if group == "events.k8s.io":
            s = self.served(group, version, "events")
            return [s] if s else []
        if group == RESOURCE_GROUP:
            return [s for p in DRA_PLURALS.get(version, ()) if (s := self.served(group, version, p))]
        out = []
        for t in self.store.types():
            if t.group == group:
                s = self.served(group, version, t.plural)
                if s is not None:
                    out.append(s)
        return out

    def route(self, path: str) -> Route:
        parts = [p for p in path.split("/") if p]
        if not parts:
            return Route(None, "", "", "", discovery="/")
        if parts[0] == "api":
            if len(parts) <= 2:
                return Route(None, "", "", "", discovery="/" + "/".join(parts))
            group, version, rest = "", parts[1], parts[2:]
        elif parts[0] == "apis":
            if len(parts) <= 3:
                return Route(None, "", "", "", discovery="/" + "/".join(parts))
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return Route(None, "", "", "", discovery="/" + "/".join(parts))
        if rest and rest[0] == "watch":
            rest = rest[1:]
        namespace = ""
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        elif len(rest) == 2 and rest[0] == "namespaces" and group == "":
            return self._route_to(group, version, "namespaces", "", rest[1], "")
        if not rest or len(rest) > 3:
            raise ApiError(404, "the server could not find the requested resource")
        plural = rest[0]
        name = rest[1] if len(rest) > 1 else ""
        sub = rest[2] if len(rest) > 2 else ""
        return self._route_to(group, version, plural, namespace, name, sub)

    def _route_to(self, group: str, version: str, plural: str, ns: str, name: str, sub: str) -> Route:
        served = self.served(group, version, plural)
        if served is None:
            raise ApiError(404, "the server could not find the requested resource")
        if (
            sub
            and sub not in served.rtype.subresources
            and not (sub == "finalize" and plural == "namespaces")
        ):
            raise ApiError(404, "the server could not find the requested resource")
        if served.rtype.namespaced is False and ns:
            raise ApiError(404, "the server could not find the requested resource")
        return Route(served, ns, name, "status" if sub == "finalize" else sub)

    # ------------------------------------------------------------------ entry point

    def handle(self, req: Request) -> Response:
        try:
            if self.token is not None and req.headers.get("authorization") != f"Bearer {self.token}":
                raise ApiError(401, "Unauthorized")
            fault = self.faults.take(req.method, req.path)
            if fault is not None:
                kind, value = fault
                if kind == "fail":
                    code = int(value)
                    headers = [("Retry-After", "1")] if code in (429, 503) else []
                    msg = {429: "Too many requests, please try again later."}.get(
                        code, "simulated failure (fault injection)"
                    )
                    return Response(
                        code, _json(status_body(code, msg, REASONS.get(code, ""))), headers=headers
                    )
                self.stopping.wait(value)  # the client's read times out meanwhile
            route = self.route(req.path)
            if route.served is None:
                return self.discovery(req, route.discovery)
            if route.sub == "log":
                return self.pod_log(req, route)
            return self.resource(req, route)
        except ApiError as e:
            return Response(e.code, _json(status_body(e.code, e.message, e.reason, e.details)))
        except StoreError as e:
            return Response(e.code, _json(status_body(e.code, e.message, e.reason, self._details(e, req))))
        except Exception as e:  # noqa: BLE001 - a bug must answer 500, not kill the connection
            import logging

            logging.getLogger(__name__).exception("simulated apiserver: %s %s", req.method, req.path)
            return Response(
                500, _json(status_body(500, f"simulated apiserver error: {e!r}", "InternalError"))
            )

    def _details(self, e: StoreError, req: Request) -> Obj | None:
        """Status details as a real server fills them: name, group, kind (the resource; for Invalid the
        Kind) and the field causes."""
        try:
            route = self.route(req.path)
        except ApiError:
            return None
        if route.served is None:
            return None
        served = route.served
        name = e.name_hint or route.name
        details: Obj = {"name": name} if name else {}
        if served.group:
            details["group"] = served.group
        details["kind"] = served.rtype.kind if e.reason == "Invalid" else served.plural
        if e.causes:
            details["causes"] = e.causes
        return details

    # ------------------------------------------------------------------ discovery

    def discovery(self, req: Request, path: str) -> Response:
        if req.method != "GET":
            raise ApiError(405, f"the server does not allow this method on the requested resource ({path})")
        if path == "/version":
            minor = self.kube_version.lstrip("v").split(".")[1]
            return _ok(
                {
                    "major": "1",
                    "minor": minor,
                    "emulationMajor": "1",
                    "emulationMinor": minor,
                    "minCompatibilityMajor": "1",
                    "minCompatibilityMinor": str(int(minor) - 1),
                    "gitVersion": self.kube_version,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean",
                    "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.25.0",
                    "compiler": "gc",
                    "platform": "linux/amd64",
                }
            )
        if path in ("/healthz", "/readyz", "/livez"):
            return Response(200, b"ok", content_type="text/plain")
        if path == "/api":
            return _ok(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}
                    ],
                }
            )
        if path == "/api/v1":
            return _ok(self._resource_list("", "v1"))
        if path == "/apis":
            groups = [self._group(g, vs) for g, vs in self.group_versions().items() if vs]
            return _ok({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) in (2, 3):
            versions = self.group_versions().get(parts[1])
            if versions and len(parts) == 2:
                return _ok(dict(self._group(parts[1], versions), kind="APIGroup", apiVersion="v1"))
            if versions and parts[2] in versions:
                return _ok(self._resource_list(parts[1], parts[2]))
        if parts[0] == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            return self.openapi_v3("/".join(parts[2:]))
        raise ApiError(404, "the server could not find the requested resource")

    def openapi_v3(self, gv_path: str) -> Response:
        """Just enough OpenAPI v3 for kubectl to see that PATCH supports ``fieldValidation``.

        Without it kubectl refuses to apply ("failed to download openapi"); no schemas are published,
        so validation happens on the server, as it does against a real one.
        """
        gvs: dict[str, tuple[str, str]] = {"api/v1": ("", "v1")}
        for g, versions in self.group_versions().items():
            for v in versions:
                gvs[f"apis/{g}/{v}"] = (g, v)
        if not gv_path:
            paths = {
                p: {"serverRelativeURL": f"/openapi/v3/{p}?hash=sim{self.store.resource_version}"}
                for p in gvs
            }
            return _ok({"paths": paths})
        if gv_path not in gvs:
            raise ApiError(404, "the server could not find the requested resource")
        group, version = gvs[gv_path]
        params = [
            {"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": True}}
            for n in ("dryRun", "fieldManager", "fieldValidation", "force")
        ]
        doc_paths: Obj = {}
        for s in self.resources_in(group, version):
            t = s.rtype
            gvk = {"group": group, "version": version, "kind": t.kind}
            prefix = f"/{gv_path}/" + ("namespaces/{namespace}/" if t.namespaced else "")
            op = {
                "operationId": f"patch{t.kind}",
                "parameters": params,
                "responses": {"200": {"description": "OK"}},
                "x-kubernetes-action": "patch",
                "x-kubernetes-group-version-kind": gvk,
            }
            doc_paths[prefix + t.plural + "/{name}"] = {"patch": op}
        return _ok(
            {
                "openapi": "3.0.0",
                "info": {"title": "Kubernetes", "version": self.kube_version},
                "paths": doc_paths,
                "components": {"schemas": {}},
            }
        )

    def _group(self, group: str, versions: list[str]) -> Obj:
        gvs = [{"groupVersion": f"{group}/{v}", "version": v} for v in versions]
        return {"name": group, "versions": gvs, "preferredVersion": gvs[0]}

    def _resource_list(self, group: str, version: str) -> Obj:
        resources = []
        for s in sorted(self.resources_in(group, version), key=lambda s: s.plural):
            t = s.rtype
            entry: Obj = {
                "name": t.plural,
                "singularName": t.singular or t.kind.lower(),
                "namespaced": t.namespaced,
                "kind": t.kind,
                "verbs": list(t.verbs),
            }
            if t.short_names:
                entry["shortNames"] = list(t.short_names)
            if t.categories:
                entry["categories"] = list(t.categories)
            resources.append(entry)
            for sub in t.subresources:
                resources.append(
                    {
                        "name": f"{t.plural}/{sub}",
                        "singularName": "",
                        "namespaced": t.namespaced,
                        "kind": t.kind,
                        "verbs": ["get", "patch", "update"],
                    }
                )
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}

    # ------------------------------------------------------------------ resources

    def resource(self, req: Request, route: Route) -> Response:
        served = route.served
        assert served is not None
        method = req.method
        warnings: list[str] = []
        if served.group == RESOURCE_GROUP and served.version in DEPRECATION_WARNINGS:
            warnings.append(
                f"{served.group}/{served.version} {served.rtype.kind} is "
                f"{DEPRECATION_WARNINGS[served.version]}; use {served.group}/v1 {served.rtype.kind}"
            )
        if served.rtype.namespaced and not route.namespace and route.name:
            raise ApiError(404, "the server could not find the requested resource")
        if method == "GET":
            if route.name:
                resp = self.get(req, served, route)
            elif req.query.get("watch") in ("1", "true", "True"):
                return self.watch(req, served, route)
            else:
                resp = self.list_objects(req, served, route)
        elif method == "POST" and not route.name:
            resp = self.create(req, served, route, warnings)
        elif method == "PUT" and route.name:
            resp = self.update(req, served, route, warnings)
        elif method == "PATCH" and route.name:
            resp = self.patch(req, served, route, warnings)
        elif method == "DELETE":
            resp = (
                self.delete(req, served, route) if route.name else self.delete_collection(req, served, route)
            )
        else:
            raise ApiError(405, "the server does not allow this method on the requested resource")
        for w in warnings:
            escaped = w.replace("\\", "\\\\").replace('"', '\\"')
            resp.headers.append(("Warning", f'299 - "{escaped}"'))
        return resp

    def render(self, served: Served, obj: Obj) -> Obj:
        return conversion.from_storage(served, obj)

    def _not_found(self, served: Served, name: str) -> ApiError:
        t = served.rtype
        return ApiError(
            404,
            f'{served.plural}.{served.group} "{name}" not found'
            if served.group
            else f'{t.plural} "{name}" not found',
            details={"name": name, "group": served.group, "kind": served.plural}
            if served.group
            else {"name": name, "kind": served.plural},
        )

    def pod_log(self, req: Request, route: Route) -> Response:
        """`GET pods/NAME/log`: the lines the simulated kubelet and driver wrote (text/plain, tailLines)."""
        if req.method != "GET":
            raise ApiError(405, "the server does not allow this method on the requested resource")
        assert route.served is not None
        pod = self.store.get_ref("", "pods", route.namespace, route.name)
        if pod is None:
            raise self._not_found(route.served, route.name)
        container = req.query.get("container")
        names = [c.get("name") for c in (pod.get("spec") or {}).get("containers") or []]
        if container is not None and container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {route.name}", "BadRequest")
        lines = (
            self.store.read_log(route.namespace, route.name, container or (names[0] if names else None)) or []
        )
        tail = req.query.get("tailLines")
        if tail is not None and tail.isdigit():
            lines = lines[-int(tail) :] if int(tail) else []
        text = "".join(line + "\n" for line in lines)
        return Response(200, text.encode(), content_type="text/plain")

    def get(self, req: Request, served: Served, route: Route) -> Response:
        obj = self.store.get_ref(served.rtype.group, served.plural, route.namespace, route.name)
        if obj is None:
            raise self._not_found(served, route.name)
        if tables.wants_table(req.headers.get("accept", "")):
            return _ok(
                tables.table(served.rtype.group, served.plural, [obj], obj["metadata"]["resourceVersion"])
            )
        return _ok(self.render(served, obj))

    def _selectors(self, req: Request, served: Served) -> tuple[str | None, str | None]:
        return req.query.get("labelSelector"), conversion.field_selector_to_storage(
            served, req.query.get("fieldSelector")
        )

    def list_objects(self, req: Request, served: Served, route: Route) -> Response:
        label, fieldsel = self._selectors(req, served)
        try:
            items, rv = self.store.list_ref(
                served.rtype.group, served.plural, route.namespace or None, label, fieldsel
            )
        except SelectorError as e:
            raise ApiError(400, str(e)) from None
        meta: Obj = {"resourceVersion": rv}
        limit = int(req.query.get("limit") or 0)
        start = 0
        if req.query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(req.query["continue"]))
                start, meta["resourceVersion"] = int(token["start"]), str(token["rv"])
            except (ValueError, KeyError, TypeError):
                raise ApiError(400, "continue key is not valid") from None
        if limit > 0:
            end = start + limit
            if end < len(items):
                meta["continue"] = base64.urlsafe_b64encode(
                    json.dumps({"rv": meta["resourceVersion"], "start": end}).encode()
                ).decode()
                meta["remainingItemCount"] = len(items) - end
            items = items[start:end]
        elif start:
            items = items[start:]
        if tables.wants_table(req.headers.get("accept", "")):
            return _ok(tables.table(served.rtype.group, served.plural, items, str(meta["resourceVersion"])))
        custom = (served.group, served.plural) in self.crd_versions
        out_items = []
        for o in items:
            r = self.render(served, o) if served.converted or custom else o
            if not custom:
                # real servers leave kind/apiVersion out of the items of built-in lists
                r = {k: v for k, v in r.items() if k != "kind" and k != "apiVersion"}
            out_items.append(r)
        return _ok(
            {
                "kind": served.rtype.kind + "List",
                "apiVersion": served.api_version,
                "metadata": meta,
                "items": out_items,
            }
        )

    # ------------------------------------------------------------------ writes

    def _body(self, req: Request, yaml_ok: bool = False) -> Any:
        if not req.body:
            raise ApiError(
                400,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml, application/vnd.kubernetes.protobuf",
            )
        try:
            return json.loads(req.body)
        except ValueError:
            if not yaml_ok and "yaml" not in req.headers.get("content-type", ""):
                raise ApiError(400, "couldn't get version/kind; json parse error: invalid JSON") from None
        try:
            return yaml.safe_load(req.body)
        except yaml.YAMLError as e:
            raise ApiError(400, f"error decoding YAML: {e}") from None

    def _dry_run(self, req: Request, body_opts: Obj | None = None) -> bool:
        values = [req.query["dryRun"]] if req.query.get("dryRun") else []
        if body_opts and isinstance(body_opts.get("dryRun"), list):
            values += body_opts["dryRun"]
        for v in values:
            if v != "All":
                raise ApiError(400, f'Invalid value: "{v}": supported values: "All"', reason="BadRequest")
        return bool(values)

    def _manager(self, req: Request) -> str:
        mgr = req.query.get("fieldManager")
        if mgr:
            return mgr
        ua = req.headers.get("user-agent", "")
        return (ua.split("/", 1)[0] or "unknown")[:128]

    def _check_object(self, served: Served, route: Route, obj: Any, *, need_name: bool) -> Obj:
        if not isinstance(obj, dict):
            raise ApiError(400, "the body of the request was in an unknown format")
        kind, api_version = obj.get("kind"), obj.get("apiVersion")
        if kind and kind != served.rtype.kind:
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({served.api_version})"
                if api_version != served.api_version
                else f"kind {kind} does not match the expected kind {served.rtype.kind}",
            )
        if api_version and api_version != served.api_version:
            raise ApiError(
                400,
                f"the API version in the data ({api_version}) does not match the expected API version "
                f"({served.api_version})",
            )
        md = obj.get("metadata")
        if md is None:
            md = obj["metadata"] = {}
        if not isinstance(md, dict):
            raise ApiError(400, "metadata must be an object")
        if served.rtype.namespaced:
            ns = md.get("namespace")
            if ns and route.namespace and ns != route.namespace:
                raise ApiError(
                    400,
                    "the namespace of the provided object does not match the namespace sent on the request",
                )
            if route.namespace:
                md["namespace"] = route.namespace
        else:
            md.pop("namespace", None)
        if need_name and route.name and md.get("name") and md["name"] != route.name:
            raise ApiError(
                400,
                "the name of the object ("
                + str(md["name"])
                + ") does not match the name on the URL ("
                + route.name
                + ")",
            )
        if need_name and route.name:
            md["name"] = route.name
        return obj

    def _unknown(
        self, req: Request, served: Served, obj: Obj, warnings: list[str], *, apply: bool, route: Route
    ) -> None:
        """Unknown fields: apply always fails; other writes follow ``fieldValidation`` (default Warn)."""
        sch = schema.schema_for(served.rtype.group, served.plural)
        if not sch:
            return
        mode = req.query.get("fieldValidation", "Warn" if not apply else "Strict")
        found = schema.unknown_fields(obj, sch, prune=not apply)
        if not found:
            return
        if apply:
            md = obj.get("metadata") or {}
            ident = f"{md.get('namespace', route.namespace)}/{md.get('name', route.name)}"
            t = served.rtype
            raise ApiError(
                500,
                f"failed to create typed patch object ({ident}; {t.api_version}, Kind={t.kind}): "
                f".{found[0]}: field not declared in schema",
                reason="",
            )
        if mode == "Strict":
            raise ApiError(400, "strict decoding error: " + ", ".join(f'unknown field "{f}"' for f in found))
        if mode == "Warn":
            warnings.extend(f'unknown field "{f}"' for f in found)

    def create(self, req: Request, served: Served, route: Route, warnings: list[str]) -> Response:
        body = self._check_object(served, route, self._body(req), need_name=False)
        dry = self._dry_run(req)
        obj = conversion.to_storage(served, body)
        self._unknown(req, served, obj, warnings, apply=False, route=route)
        t = served.rtype
        obj["metadata"] = dict(obj["metadata"])
        obj["metadata"].pop("managedFields", None)
        fieldmanager.update(
            None,
            obj,
            manager=self._manager(req),
            scope="main",
            has_status="status" in t.subresources,
            api_version=t.api_version,
        )
        out = self.store.create_ref(t.group, t.plural, clone(obj), dry_run=dry)
        return _ok(self.render(served, out), 201)

    def update(self, req: Request, served: Served, route: Route, warnings: list[str]) -> Response:
        body = self._check_object(served, route, self._body(req), need_name=True)
        dry = self._dry_run(req)
        t = served.rtype
        new = conversion.to_storage(served, body)
        self._unknown(req, served, new, warnings, apply=False, route=route)
        with self.store.transaction():
            old = self.store.get_ref(t.group, t.plural, route.namespace, route.name)
            if old is None:
                raise self._not_found(served, route.name)
            rv = (new.get("metadata") or {}).get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise self.store.conflict(t, route.name)
            out = self._store_update(req, served, route, old, new, dry)
        return _ok(self.render(served, out))

    def _store_update(self, req: Request, served: Served, route: Route, old: Obj, new: Obj, dry: bool) -> Obj:
        t = served.rtype
        scope = "status" if route.sub else "main"
        has_status = "status" in t.subresources
        if scope == "status":
            # metadata sent through /status is ignored: judge ownership on old metadata + new status
            candidate = {k: v for k, v in old.items() if k != "status"}
            if "status" in new:
                candidate["status"] = new["status"]
            new = candidate
        elif has_status:
            new = {k: v for k, v in new.items() if k != "status"}
            if "status" in old:
                new["status"] = old["status"]
        new["metadata"] = dict(new.get("metadata") or {})
        fieldmanager.update(
            old,
            new,
            manager=self._manager(req),
            scope=scope,
            has_status=has_status,
            api_version=t.api_version,
        )
        return self.store.replace_ref(t, old, clone(new), status=scope == "status", dry_run=dry)

    def patch(self, req: Request, served: Served, route: Route, warnings: list[str]) -> Response:
        ctype = req.headers.get("content-type", "").split(";")[0].strip()
        dry = self._dry_run(req)
        t = served.rtype
        if ctype == "application/apply-patch+yaml":
            return self.apply(req, served, route, warnings, dry)
        if ctype not in (
            "application/merge-patch+json",
            "application/json-patch+json",
            "application/strategic-merge-patch+json",
        ):
            raise ApiError(
                415,
                f"the body of the request was in an unknown format - accepted media types include: "
                "application/json-patch+json, application/merge-patch+json, "
                f"application/apply-patch+yaml (got {ctype})",
            )
        if ctype == "application/strategic-merge-patch+json" and (t.group, t.plural) in {
            (g, p) for (g, p) in self.crd_versions
        }:
            raise ApiError(415, "strategic merge patch is not supported for custom resources")
        body = self._body(req)
        with self.store.transaction():
            old = self.store.get_ref(t.group, t.plural, route.namespace, route.name)
            if old is None:
                raise self._not_found(served, route.name)
            current = self.render(served, old)
            try:
                if ctype == "application/merge-patch+json":
                    patched = patch.merge_patch(current, body)
                elif ctype == "application/json-patch+json":
                    patched = patch.json_patch(current, body)
                else:
                    patched = patch.strategic_merge(current, body)
            except patch.PatchError as e:
                raise ApiError(422, str(e)) from None
            if not isinstance(patched, dict):
                raise ApiError(422, "patched object is not an object")
            md = patched.get("metadata")
            if not isinstance(md, dict):
                patched["metadata"] = md = {}
            rv = md.get("resourceVersion")
            if rv and rv != old["metadata"]["resourceVersion"]:
                raise self.store.conflict(t, route.name)
            for k in ("name", "namespace", "uid"):
                if k in old["metadata"] and md.get(k) != old["metadata"][k] and k != "uid":
                    md[k] = old["metadata"][k]
            new = conversion.to_storage(served, patched)
            self._unknown(req, served, new, warnings, apply=False, route=route)
            out = self._store_update(req, served, route, old, new, dry)
        return _ok(self.render(served, out))

    def apply(self, req: Request, served: Served, route: Route, warnings: list[str], dry: bool) -> Response:
        t = served.rtype
        manager = req.query.get("fieldManager")
        if not manager:
            raise ApiError(
                400,
                'PatchOptions.meta.k8s.io "" is invalid: fieldManager: Required value: is required '
                "for apply patch",
            )
        force = req.query.get("force") in ("true", "1", "True")
        body = self._body(req, yaml_ok=True)
        if not isinstance(body, dict):
            raise ApiError(400, "error decoding YAML: the apply configuration must be an object")
        if not body.get("apiVersion") or not body.get("kind"):
            raise ApiError(400, "invalid object type: " + ("/, Kind=" if not body.get("kind") else ""))
        body = self._check_object(served, route, body, need_name=True)
        cfg = conversion.to_storage(served, body)
        self._unknown(req, served, cfg, warnings, apply=True, route=route)
        scope = "status" if route.sub else "main"
        has_status = "status" in t.subresources
        with self.store.transaction():
            old = self.store.get_ref(t.group, t.plural, route.namespace, route.name)
            if old is None and scope == "status":
                raise self._not_found(served, route.name)
            try:
                new = fieldmanager.apply(
                    old,
                    cfg,
                    manager=manager,
                    force=force,
                    scope=scope,
                    has_status=has_status,
                    api_version=t.api_version,
                )
            except fieldmanager.ApplyConflict as e:
                causes = [
                    {
                        "reason": "FieldManagerConflict",
                        "message": f"conflict with {fieldmanager.print_manager(m)}",
                        "field": fieldmanager.path_string(p),
                    }
                    for m, p in e.conflicts
                ]
                raise ApiError(409, str(e), details={"causes": causes}) from None
            new = clone(new)
            if old is None:
                new.setdefault("metadata", {})["name"] = route.name
                if t.namespaced:
                    new["metadata"]["namespace"] = route.namespace
                out = self.store.create_ref(t.group, t.plural, new, dry_run=dry)
                return _ok(self.render(served, out), 201)
            out = self.store.replace_ref(t, old, new, status=scope == "status", dry_run=dry)
        return _ok(self.render(served, out))

    # ------------------------------------------------------------------ delete

    def _delete_options(self, req: Request) -> Obj:
        opts: Obj = {}
        if req.body:
            try:
                body = json.loads(req.body)
            except ValueError:
                raise ApiError(400, "invalid DeleteOptions") from None
            if isinstance(body, dict):
                opts = body
        return opts

    def _propagation(self, req: Request, opts: Obj) -> str:
        policy = req.query.get("propagationPolicy") or opts.get("propagationPolicy")
        if opts.get("orphanDependents") is True or req.query.get("orphanDependents") == "true":
            policy = policy or "Orphan"
        policy = policy or "Background"
        if policy not in ("Background", "Foreground", "Orphan"):
            raise ApiError(
                422,
                f'DeleteOptions.meta.k8s.io "" is invalid: propagationPolicy: Unsupported value: "{policy}": '
                'supported values: "Foreground", "Background", "Orphan", "nil"',
            )
        return str(policy)

    def delete(self, req: Request, served: Served, route: Route) -> Response:
        opts = self._delete_options(req)
        dry = self._dry_run(req, opts)
        pre = opts.get("preconditions") or {}
        t = served.rtype
        out = self.store.delete(
            t.group,
            t.plural,
            route.namespace,
            route.name,
            propagation=self._propagation(req, opts),
            dry_run=dry,
            precondition_uid=pre.get("uid"),
            precondition_rv=pre.get("resourceVersion"),
        )
        if out is None:
            raise self._not_found(served, route.name)
        return _ok(self.render(served, out))

    def delete_collection(self, req: Request, served: Served, route: Route) -> Response:
        opts = self._delete_options(req)
        dry = self._dry_run(req, opts)
        propagation = self._propagation(req, opts)
        label, fieldsel = self._selectors(req, served)
        t = served.rtype
        try:
            items, rv = self.store.list_ref(t.group, t.plural, route.namespace or None, label, fieldsel)
        except SelectorError as e:
            raise ApiError(400, str(e)) from None
        deleted = []
        for o in items:
            md = o["metadata"]
            out = self.store.delete(
                t.group, t.plural, md.get("namespace", ""), md["name"], propagation=propagation, dry_run=dry
            )
            if out is not None:
                deleted.append(self.render(served, out))
        return _ok(
            {
                "kind": t.kind + "List",
                "apiVersion": served.api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": deleted,
            }
        )

    # ------------------------------------------------------------------ watch

    def watch(self, req: Request, served: Served, route: Route) -> Response:
        label, fieldsel = self._selectors(req, served)
        try:
            from reconciler.sim.selectors import compile_selectors

            match = compile_selectors(label, fieldsel)
        except SelectorError as e:
            raise ApiError(400, str(e)) from None
        try:
            timeout = float(req.query.get("timeoutSeconds") or WATCH_DEFAULT_TIMEOUT)
        except ValueError:
            raise ApiError(400, "invalid timeoutSeconds") from None
        rv_param = req.query.get("resourceVersion") or ""
        if rv_param and not rv_param.isdigit():
            raise ApiError(400, f'resourceVersion: Invalid value: "{rv_param}": must be a number')
        t = served.rtype
        ns = route.namespace
        q: queue.Queue[Change | None] = queue.Queue()

        def on_change(change: Change) -> None:
            ctype = change[2]
            if ctype.group != t.group or ctype.plural != t.plural:
                return
            md = change[3]["metadata"]
            if ns and md.get("namespace") != ns:
                return
            if match is not None and not match(change[3]):
                return
            q.put(change)

        initial: list[Obj] = []
        since: int | None
        with self.store.transaction():
            if rv_param in ("", "0"):
                initial, list_rv = self.store.list_ref(t.group, t.plural, ns or None, label, fieldsel)
                since = int(list_rv)
            else:
                since = int(rv_param)
            try:
                unsubscribe = self.store.watch_from(on_change, since)
            except StoreError as e:
                gone = status_body(410, e.message, "Expired")

                def send_gone(write: Callable[[bytes], None]) -> None:
                    write(_json({"type": "ERROR", "object": gone}) + b"\n")

                return Response(200, stream=send_gone)

        def stream(write: Callable[[bytes], None]) -> None:
            deadline = time.monotonic() + timeout
            last = since or 0
            try:
                for o in initial:
                    write(_json({"type": "ADDED", "object": self.render(served, o)}) + b"\n")
                while not self.stopping.is_set():
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return
                    try:
                        change = q.get(timeout=min(remaining, 0.25))
                    except queue.Empty:
                        continue
                    if change is None or change[0] <= last:
                        continue
                    last = change[0]
                    write(_json({"type": change[1], "object": self.render(served, change[3])}) + b"\n")
            finally:
                unsubscribe()

        return Response(200, stream=stream)

    # ------------------------------------------------------------------ for the SimCluster

    def close(self) -> None:
        self.stopping.set()
