"""Chart releases rendered by Helm's own engine (helm-python-sdk: Helm v4's Go SDK in a wheel, no helm
binary), as `helm template --namespace NS --include-crds` renders them: offline (`lookup` finds nothing),
values merged from the value files in order then the inline values, `values.schema.json` enforced.

Hooks are applied as ordinary objects in their stage, except test hooks (`helm.sh/hook: test`), which are
left out: nothing runs them. Objects a template leaves without a namespace get the release's, as
`helm install` puts them there. Each object is placed at its template (`charts/x/templates/y.yaml`) with
the release named (`release gpu-driver (charts/gpu-driver; values/main.yaml)`). The `charts:` entries and
the pairing of canary releases live in `helm_releases` (its names are importable from here as before).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import yaml

from reconciler.errors import EnvironmentProblem, ManifestError, UserError
from reconciler.model import dra
from reconciler.model.loader import Limits
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.scope import Scopes, scoped_ref
from reconciler.model.yamldocs import parse_documents, yaml_error
from reconciler.render.capabilities import (
    Capabilities,
    check_kube_version,
    effective,
    effective_scopes,
    from_config,
)
from reconciler.render.helm_releases import ChartRelease, chart_inputs, pair_canaries, releases_of, same_names
from reconciler.render.kustomize_scan import Show

__all__ = [
    "CREATED_NAMESPACE",
    "ChartRelease",
    "chart_inputs",
    "clear_release_cache",
    "releases_of",
    "render_release",
    "render_releases",
]

HOOK_ANNOTATION = "helm.sh/hook"
EXTRA_HINT = "install the helm extra: pip install 'dra-gitops[helm]'"


def render_releases(
    repo_root: Path,
    releases: Sequence[ChartRelease],
    show: Show,
    limits: Limits,
    capabilities: Capabilities | None = None,
) -> list[Manifest]:
    """Every release's objects; canary releases' driver workloads paired with their main release's.

    `.Capabilities` are the cluster's when the caller gives one (`cluster_capabilities`), else
    `capabilities` (the repository config's), else Kubernetes 1.36's."""
    caps = effective(capabilities) or from_config({}, "")
    by_release = {r.release_name: render_release(repo_root, r, show, limits, caps) for r in releases}
    rendered = [m for r in releases for m in by_release[r.release_name]]
    with dra.driver_hints(dra.hints_of(rendered)):
        for release in releases:
            if release.canary_for:
                main = next(r for r in releases if r.release_name == release.canary_for)
                same_names(by_release[release.release_name], release, by_release[main.release_name], main)
                pair_canaries(by_release[release.release_name], release, by_release[main.release_name], main)
    created: set[str] = set()
    for release in releases:
        if release.create_namespace and release.namespace not in created:
            created.add(release.namespace)
            by_release[release.release_name].append(_release_namespace(release))
    return [m for r in releases for m in by_release[r.release_name]]


CREATED_NAMESPACE = "createNamespace of"


def _release_namespace(release: ChartRelease) -> Manifest:
    """`createNamespace: true`: the release namespace, as `helm install --create-namespace` makes it (left
    out when a manifest of the repository defines it)."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": release.namespace}}
    where, _, line = release.where.partition(":")
    return Manifest(
        body=body,
        ref=ref_of(body),
        path=where,
        line=int(line) if line.isdigit() else 1,
        rendered_by=f"{CREATED_NAMESPACE} {release.label}",
    )


def render_release(
    repo_root: Path, release: ChartRelease, show: Show, limits: Limits, capabilities: Capabilities
) -> list[Manifest]:
    """One release's objects; rendered once per content of its chart, value files, values and capabilities."""
    root = repo_root.resolve()
    chart_path = _inside(root, release.chart, release.where, "chart")
    values = _values(root, release, limits)
    key = _inputs_digest(root, chart_path, release, values, show, capabilities)
    cached = _RENDERED.get(key)
    if cached is None:
        cached = _render(release, chart_path, values, show, limits, capabilities, effective_scopes())
        if len(_RENDERED) >= 32:
            _RENDERED.pop(next(iter(_RENDERED)))
        _RENDERED[key] = cached
    return [replace(m, body=copy.deepcopy(m.body)) for m in cached]


