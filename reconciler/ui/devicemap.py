"""The device map page: per driver, a row per node with its devices drawn by state (free, allocated,
tainted, on a node that is not Ready) and who holds each (claim → pods → workload → target and its live
commit); the claims that wait for a device, with the pod that waits and the scheduler's word on why;
filters by driver, node and namespace (a GET form, so it works without JavaScript); totals that add up to
`inventory`'s. A large cluster is drawn compact (a row per node, a cell per device, the details on
hover); `?view=` chooses. With targets in clusters of their own, one map per cluster (`?cluster=`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import groupby
from urllib.parse import urlencode

from markupsafe import Markup, escape

from reconciler.ui.devices import DeviceCell, DeviceFilter, PendingClaim, totals_by_driver
from reconciler.ui.render import render, visible

# State -> (symbol, words): the tile's shape and text say the state, its colour only repeats it.
STATES = {
    "free": ("○", "free"),
    "allocated": ("●", "allocated"),
    "tainted": ("▲", "tainted"),
    "node-not-ready": ("✕", "node not Ready"),
}
# More devices than this are drawn compact unless `?view=cards` asks otherwise.
COMPACT_OVER = 300


def compact(cells: Sequence[DeviceCell]) -> Markup:
    """A cell per device (built here rather than in the template: 10,000 of them stay fast)."""
    parts = []
    for c in cells:
        symbol, words = STATES[c.state]
        if c.claim:
            detail = f"{c.name}: {words}, claim {c.claim}, pods {', '.join(c.pods) or '-'}"
            if c.target:
                detail += f", target {c.target}"
        else:
            detail = f"{c.name}: {words}"
        parts.append(f'<li class="c {c.state}" title="{escape(visible(detail))}">{symbol}</li>')
    return Markup("".join(parts))


def device_map_page(
    cells: Sequence[DeviceCell],
    chosen: DeviceFilter,
    warnings: Sequence[str] = (),
    clusters: Sequence[tuple[str, str]] = (),
    cluster: str = "",
    error: str = "",
    pending: Sequence[PendingClaim] = (),
    view: str = "",
    live: Mapping[str, str] | None = None,
) -> str:
    """`clusters`: (key, label) of every cluster with a map, `cluster` this one's; `error`: why it could
    not be read (the page then says so, and offers the others); `live`: each target's live commit."""
    label = dict(clusters).get(cluster, "")
    title = f"Device map of {label}" if len(clusters) > 1 else "Device map"
    shown = [c for c in cells if chosen.keeps(c)]
    if view not in ("cards", "compact"):
        view = "compact" if len(shown) > COMPACT_OVER else "cards"
    all_totals = totals_by_driver(cells)
    devices = sum(t.devices for t in all_totals.values())
    allocated = sum(t.allocated for t in all_totals.values())
    counts = {state: 0 for state in STATES}
    for c in cells:
        counts[c.state] += 1
    sections = []
    for driver, on_driver in groupby(shown, key=lambda c: c.driver):
        group = list(on_driver)
        by_node = [(node, list(on_node)) for node, on_node in groupby(group, key=lambda c: c.node)]
        sections.append((driver, by_node, totals_by_driver(group)[driver]))
    several = len(clusters) > 1
    return render(
        "devices.html",
        title=title,
        current="devices",
        cells=cells,
        shown=shown,
        chosen=chosen,
        warnings=list(warnings),
        clusters=list(clusters),
        cluster=cluster,
        error=error,
        pending=[p for p in pending if not chosen.namespace or p.namespace == chosen.namespace],
        view=view,
        live=dict(live or {}),
        drivers=[(d, d) for d in sorted({c.driver for c in cells})],
        nodes=[(n, n) for n in sorted({c.node for c in cells if c.node})],
        namespaces=[(n, n) for n in sorted({c.namespace for c in cells if c.namespace})],
        clear=f"/devices?{urlencode({'cluster': cluster})}" if several else "/devices",
        totals=all_totals,
        devices=devices,
        allocated=allocated,
        by_state=list(counts.items()),
        states=STATES,
        sections=sections,
        compact=compact,
    )
