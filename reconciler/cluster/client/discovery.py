"""Discovery for the cluster client: the groups, versions and resources the cluster serves.

Discovery is read once per client (one reconcile pass) and answers "which version of this kind does the
cluster serve, what is its plural, is it namespaced". A kind is served in a version when that group
version's resource list has it (as `kubectl api-resources` reads it): a served group version is not enough,
since a group's versions need not hold the same kinds (resource.k8s.io/v1 has no DeviceTaintRule on 1.36).
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from reconciler.cluster.client.errors import NotFound
from reconciler.cluster.client.transport import ApiTransport
from reconciler.errors import DraGitopsError
from reconciler.model.objects import api_group


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


@dataclass(frozen=True)
class ServedKinds:
    """Every kind the cluster serves: group -> kind -> the versions whose resource list has it, in the
    group's order (preferred first)."""

    kinds: dict[str, dict[str, list[str]]]
    # group versions whose resource list could not be read (an aggregated API that is down): their kinds
    # are unknown, not unserved
    unavailable: list[str]
    # (group, kind) -> whether the resource is namespaced, as the resource lists say
    namespaced: dict[tuple[str, str], bool] = field(default_factory=dict)


def group_version(group: str, version: str) -> str:
    return f"{group}/{version}" if group else version


class Discovery:
    """The discovery cache of one client, read through its transport: groups, versions, resources."""

    def __init__(self, transport: ApiTransport) -> None:
        self.transport = transport
        self._lock = threading.Lock()
        self._groups: dict[str, GroupInfo] | None = None
        self._resources: dict[str, list[ResourceInfo]] = {}
        self._version: dict[str, Any] | None = None

    # ---- discovery ----------------------------------------------------------------------------------

    def version(self) -> dict[str, Any]:
        if self._version is None:
            self._version = dict(self.transport.request("GET", "/version", where=self.transport.host))
        return self._version

    def server_version(self) -> str:
        return str(self.version().get("gitVersion", "unknown"))

    def groups(self) -> dict[str, GroupInfo]:
        with self._lock:
            if self._groups is None:
                groups: dict[str, GroupInfo] = {}
                core = self.transport.request("GET", "/api", where=self.transport.host)
                core_versions = tuple(core.get("versions") or ["v1"])
                groups[""] = GroupInfo("", core_versions, core_versions[0])
                for group in (
                    self.transport.request("GET", "/apis", where=self.transport.host).get("groups") or []
                ):
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

    def resources(self, group: str, version: str, *, retries: int | None = None) -> list[ResourceInfo]:
        key = f"{group}/{version}"
        with self._lock:
            cached = self._resources.get(key)
        if cached is not None:
            return cached
        path = f"/apis/{group}/{version}" if group else f"/api/{version}"
        try:
            listing = self.transport.request("GET", path, where=key, retries=retries)
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
        raise NotFound(
            f"{api_version} {kind} is not served by the cluster; {self._served_instead(group, kind)}",
            where=where or kind,
            status=404,
            reason="NotServed",
            body={},
        )

    def kind_versions(self, group: str, kind: str) -> list[str]:
        """The versions of `group` whose resource list has `kind`, preferred first (unreadable ones left out)."""
        info = self.groups().get(group)
        versions: list[str] = []
        for version in info.versions if info else ():
            try:
                if any(r.kind == kind for r in self.resources(group, version)):
                    versions.append(version)
            except DraGitopsError:
                continue
        return versions

    def _served_instead(self, group: str, kind: str) -> str:
        """What the cluster serves in place of a version it does not serve `kind` in."""
        versions = [group_version(group, v) for v in self.kind_versions(group, kind)]
        if versions:
            return f"use {versions[0]} (it serves {kind} in {', '.join(versions)})"
        served = self.served_versions(group)
        if served:
            return f"no version it serves has {kind} ({group or 'core'}: {', '.join(served)})"
        return f"it serves no {group or 'core'} version"

    def served_kinds(self, concurrency: int = 8) -> ServedKinds:
        """Every group version's resource list (read in parallel, cached for the client's later lookups)."""
        pairs = [(group, version) for group, info in self.groups().items() for version in info.versions]

        def read(pair: tuple[str, str]) -> list[ResourceInfo] | None:
            try:
                # One retry: a group version that is down must not hold the whole check up.
                return self.resources(*pair, retries=1)
            except DraGitopsError:
                return None

        with ThreadPoolExecutor(max_workers=max(1, concurrency)) as pool:
            listings = list(pool.map(read, pairs))
        kinds: dict[str, dict[str, list[str]]] = {}
        namespaced: dict[tuple[str, str], bool] = {}
        unavailable: list[str] = []
        for (group, version), listing in zip(pairs, listings, strict=True):
            if listing is None:
                unavailable.append(group_version(group, version))
                continue
            for resource in listing:
                namespaced.setdefault((group, resource.kind), resource.namespaced)
                versions = kinds.setdefault(group, {}).setdefault(resource.kind, [])
                if version not in versions:
                    versions.append(version)
        return ServedKinds(kinds, unavailable, namespaced)

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