# Rendered releases by the digest of everything they read: a commit that changes none of it renders nothing.
_RENDERED: dict[str, list[Manifest]] = {}


def clear_release_cache() -> None:
    _RENDERED.clear()


def _inputs_digest(
    root: Path,
    chart_path: Path,
    release: ChartRelease,
    values: dict[str, Any],
    show: Show,
    capabilities: Capabilities,
) -> str:
    hasher = hashlib.sha256()
    identity = [
        release.release_name,
        release.namespace,
        release.label,
        show(chart_path),
        values,
        capabilities.to_opts(),
        sorted(effective_scopes().discovered.items()),  # which kinds get the release namespace
    ]
    hasher.update(json.dumps(identity, sort_keys=True, default=str).encode())
    files = [chart_path] if chart_path.is_file() else sorted(p for p in chart_path.rglob("*") if p.is_file())
    for file in files:
        hasher.update(file.relative_to(chart_path.parent).as_posix().encode() + b"\0")
        hasher.update(hashlib.sha256(file.read_bytes()).digest())
    return hasher.hexdigest()


def _render(
    release: ChartRelease,
    chart_path: Path,
    values: dict[str, Any],
    show: Show,
    limits: Limits,
    capabilities: Capabilities,
    scopes: Scopes,
) -> list[Manifest]:
    helm = _helm()
    try:
        chart = helm.Chart.load(chart_path)
    except helm.HelmError as exc:
        raise ManifestError(
            f"{release.label}: cannot load the chart: {_first_line(exc)}", where=show(chart_path)
        ) from exc
    metadata = chart.metadata
    chart_file = f"{show(chart_path)}/Chart.yaml" if chart_path.is_dir() else show(chart_path)
    _check_dependencies(chart, metadata, release, chart_file)
    check_kube_version(metadata.get("kubeVersion"), capabilities, release.label, chart_file)
    try:
        chart.validate_schema(chart.merge_values(values))
    except helm.HelmValuesError as exc:
        where = release.value_files[-1] if release.value_files else release.where
        raise ManifestError(
            f"{release.label}: the values do not match the chart's values.schema.json: {_first_line(exc, lines=6)}",
            where=where,
        ) from exc
    try:
        rendered = _render_chart(chart, values, release, capabilities)
    except helm.HelmError as exc:
        raise _template_error(exc, release, chart_path, show) from exc
    shown_chart = show(chart_path)
    archive = chart_path.is_file()
    manifests: list[Manifest] = []
    # --include-crds; `filename` keeps the chart's `crds/` folder (the path of a real file).
    sources = [
        (str(crd.get("filename") or crd.get("name", "")), str(crd.get("data", ""))) for crd in chart.crds
    ]
    sources += sorted(rendered.items())
    for template, text in sources:
        if template.endswith("NOTES.txt") or not text.strip():
            continue
        if archive:  # a .tgz: findings point at the archive, a real file; the label names the template
            inside = template.split("/", 1)[1] if "/" in template else template
            manifests += _parsed(text, shown_chart, f"{release.label}, {inside}", limits)
        else:
            manifests += _parsed(text, _template_file(shown_chart, template), release.label, limits)
    return _in_release_namespace(manifests, release, scopes)


def _render_chart(
    chart: Any, values: dict[str, Any], release: ChartRelease, capabilities: Capabilities
) -> Any:
    """`Chart.render` with the capabilities: Helm's engine takes them as render options, which the wrapper's
    `render` does not pass on (helm-python-sdk 0.2.2; pinned)."""
    from helm_python import _native

    opts = {
        "name": release.release_name,
        "namespace": release.namespace,
        "is_install": True,
        **capabilities.to_opts(),
    }
    return json.loads(_native.call_string("helm_render", chart._raw(), json.dumps(values), json.dumps(opts)))


def _check_dependencies(chart: Any, metadata: Mapping[str, Any], release: ChartRelease, where: str) -> None:
    """A dependency of Chart.yaml missing from `charts/` is an error, as `helm install` makes it."""
    declared = [d for d in metadata.get("dependencies") or [] if isinstance(d, Mapping)]
    if not declared:
        return
    loaded = {str(d.get("name")) for d in chart.dependencies if isinstance(d, Mapping)}
    missing = sorted({str(d.get("name")) for d in declared} - loaded)
    if missing:
        raise ManifestError(
            f"{release.label}: found in Chart.yaml, but missing in charts/ directory: {', '.join(missing)}; "
            f"run `helm dependency build {release.chart}` and commit the charts it fetches",
            where=where,
        )


