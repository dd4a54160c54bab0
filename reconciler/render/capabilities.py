"""`.Capabilities` for Helm charts, as the cluster they are delivered to would give them.

From the target cluster when one is given (`cluster_capabilities`: check --cluster, and any caller that
connects before it renders), else from the repository config (`kubernetesVersion:`, `apiVersions:`) with the
built-in API versions that release serves by default (model/served.py), else 1.36's. A chart's `kubeVersion`
constraint is checked against the same version, as `helm install` checks it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from reconciler.errors import UserError
from reconciler.model.scope import BUILTIN, Scopes
from reconciler.model.served import DEFAULT_RELEASE, parse_release
from reconciler.model.served_table import KINDS


@dataclass(frozen=True)
class Capabilities:
    kube_version: str  # "v1.33.0"
    api_versions: tuple[str, ...]  # "group/version" and "group/version/Kind" (core: "v1", "v1/Pod")
    source: str  # where they come from, for messages
    # A live cluster's (group, kind, namespaced) as discovery lists them: where `helm install` puts objects
    # the templates leave without a namespace, and how the desired state's references are scoped.
    namespaced: tuple[tuple[str, str, bool], ...] = ()

    @property
    def scopes(self) -> Scopes:
        return Scopes(discovered={(group, kind): flag for group, kind, flag in self.namespaced})

    def to_opts(self) -> dict[str, Any]:
        return {"kube_version": self.kube_version, "api_versions": list(self.api_versions)}


@functools.lru_cache(maxsize=16)
def _served_by_default(release: int) -> tuple[str, ...]:
    out: set[str] = set()
    for (group, kind), versions in KINDS.items():
        for version, (first, last) in versions.items():
            if first <= release <= last and re.fullmatch(r"v\d+", version):  # GA: on by default
                gv = f"{group}/{version}" if group else version
                out.update((gv, f"{gv}/{kind}"))
    return tuple(sorted(out))


def from_config(config: Mapping[str, Any], where: str) -> Capabilities:
    """The repository config's `kubernetesVersion` (default 1.36) and `apiVersions` (added to the built-in
    versions that release serves by default)."""
    written = config.get("kubernetesVersion")
    version = str(written) if written is not None else DEFAULT_RELEASE
    minor = parse_release(version, where=f"{where} (kubernetesVersion)")
    extra = [str(v) for v in config.get("apiVersions") or []]
    source = f"kubernetesVersion {version} of {where}" if written is not None else f"Kubernetes 1.{minor}"
    return Capabilities(f"v1.{minor}.0", tuple(sorted({*_served_by_default(minor), *extra})), source)


def from_served(
    version: str,
    kinds: Mapping[str, Mapping[str, list[str]]],
    where: str,
    namespaced: Mapping[tuple[str, str], bool] | None = None,
) -> Capabilities:
    """A live cluster's: its version, every group/version (and /Kind) discovery lists and (`namespaced`,
    (group, kind) -> namespaced) the scope of each kind."""
    api_versions: set[str] = set()
    for group, by_kind in kinds.items():
        for kind, versions in by_kind.items():
            for v in versions:
                gv = f"{group}/{v}" if group else v
                api_versions.update((gv, f"{gv}/{kind}"))
    scopes = tuple(sorted((group, kind, flag) for (group, kind), flag in (namespaced or {}).items()))
    return Capabilities(version, tuple(sorted(api_versions)), where, scopes)


_CLUSTER: ContextVar[Capabilities | None] = ContextVar("cluster_capabilities", default=None)


@contextmanager
def cluster_capabilities(capabilities: Capabilities | None) -> Iterator[None]:
    """Charts rendered inside the block get the cluster's capabilities, whatever the config says."""
    token = _CLUSTER.set(capabilities)
    try:
        yield
    finally:
        _CLUSTER.reset(token)


def effective(config_capabilities: Capabilities | None) -> Capabilities | None:
    return _CLUSTER.get() or config_capabilities


def effective_scopes() -> Scopes:
    """What the cluster of the block (`cluster_capabilities`) says of kinds' scopes; the built-in table's
    without one."""
    cluster = _CLUSTER.get()
    return cluster.scopes if cluster is not None else BUILTIN


# --- kubeVersion constraints (Masterminds semver, as Helm reads them) ----------------------------------

_PART = re.compile(
    r"^\s*(>=|<=|!=|=>|=<|>|<|=|~|\^)?\s*v?(\d+|[xX*])(?:\.(\d+|[xX*]))?(?:\.(\d+|[xX*]))?(?:-\S*)?\s*$"
)


def _version(text: str) -> tuple[int, int, int]:
    found = re.match(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?", text.strip())
    if not found:
        raise ValueError(text)
    return int(found[1]), int(found[2] or 0), int(found[3] or 0)


def _satisfies(version: tuple[int, int, int], term: str) -> bool:
    found = _PART.match(term)
    if not found:
        raise ValueError(term)
    op = {"=>": ">=", "=<": "<="}.get(found[1] or "=", found[1] or "=")
    parts = [found[2], found[3], found[4]]
    wild = next((i for i, p in enumerate(parts) if p is None or p in "xX*"), 3)
    bound = tuple(int(p) if i < wild and p else 0 for i, p in enumerate(parts))
    if op == "~" or (op == "=" and wild < 3):
        upper = (bound[0] + 1, 0, 0) if wild <= 1 else (bound[0], bound[1] + 1, 0)
        return bound <= version < upper
    if op == "^":
        return bound <= version < (bound[0] + 1, 0, 0)
    compare = {
        ">=": version >= bound,
        "<=": version <= bound,
        ">": version > bound,
        "<": version < bound,
        "=": version == bound,
        "!=": version != bound,
    }
    return compare[op]


def kube_version_allows(constraint: str, kube_version: str) -> bool:
    """`kubeVersion: ">= 1.32.0-0"` of a Chart.yaml (`,` or space: and; `||`: or) allows `kube_version`."""
    version = _version(kube_version)
    for alternative in constraint.split("||"):
        terms = [t for t in re.split(r"\s*,\s*|\s+(?=[<>=!~^])", alternative.strip()) if t.strip()]
        if all(_satisfies(version, term) for term in terms):
            return True
    return False


def check_kube_version(constraint: Any, capabilities: Capabilities, label: str, where: str) -> None:
    if not isinstance(constraint, str) or not constraint.strip():
        return
    try:
        allowed = kube_version_allows(constraint, capabilities.kube_version)
    except ValueError as exc:
        raise UserError(f"{label}: cannot read the chart's kubeVersion {constraint!r}", where=where) from exc
    if not allowed:
        raise UserError(
            f"{label}: the chart requires kubeVersion {constraint}, which is incompatible with Kubernetes "
            f"{capabilities.kube_version} ({capabilities.source})",
            where=where,
        )
