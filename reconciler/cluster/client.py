"""The Kubernetes edge: one small client over the official `kubernetes` package.

Requests are built as plain values (path, query, body) and sent through the official `ApiClient`, which
brings kubeconfig, in-cluster config, TLS and auth. Discovery is read once per client (one reconcile pass)
and answers "which version of this kind does the cluster serve, what is its plural, is it namespaced".
Every API error becomes an `ApiError` whose message starts with the object ref and carries the server's
message; temporary errors (429, 5xx, timeouts, refused connections) are retried with backoff and then
raised as `TemporaryError` (exit 4).
"""

from __future__ import annotations

import builtins
import json
import random
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.errors import DraGitopsError, EnvironmentProblem, TemporaryError, UserError
from reconciler.model.objects import CLUSTER_SCOPED_KINDS, api_group

FIELD_MANAGER = "dra-gitops"
RequestLog = list[tuple[str, str, tuple[tuple[str, Any], ...]]]
_TEMPORARY_STATUS = frozenset({429, 500, 502, 503, 504})


class ApiError(DraGitopsError):
    """The API server refused a request. `status` and `reason` are the server's."""

    def __init__(
        self, message: str, *, where: str | None, status: int, reason: str, body: dict[str, Any]
    ) -> None:
        super().__init__(message, where=where)
        self.status = status
        self.reason = reason
        self.body = body


class NotFound(ApiError):
    pass


class Conflict(ApiError):
    pass


class Invalid(ApiError, UserError):
    """422/400: the object itself is wrong (validation, unknown field, immutable field)."""


class Forbidden(ApiError, EnvironmentProblem):
    """401/403: our credentials may not do this."""


@dataclass(frozen=True)
class ResourceInfo:
    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    verbs: tuple[str, ...]
    subresources: tuple[str, ...] = ()

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        prefix = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        parts = [prefix]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{namespace}")
        parts.append(self.plural)
        if name:
            parts.append(name)
        if subresource:
            parts.append(subresource)
        return "/".join(parts)


@dataclass(frozen=True)
class GroupInfo:
    name: str
    versions: tuple[str, ...]
    preferred: str


def object_where(kind: str, namespace: str | None, name: str | None) -> str:
    if name is None:
        return f"{kind}/{namespace}" if namespace else kind
    return f"{kind}/{namespace}/{name}" if namespace else f"{kind}/{name}"


def _status_message(body: dict[str, Any], fallback: str) -> str:
    message = body.get("message") if isinstance(body, dict) else None
    return str(message or fallback)


class RateLimiter:
    """Token bucket shared by all threads of one client (client-go's QPS/burst idea)."""

    def __init__(self, qps: float, burst: int) -> None:
        self.qps = qps
        self.burst = burst
        self._tokens = float(burst)
        self._last = time.monotonic()
        self._lock = threading.Lock()

    def acquire(self) -> None:
        if self.qps <= 0:
            return
        with self._lock:
            now = time.monotonic()
            self._tokens = min(self.burst, self._tokens + (now - self._last) * self.qps)
            self._last = now
            if self._tokens >= 1:
                self._tokens -= 1
                return
            wait = (1 - self._tokens) / self.qps
            self._tokens = 0
        time.sleep(wait)