def _helm() -> Any:
    try:
        import helm_python
    except ImportError as exc:
        raise EnvironmentProblem(f"rendering a Helm chart needs helm-python-sdk: {EXTRA_HINT}") from exc
    return helm_python


def _inside(root: Path, relative: str, where: str, what: str) -> Path:
    target = (root / relative).resolve()
    if relative.startswith("/") or not target.is_relative_to(root):
        raise UserError(f"{what} {relative} is outside the repository", where=where)
    if not target.exists():
        raise UserError(f"{what} {relative} does not exist", where=where)
    return target


def _values(root: Path, release: ChartRelease, limits: Limits) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    for relative in release.value_files:
        path = _inside(root, relative, release.where, "values file")
        if path.stat().st_size > limits.max_file_bytes:
            raise ManifestError(f"over {limits.max_file_bytes} bytes", where=f"{relative}:1")
        try:
            loaded = yaml.safe_load(path.read_bytes())
        except yaml.YAMLError as exc:
            raise yaml_error(exc, relative) from exc
        if loaded is None:
            continue
        if not isinstance(loaded, dict):
            raise ManifestError("a values file must be a mapping", where=f"{relative}:1")
        merged = _merge(merged, loaded)
    return _merge(merged, dict(release.values))


def _merge(base: dict[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Helm's coalescing of values files: maps merge key by key, anything else is replaced."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _template_file(shown_chart: str, template: str) -> str:
    """`gpu-driver/templates/x.yaml` (the chart name first, as Helm names them) as a repository path."""
    inside = template.split("/", 1)[1] if "/" in template else template
    return f"{shown_chart}/{inside}" if shown_chart not in ("", ".") else inside


def _parsed(text: str, shown: str, label: str, limits: Limits) -> list[Manifest]:
    out: list[Manifest] = []
    for manifest in parse_documents(text, shown, limits):
        body = manifest.body
        hook = str((body.get("metadata") or {}).get("annotations", {}).get(HOOK_ANNOTATION, ""))
        if "test" in {h.strip() for h in hook.split(",")}:
            continue  # a test hook: `helm test` runs it, a delivery does not
        out.append(replace(manifest, rendered_by=label))
    return out


def _in_release_namespace(manifests: list[Manifest], release: ChartRelease, scopes: Scopes) -> list[Manifest]:
    """Objects of namespaced kinds the templates leave without a namespace get the release's, as `helm
    install` puts them there; cluster-scoped kinds (built-in, the cluster's, or a CRD the chart renders)
    get none."""
    scopes = scopes.with_crds(manifests)
    out = []
    for manifest in manifests:
        body = manifest.body
        meta = body.setdefault("metadata", {})
        if scopes.namespaced(str(body.get("apiVersion")), str(body.get("kind"))) is not False:
            meta["namespace"] = meta.get("namespace") or release.namespace
        out.append(replace(manifest, ref=scoped_ref(body, scopes)))
    return out


_TEMPLATE_AT = re.compile(r"(?P<template>[\w./-]+\.(?:yaml|yml|tpl|txt|json)):(?P<line>\d+)(?::\d+)?")


def _template_error(exc: Exception, release: ChartRelease, chart_path: Path, show: Show) -> ManifestError:
    """Helm's template error, pointed at the template file and line it names."""
    message = _first_line(exc, lines=0)  # whole: a `fail` message may carry the fix on its later lines
    found = _TEMPLATE_AT.search(str(exc))
    if found:
        where = f"{_template_file(show(chart_path), found['template'])}:{found['line']}"
    else:
        where = show(chart_path)
    return ManifestError(f"{release.label}: template error: {message}", where=where)


def _first_line(exc: Exception, lines: int = 1) -> str:
    """The first `lines` non-empty lines of the error (0: all of them, kept on their lines)."""
    text = [line.rstrip() for line in str(exc).splitlines() if line.strip()]
    if lines == 0:
        return "\n".join(text) or type(exc).__name__
    return " ".join(line.strip() for line in text[:lines]) or type(exc).__name__
