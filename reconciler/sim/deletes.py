"""DELETE of one object or a collection in the simulated kube-apiserver."""

from __future__ import annotations

import json

from reconciler.sim.apibase import ApiBase, ApiError, Request, Response, Route, ok
from reconciler.sim.resources import Served
from reconciler.sim.selectors import SelectorError
from reconciler.sim.storebase import Obj


class Deletes(ApiBase):
    def _delete_options(self, req: Request) -> Obj:
        opts: Obj = {}
        if req.body:
            try:
                body = json.loads(req.body)
            except ValueError as exc:
                raise ApiError(400, "invalid DeleteOptions") from exc
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

    def _grace_period(self, req: Request, opts: Obj) -> int | None:
        raw = req.query.get("gracePeriodSeconds", opts.get("gracePeriodSeconds"))
        if raw is None or raw == "":
            return None
        try:
            return int(raw)
        except (TypeError, ValueError) as exc:
            raise ApiError(400, f'invalid gracePeriodSeconds "{raw}": must be an integer') from exc

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
            grace_period=self._grace_period(req, opts),
        )
        if out is None:
            raise self._not_found(served, route.name)
        return ok(self.render(served, out))

    def delete_collection(self, req: Request, served: Served, route: Route) -> Response:
        opts = self._delete_options(req)
        dry = self._dry_run(req, opts)
        propagation = self._propagation(req, opts)
        grace = self._grace_period(req, opts)
        label, fieldsel = self._selectors(req, served)
        t = served.rtype
        try:
            items, rv = self.store.list_ref(t.group, t.plural, route.namespace or None, label, fieldsel)
        except SelectorError as e:
            raise ApiError(400, str(e)) from e
        deleted = []
        for o in items:
            md = o["metadata"]
            out = self.store.delete(
                t.group,
                t.plural,
                md.get("namespace", ""),
                md["name"],
                propagation=propagation,
                dry_run=dry,
                grace_period=grace,
            )
            if out is not None:
                deleted.append(self.render(served, out))
        return ok(
            {
                "kind": t.kind + "List",
                "apiVersion": served.api_version,
                "metadata": {"resourceVersion": self.store.resource_version},
                "items": deleted,
            }
        )
