"""The `charts:` entries of the repository config as releases, and the pairing of a canary release's
driver workloads with its main release's (`canaryFor`). Pure: `helm` renders the releases.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from reconciler.errors import ManifestError, UserError
from reconciler.model import dra
from reconciler.model.dra import CANARY_ANNOTATION
from reconciler.model.objects import Manifest

__all__ = ["ChartRelease", "chart_inputs", "pair_canaries", "releases_of", "same_names"]


@dataclass(frozen=True)
class ChartRelease:
    """One entry of the repository config's `charts:` list."""

    release_name: str
    chart: str  # a chart directory or .tgz, relative to the repository root
    namespace: str
    value_files: tuple[str, ...] = ()
    values: Mapping[str, Any] = field(default_factory=dict)
    canary_for: str = ""
    where: str = ""  # the config entry, `dra-gitops.yaml:LINE`
    create_namespace: bool = False  # as `helm install --create-namespace`

    @property
    def label(self) -> str:
        files = f"; {', '.join(self.value_files)}" if self.value_files else ""
        return f"release {self.release_name} ({self.chart}{files})"


_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def releases_of(config: Mapping[str, Any], where: str) -> list[ChartRelease]:
    """The `charts:` entries of a repository config, checked (errors name the config file)."""
    entries = config.get("charts") or []
    if not isinstance(entries, list):
        raise UserError("`charts` must be a list of releases", where=where)
    releases: list[ChartRelease] = []
    for index, entry in enumerate(entries):
        at = f"charts[{index}]"
        if not isinstance(entry, dict):
            raise UserError(f"{at} must be a mapping (releaseName, chart, namespace, ...)", where=where)
        unknown = sorted(
            set(entry)
            - {"releaseName", "chart", "namespace", "valueFiles", "values", "canaryFor", "createNamespace"}
        )
        if unknown:
            raise UserError(f"{at}: unknown key {unknown[0]!r}", where=where)
        name, chart, namespace = entry.get("releaseName"), entry.get("chart"), entry.get("namespace")
        for key, value in (("releaseName", name), ("chart", chart), ("namespace", namespace)):
            if not isinstance(value, str) or not value:
                raise UserError(f"{at}.{key} is required (a string)", where=where)
        assert isinstance(name, str) and isinstance(chart, str) and isinstance(namespace, str)
        if not _NAME.match(name) or len(name) > 53:
            raise UserError(f"{at}.releaseName {name!r} is not a valid release name", where=where)
        files = entry.get("valueFiles") or []
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            raise UserError(f"{at}.valueFiles must be a list of paths", where=where)
        values = entry.get("values") or {}
        if not isinstance(values, dict):
            raise UserError(f"{at}.values must be a mapping", where=where)
        canary = entry.get("canaryFor") or ""
        if not isinstance(canary, str):
            raise UserError(f"{at}.canaryFor must name a release", where=where)
        create = entry.get("createNamespace") is True
        releases.append(
            ChartRelease(name, chart.strip("/"), namespace, tuple(files), values, canary, where, create)
        )
    names = [r.release_name for r in releases]
    for release in releases:
        if names.count(release.release_name) > 1:
            raise UserError(f"release {release.release_name} is listed twice in `charts`", where=where)
        if release.canary_for and release.canary_for not in names:
            raise UserError(
                f"release {release.release_name}: canaryFor {release.canary_for!r} is not a release of `charts`",
                where=where,
            )
        if release.canary_for == release.release_name:
            raise UserError(f"release {release.release_name} cannot be its own canary", where=where)
    return releases


def chart_inputs(releases: Sequence[ChartRelease]) -> list[str]:
    """Repository paths the releases read (chart directories or archives, value files): never manifests."""
    return sorted({r.chart for r in releases} | {f.strip("/") for r in releases for f in r.value_files})


def same_names(
    canary: list[Manifest], canary_release: ChartRelease, main: list[Manifest], main_release: ChartRelease
) -> None:
    """A chart naming its driver workloads after itself renders the same names in both releases of one
    namespace: say how to tell them apart rather than report two definitions of one object."""
    mains = {m.ref for m in main if dra.is_driver_workload(m.body)}
    clash = [m for m in canary if m.ref in mains]
    if clash:
        raise ManifestError(
            f"{canary_release.label} renders {clash[0].ref} like release {main_release.release_name} (the chart "
            "names it after itself, not after the release): give the canary release its own name with "
            "`values: {nameOverride: <name>}` (or the chart's equivalent), or another namespace",
            where=canary_release.where,
        )


def _pairing_key(manifest: Manifest) -> tuple[str, str, str | None, str]:
    """What a driver workload is: kind, namespace, driver and role (kubelet plugin or controller)."""
    body = manifest.body
    return manifest.kind, manifest.ref.namespace, dra.workload_driver(body), dra.driver_role(body)


def pair_canaries(
    canary: list[Manifest], canary_release: ChartRelease, main: list[Manifest], main_release: ChartRelease
) -> None:
    """`canaryFor`: each driver workload of the canary release is the canary of the main release's driver
    workload of the same kind, namespace, driver and role (kubelet plugin, controller), whatever the names
    (a chart may name its DaemonSet after itself, or after `nameOverride`), as `dra-gitops.io/canary-for`
    says. A canary release none of whose driver workloads pairs is an error naming both releases."""
    mains: dict[tuple[str, str, str | None, str], list[Manifest]] = {}
    for manifest in main:
        if dra.is_driver_workload(manifest.body) and not dra.canary_for(manifest.body):
            mains.setdefault(_pairing_key(manifest), []).append(manifest)
    workloads = [m for m in canary if dra.is_driver_workload(m.body)]
    paired = 0
    for manifest in workloads:
        kind, namespace, driver, role = _pairing_key(manifest)
        found = mains.get((kind, namespace, driver, role)) or []
        if not found and driver is not None:  # the main's driver name may be unknown where the canary's is
            found = mains.get((kind, namespace, None, role)) or []
        if len(found) != 1:
            continue
        paired += 1
        annotations = manifest.body["metadata"].setdefault("annotations", {})
        annotations.setdefault(CANARY_ANNOTATION, found[0].ref.name)
    if workloads and not paired:
        names = ", ".join(str(m.ref) for m in workloads)
        theirs = ", ".join(str(m.ref) for ms in mains.values() for m in ms) or "none"
        raise ManifestError(
            f"{canary_release.label} is the canary of release {main_release.release_name}, but none of its "
            f"driver workloads ({names}) pairs with one of release {main_release.release_name} ({theirs}) by "
            "kind, namespace, driver and role (kubelet plugin, controller)",
            where=canary_release.where,
        )
