"""Discovery of the simulated kube-apiserver: /version, /api, /apis, the resource lists and OpenAPI."""

from __future__ import annotations

from reconciler.sim import openapi
from reconciler.sim.apibase import ApiBase, ApiError, Request, Response, ok
from reconciler.sim.storebase import Obj


class Discovery(ApiBase):
    def discovery(self, req: Request, path: str) -> Response:
        if req.method != "GET":
            raise ApiError(405, f"the server does not allow this method on the requested resource ({path})")
        if path == "/version":
            minor = self.kube_version.lstrip("v").split(".")[1]
            return ok(
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
            return ok(
                {
                    "kind": "APIVersions",
                    "versions": ["v1"],
                    "serverAddressByClientCIDRs": [
                        {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1:6443"}
                    ],
                }
            )
        if path == "/api/v1":
            return ok(self._resource_list("", "v1"))
        if path == "/apis":
            groups = [self._group(g, vs) for g, vs in self.group_versions().items() if vs]
            return ok({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
        parts = path.strip("/").split("/")
        if parts[0] == "apis" and len(parts) in (2, 3):
            versions = self.group_versions().get(parts[1])
            if versions and len(parts) == 2:
                return ok(dict(self._group(parts[1], versions), kind="APIGroup", apiVersion="v1"))
            if versions and parts[2] in versions:
                return ok(self._resource_list(parts[1], parts[2]))
        if path == "/openapi/v2":
            return self.openapi_v2(req)
        if parts[0] == "openapi" and len(parts) >= 2 and parts[1] == "v3":
            return self.openapi_v3("/".join(parts[2:]))
        raise ApiError(404, "the server could not find the requested resource")

    def openapi_v2(self, req: Request) -> Response:
        """Swagger 2.0 with a definition per served kind; protobuf when asked for it, as kubectl does."""
        kinds = [
            (s.group, s.version, s.rtype.kind)
            for group, versions in [("", ["v1"]), *self.group_versions().items()]
            for version in versions
            for s in self.resources_in(group, version)
        ]
        document = openapi.v2_document(kinds, self.kube_version)
        if "proto-openapi.spec.v2" in req.headers.get("accept", ""):
            return Response(200, openapi.v2_protobuf(document), content_type=openapi.PROTOBUF_V2_CONTENT_TYPE)
        return ok(document)

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
            return ok({"paths": paths})
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
        return ok(
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
                entry = {
                    "name": f"{t.plural}/{sub}",
                    "singularName": "",
                    "namespaced": t.namespaced,
                    "kind": t.kind,
                    "verbs": ["get", "patch", "update"],
                }
                if sub == "log":
                    entry["verbs"] = ["get"]
                elif sub == "exec":
                    entry["verbs"] = ["create", "get"]
                elif sub == "token":  # TokenRequest, as a real server lists it
                    entry.update(group="authentication.k8s.io", version="v1", kind="TokenRequest")
                    entry["verbs"] = ["create"]
                resources.append(entry)
        gv = f"{group}/{version}" if group else version
        return {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}
