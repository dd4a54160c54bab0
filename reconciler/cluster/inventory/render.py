"""Rendering of the environment inventory (`dra-gitops inventory`): text, JSON or Markdown (pure)."""

from __future__ import annotations

import json
from typing import Any

from reconciler.cluster.inventory.types import Inventory
from reconciler.cluster.objects import format_age
from reconciler.markdown import md_table


def render_inventory(inv: Inventory, fmt: str = "text") -> str:
    if fmt == "json":
        return json.dumps(inv.to_json(), indent=2, sort_keys=True)
    if fmt == "markdown":
        return _markdown(inv)
    if fmt == "text":
        return _text(inv)
    raise ValueError(f"unknown inventory format {fmt!r} (text, json, markdown)")


def _served_line(inv: Inventory) -> str:
    parts = []
    for v in inv.served_versions:
        tags = []
        if v == inv.preferred_version:
            tags.append("preferred")
        if v in inv.deprecated_versions:
            tags.append("deprecated")
        parts.append(f"{v} ({', '.join(tags)})" if tags else v)
    return ", ".join(parts)


def _text(inv: Inventory) -> str:
    lines = [
        f"Kubernetes {inv.server_version}",
        f"resource.k8s.io: {_served_line(inv)}",
        "",
        f"Nodes ({len(inv.nodes)}):",
    ]
    for n in inv.nodes:
        lines.append(
            f"  {n.name}  {'Ready' if n.ready else 'NotReady'}" + ("" if n.ready else f"  {n.message}")
        )
    lines.append(f"Driver pods ({len(inv.driver_pods)}):")
    for p in inv.driver_pods:
        state = "CrashLoopBackOff" if p.crash_loop else ("Ready" if p.ready else p.phase)
        lines.append(
            f"  {p.namespace}/{p.name}  driver {p.driver or '?'}  node {p.node or '-'}  {state}  restarts {p.restarts}"
        )
    lines.append(f"Device classes ({len(inv.classes)}):")
    for c in inv.classes:
        lines.append(f"  {c.name}  ({c.kind} {c.api_version})  driver {c.driver or '?'}")
    lines.append(f"ResourceSlices ({len(inv.slices)}):")
    for s in inv.slices:
        lines.append(
            f"  {s.driver or '?'}  pool {s.pool or '-'}  node {s.node or '-'}  {s.devices} device(s)  {s.name}"
        )
    lines.append("Devices per driver:")
    for name, d in sorted(inv.drivers.items()):
        lines.append(
            f"  {name}: {d.devices} device(s), {d.allocated} allocated, {d.free} free; "
            f"{d.slices} slice(s), {d.pools} pool(s); pods {d.healthy_pods}/{d.pods} healthy"
        )
    lines.append(
        f"Claims: {inv.claims} ({inv.allocated_claims} allocated, {len(inv.pending_claims)} pending)"
    )
    for pc in inv.pending_claims:
        lines.append(
            f"  pending {pc.namespace}/{pc.name}  age {format_age(pc.age_seconds)}  classes {', '.join(pc.classes) or '-'}"
        )
    if inv.taint_rules:
        lines.append(f"DeviceTaintRules: {', '.join(inv.taint_rules)}")
    if inv.warnings:
        lines.append("Warnings:")
        lines.extend(f"  ! {w}" for w in inv.warnings)
    return "\n".join(lines) + "\n"


def _tables(inv: Inventory) -> list[tuple[str, list[str], list[tuple[Any, ...]]]]:
    """(title, header, rows) of every table of the Markdown inventory, in order."""
    return [
        (
            "Nodes",
            ["node", "ready", "message"],
            [(n.name, "yes" if n.ready else "**no**", n.message) for n in inv.nodes],
        ),
        (
            "Drivers",
            ["driver", "devices", "allocated", "free", "slices", "pools", "classes", "pods healthy"],
            [
                (
                    k,
                    d.devices,
                    d.allocated,
                    d.free,
                    d.slices,
                    d.pools,
                    ", ".join(d.classes),
                    f"{d.healthy_pods}/{d.pods}",
                )
                for k, d in sorted(inv.drivers.items())
            ],
        ),
        (
            "Driver pods",
            ["pod", "driver", "node", "phase", "ready", "restarts", "crash loop"],
            [
                (
                    f"{p.namespace}/{p.name}",
                    p.driver or "?",
                    p.node or "-",
                    p.phase,
                    p.ready,
                    p.restarts,
                    p.crash_loop,
                )
                for p in inv.driver_pods
            ],
        ),
        (
            "Device classes",
            ["class", "kind", "apiVersion", "driver"],
            [(c.name, c.kind, c.api_version, c.driver or "?") for c in inv.classes],
        ),
        (
            "ResourceSlices",
            ["driver", "pool", "node", "devices", "slice"],
            [(s.driver or "?", s.pool or "-", s.node or "-", s.devices, s.name) for s in inv.slices],
        ),
        (
            "Pending claims",
            ["claim", "age", "classes"],
            [
                (f"{c.namespace}/{c.name}", format_age(c.age_seconds), ", ".join(c.classes))
                for c in inv.pending_claims
            ],
        ),
    ]


def _markdown(inv: Inventory) -> str:
    lines = [
        "## DRA inventory",
        "",
        f"* Kubernetes **{inv.server_version}**",
        f"* resource.k8s.io: {_served_line(inv)}",
        f"* Devices: {inv.devices} total, {inv.allocated_devices} allocated, "
        f"{inv.devices - inv.allocated_devices} free",
        f"* Claims: {inv.claims} ({inv.allocated_claims} allocated, {len(inv.pending_claims)} pending)",
    ]
    for title, header, rows in _tables(inv):
        lines += ["", f"### {title}", "", *md_table(header, rows)]
    if inv.warnings:
        lines += ["", "### Warnings", "", *[f"* {w}" for w in inv.warnings]]
    return "\n".join(lines) + "\n"


__all__ = ["render_inventory"]
