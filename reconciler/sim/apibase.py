"""The simulated kube-apiserver's common parts: request and response, errors shaped as real ``Status``
objects, resource resolution and the helpers every verb uses.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from io import BufferedIOBase
from typing import Any

from reconciler.errors import DraGitopsError
from reconciler.sim import conversion
from reconciler.sim.resources import DRA_PLURALS, RESOURCE_GROUP, RESOURCE_VERSIONS, Served
from reconciler.sim.store import Store
from reconciler.sim.storebase import NotFound, Obj

DEFAULT_KUBE_VERSION = "v1.36.2"
# what the simulated cluster reports for a resource.k8s.io setup that only a 1.32 server had
V1BETA1_ONLY_KUBE_VERSION = "v1.32.9"
NO_DRA_KUBE_VERSION = "v1.30.14"
WATCH_DEFAULT_TIMEOUT = 1800.0
DEPRECATION_WARNINGS = {
    "v1beta1": "deprecated in v1.35+, unavailable in v1.38+",
    "v1beta2": "deprecated in v1.36+, unavailable in v1.39+",
}
# (version, plural) whose kind a version brought in later and which is not deprecated yet on 1.36
NOT_DEPRECATED = frozenset({("v1beta2", "devicetaintrules")})
BUILTIN_GROUP_ORDER = (
    "apps",
    "events.k8s.io",
    "batch",
    "rbac.authorization.k8s.io",
    "coordination.k8s.io",
    "networking.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "node.k8s.io",
    "admissionregistration.k8s.io",
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
    query_pairs: list[tuple[str, str]] = field(default_factory=list)  # every parameter, repeats kept


@dataclass
class Response:
    status: int
    body: bytes = b""
    content_type: str = "application/json"
    headers: list[tuple[str, str]] = field(default_factory=list)
    # for watch: called with a chunk writer instead of sending ``body``
    stream: Callable[[Callable[[bytes], None]], None] | None = None
    # for a 101 Switching Protocols answer: called with the connection's writer once the head is sent
    upgrade: Callable[[BufferedIOBase], None] | None = None


class ApiError(DraGitopsError):
    """An error answered with a Status object (the simulated API server's answer)."""

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


def json_bytes(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def ok(obj: Any, status: int = 200, headers: list[tuple[str, str]] | None = None) -> Response:
    return Response(status, json_bytes(obj), headers=headers or [])


@dataclass
class Route:
    served: Served | None
    namespace: str  # "" for cluster scope or all namespaces
    name: str
    sub: str  # "" or "status"
    discovery: str = ""  # discovery path when not a resource route


@dataclass(frozen=True)
class ApiOptions:
    """What the simulated API server serves and who may call it."""

    served_versions: tuple[str, ...] = ("v1",)  # of resource.k8s.io
    token: str | None = None  # the bearer token of the cluster-admin (None: no authentication)
    kube_version: str | None = None  # None: the newest release that serves `served_versions`


class ApiBase:
    """State and resolution shared by the verb mixins of :class:`reconciler.sim.apiserver.ApiServer`."""

    def __init__(self, store: Store, options: ApiOptions) -> None:
        unknown = [v for v in options.served_versions if v not in RESOURCE_VERSIONS]
        if unknown:
            raise ValueError(f"unsupported resource.k8s.io versions: {unknown}")
        self.store = store
        self.served_versions = tuple(v for v in RESOURCE_VERSIONS if v in options.served_versions)
        self.token = options.token
        kube_version = options.kube_version
        if kube_version is None:
            if not self.served_versions:
                kube_version = NO_DRA_KUBE_VERSION  # DRA off, as on a default 1.30 cluster
            else:
                kube_version = (
                    DEFAULT_KUBE_VERSION if "v1" in self.served_versions else V1BETA1_ONLY_KUBE_VERSION
                )
        self.kube_version = kube_version
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

    def authorize_create_on_patch(self) -> None:
        """Raise 403 when the requester may patch but not create (the RBAC-enforcing server overrides it)."""

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

    def _selectors(self, req: Request, served: Served) -> tuple[str | None, str | None]:
        return req.query.get("labelSelector"), conversion.field_selector_to_storage(
            served, req.query.get("fieldSelector")
        )

    def _dry_run(self, req: Request, body_opts: Obj | None = None) -> bool:
        values = [req.query["dryRun"]] if req.query.get("dryRun") else []
        if body_opts and isinstance(body_opts.get("dryRun"), list):
            values += body_opts["dryRun"]
        for v in values:
            if v != "All":
                raise ApiError(400, f'Invalid value: "{v}": supported values: "All"', reason="BadRequest")
        return bool(values)

    # ------------------------------------------------------------------ for the SimCluster

    def close(self) -> None:
        self.stopping.set()