class ClusterClient:
    """A connection to one cluster for one pass: discovery cache, reads, apply, delete, logs, exec."""

    def __init__(
        self,
        api_client: Any,
        *,
        timeout: float = 30.0,
        retries: int = 4,
        backoff: float = 0.25,
        qps: float = 500.0,
        burst: int = 1000,
        field_manager: str = FIELD_MANAGER,
    ) -> None:
        self.api = api_client
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.field_manager = field_manager
        self.host = str(getattr(api_client.configuration, "host", "?"))
        self._limiter = RateLimiter(qps, burst)
        self._lock = threading.Lock()
        self._groups: dict[str, GroupInfo] | None = None
        self._resources: dict[str, list[ResourceInfo]] = {}
        self._version: dict[str, Any] | None = None
        self.requests_sent = 0
        self.writes_sent = 0
        # (method, path, query) of every request when set to a list: what RBAC a command needs, tests.
        self.request_log: RequestLog | None = None

    # ---- construction -------------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        *,
        in_cluster: bool | None = None,
        **options: Any,
    ) -> ClusterClient:
        """Kubeconfig (file, $KUBECONFIG or ~/.kube/config) and context, or the in-cluster service account."""
        from kubernetes import client as k8s_client
        from kubernetes import config as k8s_config

        configuration = k8s_client.Configuration()
        try:
            if in_cluster or (in_cluster is None and kubeconfig is None and _running_in_cluster()):
                k8s_config.load_incluster_config(client_configuration=configuration)
            else:
                k8s_config.load_kube_config(
                    config_file=kubeconfig,
                    context=context,
                    client_configuration=configuration,
                    persist_config=False,
                )
        except (k8s_config.ConfigException, OSError, TypeError) as exc:
            raise EnvironmentProblem(f"cannot load cluster configuration: {exc}", where=kubeconfig) from None
        # Concurrent applies share one pool; the default of 4 connections would serialise them.
        configuration.connection_pool_maxsize = 32
        return cls(k8s_client.ApiClient(configuration), **options)

    @classmethod
    def for_url(cls, url: str, token: str | None = None, **options: Any) -> ClusterClient:
        """A client for a plain URL (the simulated cluster, tests)."""
        from kubernetes import client as k8s_client

        configuration = k8s_client.Configuration(host=url.rstrip("/"))
        if token:
            configuration.api_key = {"BearerToken": token}
            configuration.api_key_prefix = {"BearerToken": "Bearer"}
        configuration.connection_pool_maxsize = 32
        return cls(k8s_client.ApiClient(configuration), **options)

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- transport ----------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Sequence[tuple[str, Any]] = (),
        body: Any = None,
        content_type: str = "application/json",
        where: str | None = None,
        timeout: float | None = None,
        raw: bool = False,
    ) -> Any:
        """Send one request; JSON answer (or text with raw=True). Retries temporary failures."""
        attempt = 0
        while True:
            try:
                return self._send(method, path, query, body, content_type, where, timeout, raw)
            except TemporaryError as exc:
                attempt += 1
                if attempt > self.retries:
                    raise
                time.sleep(min(exc.delay, 5.0) * (1 + random.random() * 0.2))

    def _send(
        self,
        method: str,
        path: str,
        query: Sequence[tuple[str, Any]],
        body: Any,
        content_type: str,
        where: str | None,
        timeout: float | None,
        raw: bool,
    ) -> Any:
        import urllib3

        self._limiter.acquire()
        headers = {"Accept": "application/json", "Content-Type": content_type}
        # The generated REST layer JSON-encodes dict bodies for JSON content types itself; an apply patch
        # (YAML content type) must arrive as text, and JSON is valid YAML.
        payload = body
        if body is not None and not isinstance(body, str) and "yaml" in content_type:
            payload = json.dumps(body, separators=(",", ":"))
        request = self.api.param_serialize(
            method,
            path,
            query_params=list(query),
            header_params=headers,
            body=payload,
            auth_settings=["BearerToken"],
        )
        self.requests_sent += 1
        if self.request_log is not None:
            self.request_log.append((method, path, tuple(query)))
        if method in ("POST", "PUT", "PATCH", "DELETE") and not any(k == "dryRun" for k, _ in query):
            self.writes_sent += 1
        try:
            response = self.api.call_api(*request, _request_timeout=timeout or self.timeout)
            data = response.read()
        except (urllib3.exceptions.TimeoutError, urllib3.exceptions.ProtocolError) as exc:
            raise TemporaryError(
                f"{method} {path} timed out or was cut off: {exc}", where=where or self.host
            ) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise TemporaryError(f"cannot reach the API server at {self.host}: {exc}", where=where) from None
        except Exception as exc:  # the client wraps transport errors in ApiException(status=0)
            if getattr(exc, "status", None) == 0:
                raise TemporaryError(
                    f"cannot reach the API server at {self.host}: {exc}", where=where
                ) from None
            raise
        status = response.status
        if 200 <= status < 300:
            if raw:
                return data.decode("utf-8", "replace")
            return json.loads(data) if data else {}
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"message": data.decode("utf-8", "replace")[:500]}
        message = _status_message(parsed, f"HTTP {status}")
        reason = str(parsed.get("reason") or "") if isinstance(parsed, dict) else ""
        # Server-side apply reports a manifest that does not fit the schema as an internal error; retrying
        # cannot help, so it is the user's error like a 422.
        if status in _TEMPORARY_STATUS and "failed to create typed patch object" not in message:
            retry_after = response.getheader("Retry-After")
            delay = float(retry_after) if retry_after and retry_after.isdigit() else self.backoff
            raise TemporaryError(f"{message} (HTTP {status})", where=where or path, delay=delay)
        error_class: type[ApiError] = ApiError
        if status == 404:
            error_class = NotFound
        elif status == 409:
            error_class = Conflict
        elif status in (400, 422, 500):
            error_class = Invalid
        elif status in (401, 403):
            error_class = Forbidden
        raise error_class(message, where=where or path, status=status, reason=reason, body=parsed)

    # ---- discovery ----------------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        if self._version is None:
            self._version = dict(self.request("GET", "/version", where=self.host))
        return self._version

    def server_version(self) -> str:
        return str(self.version().get("gitVersion", "unknown"))

    def groups(self) -> dict[str, GroupInfo]:
        with self._lock:
            if self._groups is None:
                groups: dict[str, GroupInfo] = {}
                core = self.request("GET", "/api", where=self.host)
                core_versions = tuple(core.get("versions") or ["v1"])
                groups[""] = GroupInfo("", core_versions, core_versions[0])
                for group in self.request("GET", "/apis", where=self.host).get("groups") or []:
                    versions = tuple(v["version"] for v in group.get("versions") or [])
                    preferred = (group.get("preferredVersion") or {}).get("version") or (
                        versions[0] if versions else ""
                    )
                    groups[group["name"]] = GroupInfo(group["name"], versions, preferred)
                self._groups = groups
            return self._groups

    def served_versions(self, group: str) -> list[str]:
        info = self.groups().get(group)
        return list(info.versions) if info else []

    def resources(self, group: str, version: str) -> list[ResourceInfo]:
        key = f"{group}/{version}"
        with self._lock:
            cached = self._resources.get(key)
        if cached is not None:
            return cached
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.request("GET", path, where=key)
        except NotFound:
            listing = {"resources": []}
        found: list[ResourceInfo] = []
        subresources: dict[str, list[str]] = {}
        for item in listing.get("resources") or []:
            name = str(item.get("name", ""))
            if "/" in name:
                parent, sub = name.split("/", 1)
                subresources.setdefault(parent, []).append(sub)
        for item in listing.get("resources") or []:
            name = str(item.get("name", ""))
            if "/" in name:
                continue
            found.append(
                ResourceInfo(
                    group=group,
                    version=version,
                    kind=str(item.get("kind", "")),
                    plural=name,
                    namespaced=bool(item.get("namespaced")),
                    verbs=tuple(item.get("verbs") or ()),
                    subresources=tuple(subresources.get(name, ())),
                )
            )
        with self._lock:
            self._resources[key] = found
        return found

    def resource_for(self, api_version: str, kind: str, *, where: str | None = None) -> ResourceInfo:
        """The served resource for an apiVersion and kind; UserError-like `Invalid` when not served."""
        group = api_group(api_version)
        version = api_version.rsplit("/", 1)[-1]
        for info in self.resources(group, version):
            if info.kind == kind:
                return info
        served = self.served_versions(group)
        hint = f"; the cluster serves {group or 'core'} {', '.join(served)}" if served else ""
        raise NotFound(
            f"{api_version} {kind} is not served by the cluster{hint}",
            where=where or kind,
            status=404,
            reason="NotServed",
            body={},
        )

    def find_kind(self, group: str, kind: str) -> ResourceInfo | None:
        """The resource for a kind in its group's preferred version (any served version if needed)."""
        info = self.groups().get(group)
        if info is None:
            return None
        for version in (info.preferred, *[v for v in info.versions if v != info.preferred]):
            for resource in self.resources(group, version):
                if resource.kind == kind:
                    return resource
        return None

    def invalidate(self) -> None:
        """Forget discovery (after CRDs were created)."""
        with self._lock:
            self._groups = None
            self._resources = {}

    # ---- reads ----------------------------------------------------------------------------------------

    def get(self, resource: ResourceInfo, namespace: str | None, name: str) -> dict[str, Any] | None:
        where = object_where(resource.kind, namespace if resource.namespaced else None, name)
        try:
            return dict(self.request("GET", resource.path(namespace, name), where=where))
        except NotFound:
            return None

    def list(
        self,
        resource: ResourceInfo,
        namespace: str | None = None,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        page_size: int = 500,
    ) -> list[dict[str, Any]]:
        """Every object (paged with `limit`/`continue`); each item gets apiVersion and kind filled in."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            query: list[tuple[str, Any]] = [("limit", page_size)]
            if label_selector:
                query.append(("labelSelector", label_selector))
            if field_selector:
                query.append(("fieldSelector", field_selector))
            if token:
                query.append(("continue", token))
            answer = self.request("GET", resource.path(namespace), query=query, where=resource.kind)
            for item in answer.get("items") or []:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                items.append(item)
            token = (answer.get("metadata") or {}).get("continue")
            if not token:
                return items

    def list_kind(
        self, group: str, kind: str, namespace: str | None = None, **selectors: Any
    ) -> builtins.list[dict[str, Any]]:
        """LIST by kind in whatever version the cluster prefers; [] when the kind is not served."""
        resource = self.find_kind(group, kind)
        return self.list(resource, namespace, **selectors) if resource else []

    # ---- writes ---------------------------------------------------------------------------------------

    def apply(
        self, body: dict[str, Any], *, dry_run: bool = False, force: bool = True, where: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply of one manifest with our field manager (force: the repository wins)."""
        kind = str(body["kind"])
        meta = body.get("metadata") or {}
        name = str(meta["name"])
        resource = self.resource_for(str(body["apiVersion"]), kind, where=where)
        namespace = str(meta.get("namespace") or "default") if resource.namespaced else None
        where = where or object_where(kind, namespace, name)
        query: list[tuple[str, Any]] = [("fieldManager", self.field_manager), ("fieldValidation", "Strict")]
        if force:
            query.append(("force", "true"))
        if dry_run:
            query.append(("dryRun", "All"))
        return dict(
            self.request(
                "PATCH",
                resource.path(namespace, name),
                query=query,
                body=body,
                content_type="application/apply-patch+yaml",
                where=where,
            )
        )

    def patch_merge(
        self,
        resource: ResourceInfo,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
    ) -> dict[str, Any]:
        where = object_where(resource.kind, namespace, name)
        return dict(
            self.request(
                "PATCH",
                resource.path(namespace, name, subresource),
                body=patch,
                content_type="application/merge-patch+json",
                where=where,
            )
        )

    def create(
        self, resource: ResourceInfo, body: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default") if resource.namespaced else None
        where = object_where(resource.kind, namespace, meta.get("name"))
        path = resource.path(namespace, meta.get("name") if subresource else None, subresource)
        return dict(self.request("POST", path, body=body, where=where))

    def replace(
        self, resource: ResourceInfo, body: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        meta = body.get("metadata") or {}
        namespace = str(meta.get("namespace") or "default") if resource.namespaced else None
        where = object_where(resource.kind, namespace, meta.get("name"))
        path = resource.path(namespace, str(meta["name"]), subresource)
        return dict(self.request("PUT", path, body=body, where=where))

    def delete(
        self,
        resource: ResourceInfo,
        namespace: str | None,
        name: str,
        *,
        propagation: str = "Background",
        dry_run: bool = False,
    ) -> bool:
        """Delete one object; False when it was already gone."""
        where = object_where(resource.kind, namespace, name)
        query: list[tuple[str, Any]] = [("propagationPolicy", propagation)]
        if dry_run:
            query.append(("dryRun", "All"))
        try:
            self.request("DELETE", resource.path(namespace, name), query=query, where=where)
        except NotFound:
            return False
        return True

    # ---- pods -----------------------------------------------------------------------------------------

    def pod_logs(self, namespace: str, name: str, container: str | None = None, tail_lines: int = 20) -> str:
        query: list[tuple[str, Any]] = [("tailLines", tail_lines)]
        if container:
            query.append(("container", container))
        path = f"/api/v1/namespaces/{namespace}/pods/{name}/log"
        try:
            return str(self.request("GET", path, query=query, where=f"Pod/{namespace}/{name}", raw=True))
        except (ApiError, TemporaryError) as exc:
            return f"(logs unavailable: {exc.detail})"

    def exec(
        self,
        namespace: str,
        name: str,
        command: Sequence[str],
        container: str | None = None,
        timeout: float = 60.0,
    ) -> str:
        """Run a command in a container through the exec API (websocket); its output, or ApiError when it
        cannot run, does not finish in time or exits non-zero."""
        from kubernetes import client as k8s_client
        from kubernetes.stream import stream

        core = k8s_client.CoreV1Api(self.api)
        kwargs: dict[str, Any] = {
            "command": list(command),
            "stderr": True,
            "stdout": True,
            "stdin": False,
            "tty": False,
        }
        if container:
            kwargs["container"] = container
        shown = " ".join(command)
        try:
            # Unbuffered, so the error channel can tell us the command's exit status afterwards.
            session = stream(
                core.connect_get_namespaced_pod_exec, name, namespace, _preload_content=False, **kwargs
            )
            session.run_forever(timeout=timeout)
            output = str(session.read_stdout() or "") + str(session.read_stderr() or "")
            still_running = session.is_open()
            session.close()
            code = None if still_running else session.returncode
        except Exception as exc:  # noqa: BLE001 - websocket and API errors alike end the verification step
            raise ApiError(
                f"exec {shown!r} failed: {exc}",
                where=f"Pod/{namespace}/{name}",
                status=0,
                reason="ExecFailed",
                body={},
            ) from None
        if still_running:
            raise ApiError(
                f"exec {shown!r} did not finish within {timeout:g}s",
                where=f"Pod/{namespace}/{name}",
                status=0,
                reason="ExecTimeout",
                body={},
            )
        if code:
            raise ApiError(
                f"exec {shown!r} exited with status {code}: {output.strip()[-500:]}",
                where=f"Pod/{namespace}/{name}",
                status=0,
                reason="ExecFailed",
                body={},
            )
        return output


def _running_in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


__all__ = [
    "ApiError",
    "ClusterClient",
    "Conflict",
    "FIELD_MANAGER",
    "Forbidden",
    "Invalid",
    "NotFound",
    "ResourceInfo",
    "CLUSTER_SCOPED_KINDS",
]
