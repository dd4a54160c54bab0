"""The simulated kube-apiserver: routing, the entry point, reads; the verbs live in their mixins.

Request handling is transport-independent (``ApiServer.handle`` takes a ``Request`` and returns a
``Response``); ``reconciler.sim.server`` puts it behind ``http.server``.
"""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from reconciler.sim import limits, rbac, tables
from reconciler.sim.apibase import (
    DEPRECATION_WARNINGS,
    NOT_DEPRECATED,
    REASONS,
    ApiError,
    ApiOptions,
    Request,
    Response,
    Route,
    json_bytes,
    ok,
    status_body,
)
from reconciler.sim.audit import AuditLog
from reconciler.sim.auth import SELF_SUBJECT_REVIEW_PATH, Authenticator, self_subject_review
from reconciler.sim.deletes import Deletes
from reconciler.sim.discovery import Discovery
from reconciler.sim.podexec import pod_exec
from reconciler.sim.rbac_escalation import EscalationCheck
from reconciler.sim.resources import RESOURCE_GROUP, Served
from reconciler.sim.selectors import SelectorError
from reconciler.sim.store import Store
from reconciler.sim.storebase import Obj, StoreError
from reconciler.sim.watch import Watch
from reconciler.sim.writes import Writes

__all__ = ["ApiError", "ApiServer", "Faults", "Request", "Response"]


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


class ApiServer(Discovery, Writes, Deletes, Watch):
    """Serves the Kubernetes REST API from a :class:`Store`."""

    def __init__(self, store: Store, options: ApiOptions) -> None:
        super().__init__(store, options)
        self.faults = Faults()
        self.authn = Authenticator(store, options.token)
        self.authz = rbac.Authorizer(store)
        store.add_admission(EscalationCheck(self.authz).admit)
        self.audit: AuditLog | None = None  # set to record every request (tests, `sim serve --audit-log`)

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
        """Authenticate, serve as that user (RBAC unless privileged), audit."""
        try:
            user = self.authn.authenticate(req.headers.get("authorization"))
        except ApiError as e:
            return Response(e.code, json_bytes(status_body(e.code, e.message, e.reason, e.details)))
        attrs = rbac.request_attributes(user, req.method, req.path, req.query)
        with self.authz.acting_as(user, attrs) as scope:
            resp = self._serve(req, attrs)
        if self.audit is not None:
            self.audit.record(attrs, resp.status, scope.checks, req.query_pairs)
        return resp

    def _serve(self, req: Request, attrs: rbac.Attributes) -> Response:
        try:
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
                        code, json_bytes(status_body(code, msg, REASONS.get(code, ""))), headers=headers
                    )
                self.stopping.wait(value)  # the client's read times out meanwhile
            if not attrs.user.privileged and not self.authz.authorize(attrs).allowed:
                raise ApiError(403, rbac.forbidden_message(attrs), details=rbac.forbidden_details(attrs))
            if req.path == SELF_SUBJECT_REVIEW_PATH:
                return self_subject_review(req, attrs.user)
            route = self.route(req.path)
            if route.served is None:
                return self.discovery(req, route.discovery)
            if route.sub == "log":
                return self.pod_log(req, route)
            if route.sub == "exec":
                return pod_exec(self.store, req, route.namespace, route.name)
            if route.sub == "token":
                return self.authn.token_request(req, route.namespace, route.name)
            return self.resource(req, route)
        except ApiError as e:
            return Response(e.code, json_bytes(status_body(e.code, e.message, e.reason, e.details)))
        except StoreError as e:
            return Response(
                e.code, json_bytes(status_body(e.code, e.message, e.reason, self._details(e, req)))
            )
        except Exception as e:  # noqa: BLE001 - a bug must answer 500, not kill the connection
            import logging

            logging.getLogger(__name__).exception("simulated apiserver: %s %s", req.method, req.path)
            return Response(
                500, json_bytes(status_body(500, f"simulated apiserver error: {e!r}", "InternalError"))
            )

    def authorize_create_on_patch(self) -> None:
        decision = self.authz.authorize_implicit_create()
        if decision is not None and not decision.allowed:
            attrs = decision.attributes
            raise ApiError(403, rbac.forbidden_message(attrs), details=rbac.forbidden_details(attrs))

    def _details(self, e: StoreError, req: Request) -> Obj | None:
        """Status details as a real server fills them: name, group, kind (the resource; for Invalid the
        Kind) and the field causes."""
        try:
            route = self.route(req.path)
        except ApiError:
            return None
        if route.served is None or not e.reason:
            return None  # an error that is no API status (etcd's) has no details either
        served = route.served
        name = e.name_hint or route.name
        details: Obj = {"name": name} if name else {}
        if served.group:
            details["group"] = served.group
        details["kind"] = served.rtype.kind if e.reason == "Invalid" else served.plural
        if e.causes:
            details["causes"] = e.causes
        return details

    def resource(self, req: Request, route: Route) -> Response:
        served = route.served
        assert served is not None
        method = req.method
        warnings: list[str] = []
        if (
            served.group == RESOURCE_GROUP
            and served.version in DEPRECATION_WARNINGS
            and (served.version, served.plural) not in NOT_DEPRECATED
        ):
            warnings.append(
                f"{served.group}/{served.version} {served.rtype.kind} is "
                f"{DEPRECATION_WARNINGS[served.version]}; use {served.group}/v1 {served.rtype.kind}"
            )
        if served.rtype.namespaced and not route.namespace and route.name:
            raise ApiError(404, "the server could not find the requested resource")
        if method != "GET" and len(req.body) > limits.MAX_REQUEST_BODY_BYTES:
            raise ApiError(413, limits.body_too_large_message(), "RequestEntityTooLarge")
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
            return ok(
                tables.table(served.rtype.group, served.plural, [obj], obj["metadata"]["resourceVersion"])
            )
        return ok(self.render(served, obj))

    def list_objects(self, req: Request, served: Served, route: Route) -> Response:
        label, fieldsel = self._selectors(req, served)
        try:
            items, rv = self.store.list_ref(
                served.rtype.group, served.plural, route.namespace or None, label, fieldsel
            )
        except SelectorError as e:
            raise ApiError(400, str(e)) from e
        meta: Obj = {"resourceVersion": rv}
        limit = int(req.query.get("limit") or 0)
        start = 0
        if req.query.get("continue"):
            try:
                token = json.loads(base64.urlsafe_b64decode(req.query["continue"]))
                start, meta["resourceVersion"] = int(token["start"]), str(token["rv"])
            except (ValueError, KeyError, TypeError) as exc:
                raise ApiError(400, "continue key is not valid") from exc
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
            return ok(tables.table(served.rtype.group, served.plural, items, str(meta["resourceVersion"])))
        custom = (served.group, served.plural) in self.crd_versions
        out_items = []
        for o in items:
            r = self.render(served, o) if served.converted or custom else o
            if not custom:
                # real servers leave kind/apiVersion out of the items of built-in lists
                r = {k: v for k, v in r.items() if k != "kind" and k != "apiVersion"}
            out_items.append(r)
        return ok(
            {
                "kind": served.rtype.kind + "List",
                "apiVersion": served.api_version,
                "metadata": meta,
                "items": out_items,
            }
        )
