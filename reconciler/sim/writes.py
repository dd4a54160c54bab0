"""Write verbs of the simulated kube-apiserver: create, update, patch and server-side apply."""

from __future__ import annotations

import json
from typing import Any

import yaml

from reconciler.sim import conversion, fieldmanager, patch, schema
from reconciler.sim.apibase import ApiBase, ApiError, Request, Response, Route, ok
from reconciler.sim.resources import Served
from reconciler.sim.storebase import Obj, clone


class Writes(ApiBase):
    def _body(self, req: Request, yaml_ok: bool = False) -> Any:
        if not req.body:
            raise ApiError(
                400,
                "the body of the request was in an unknown format - accepted media types include: "
                "application/json, application/yaml, application/vnd.kubernetes.protobuf",
            )
        try:
            return json.loads(req.body)
        except ValueError as exc:
            if not yaml_ok and "yaml" not in req.headers.get("content-type", ""):
                raise ApiError(400, "couldn't get version/kind; json parse error: invalid JSON") from exc
        try:
            return yaml.safe_load(req.body)
        except yaml.YAMLError as e:
            raise ApiError(400, f"error decoding YAML: {e}") from e

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
        return ok(self.render(served, out), 201)

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
        return ok(self.render(served, out))

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
                raise ApiError(422, str(e)) from e
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
        return ok(self.render(served, out))

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
            if old is None:
                self.authorize_create_on_patch()
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
                raise ApiError(409, str(e), details={"causes": causes}) from e
            new = clone(new)
            if old is None:
                new.setdefault("metadata", {})["name"] = route.name
                if t.namespaced:
                    new["metadata"]["namespace"] = route.namespace
                out = self.store.create_ref(t.group, t.plural, new, dry_run=dry)
                return ok(self.render(served, out), 201)
            out = self.store.replace_ref(t, old, new, status=scope == "status", dry_run=dry)
        return ok(self.render(served, out))
