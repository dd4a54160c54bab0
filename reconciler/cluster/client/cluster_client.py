"""The Kubernetes edge: one small client over the official `kubernetes` package.

Requests are built as plain values (path, query, body) and sent through the official `ApiClient`, which
brings kubeconfig, in-cluster config, TLS and auth. Discovery is read once per client (one reconcile pass)
and answers "which version of this kind does the cluster serve, what is its plural, is it namespaced".
Every API error becomes an `ApiError` whose message starts with the object ref and carries the server's
message; temporary errors (429, 5xx, timeouts, refused connections) are retried with backoff and then
raised as `TemporaryError` (exit 4).

The client is composed of parts, each its own module of this package:

* :mod:`reconciler.cluster.client.errors`    `ApiError` and its subclasses, error answers → errors
* :mod:`reconciler.cluster.client.transport` `ApiTransport`: rate limit (`RateLimiter`), retries, one request
* :mod:`reconciler.cluster.client.discovery` `Discovery` over the transport: `ResourceInfo`, `GroupInfo`, the
  discovery cache
* this module                                `ClusterClient`, which holds a transport and its discovery:
  construction, get/list/apply/delete/logs/exec
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence
from typing import Any

from reconciler.cluster.client.discovery import Discovery, GroupInfo, ResourceInfo, ServedKinds
from reconciler.cluster.client.errors import ApiError, NotFound, object_where
from reconciler.cluster.client.podexec import exec_in_pod
from reconciler.cluster.client.transport import ApiTransport, RequestLog, without_client_retries
from reconciler.errors import EnvironmentProblem, TemporaryError

FIELD_MANAGER = "dra-gitops"


class ClusterClient:
    """A connection to one cluster for one pass: discovery cache, reads, apply, delete, logs, exec.

    It holds its transport (one request: rate limit, retries, the counters of what was sent) and the
    discovery cache read through that transport; what callers use of either is asked of the client.
    """

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
        self.transport = ApiTransport(
            api_client, timeout=timeout, retries=retries, backoff=backoff, qps=qps, burst=burst
        )
        self.discovery = Discovery(self.transport)
        # One request as the transport sends it: JSON answer (or text with raw=True), temporary failures retried.
        self.request = self.transport.request
        self.host = self.transport.host
        self.field_manager = field_manager

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
            raise EnvironmentProblem(f"cannot load cluster configuration: {exc}", where=kubeconfig) from exc
        # Concurrent applies share one pool; the default of 4 connections would serialise them.
        configuration.connection_pool_maxsize = 32
        without_client_retries(configuration)
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
        without_client_retries(configuration)
        return cls(k8s_client.ApiClient(configuration), **options)

    def bounded(self, timeout: float, retries: int) -> ClusterClient:
        """The same connection (pool, credentials) with tighter limits per request, e.g. for the Lease
        rounds, which must give up before the renew deadline rather than wait out a frozen server.
        Closing either closes both."""
        return ClusterClient(
            self.api,
            timeout=min(timeout, self.transport.timeout),
            retries=retries,
            backoff=self.transport.backoff,
            qps=self.transport.qps,
            burst=self.transport.burst,
            field_manager=self.field_manager,
        )

    def fenced(self, fence: Callable[[str, str], None]) -> ClusterClient:
        """The same connection and limits, every write first asked of `fence(method, where)`, which raises
        to refuse it (a pass fenced on its Lease). Closing either closes both."""
        fenced = ClusterClient(
            self.api,
            timeout=self.transport.timeout,
            retries=self.transport.retries,
            backoff=self.transport.backoff,
            qps=self.transport.qps,
            burst=self.transport.burst,
            field_manager=self.field_manager,
        )
        fenced.transport.write_fence = fence
        fenced.discovery = self.discovery  # what the API serves is known already: no second discovery
        return fenced

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> ClusterClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- the transport --------------------------------------------------------------------------------

    @property
    def requests_sent(self) -> int:
        return self.transport.requests_sent

    @property
    def writes_sent(self) -> int:
        return self.transport.writes_sent

    @property
    def request_log(self) -> RequestLog | None:
        """(method, path, query) of every request when set to a list: what RBAC a command needs, tests."""
        return self.transport.request_log

    @request_log.setter
    def request_log(self, log: RequestLog | None) -> None:
        self.transport.request_log = log

    # ---- discovery ------------------------------------------------------------------------------------

    def server_version(self) -> str:
        return self.discovery.server_version()

    def groups(self) -> dict[str, GroupInfo]:
        return self.discovery.groups()

    def served_versions(self, group: str) -> list[str]:
        return self.discovery.served_versions(group)

    def resource_for(self, api_version: str, kind: str, *, where: str | None = None) -> ResourceInfo:
        """The served resource for an apiVersion and kind; `NotFound` naming what is served when it is not."""
        return self.discovery.resource_for(api_version, kind, where=where)

    def kind_versions(self, group: str, kind: str) -> list[str]:
        """The versions of `group` whose resource list has `kind`, preferred first."""
        return self.discovery.kind_versions(group, kind)

    def served_kinds(self, concurrency: int = 8) -> ServedKinds:
        """Every group version's resource list (read in parallel, cached for later lookups)."""
        return self.discovery.served_kinds(concurrency)

    def find_kind(self, group: str, kind: str) -> ResourceInfo | None:
        """The resource for a kind in its group's preferred version (any served version if needed)."""
        return self.discovery.find_kind(group, kind)

    def invalidate(self) -> None:
        """Forget discovery (after CRDs were created)."""
        self.discovery.invalidate()

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

    def exec(self, namespace: str, name: str, command: Sequence[str], **options: Any) -> str:
        """Run a command in a container (`podexec.exec_in_pod`: `container=`, `timeout=`); its output, or
        ApiError when it cannot run, does not finish in time or exits non-zero."""
        return exec_in_pod(self.api, namespace, name, command, **options)


def _running_in_cluster() -> bool:
    import os

    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and os.path.exists(
        "/var/run/secrets/kubernetes.io/serviceaccount/token"
    )


__all__ = ["ClusterClient", "FIELD_MANAGER"]
