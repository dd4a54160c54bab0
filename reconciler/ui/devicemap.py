"""The device map page (pure): per driver, a row per node with its devices drawn by state (free,
allocated, tainted, on a node that is not Ready) and the claim, pods and namespace holding each; filters
by driver, node and namespace (a GET form, so it works without JavaScript); totals that add up to
`inventory`'s. With targets in clusters of their own, one map per cluster, chosen with `?cluster=` (the
form's first field); a cluster that cannot be read says why on its map."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from urllib.parse import urlencode

from reconciler.ui.devices import DeviceCell, DeviceFilter, Totals, totals_by_driver
from reconciler.ui.html import Html, attrs, esc, join, link, tag
from reconciler.ui.layout import note, page, table

# State -> (symbol, words): the tile's shape and text say the state, its colour only repeats it.
STATES = {
    "free": ("○", "free"),
    "allocated": ("●", "allocated"),
    "tainted": ("▲", "tainted"),
    "node-not-ready": ("✕", "node not Ready"),
}


def _tile(cell: DeviceCell) -> Html:
    symbol, words = STATES[cell.state]
    lines: list[Html] = [
        tag(
            "span",
            tag("span", symbol, aria_hidden="true", class_="shape"),
            " ",
            tag("strong", cell.name),
            class_="dev",
        ),
        tag("span", words, class_="state"),
    ]
    if cell.pool and cell.pool != cell.node:
        lines.append(tag("span", f"pool {cell.pool}", class_="dim"))
    if cell.claim:
        lines.append(tag("span", "claim ", tag("code", cell.claim)))
        lines.append(tag("span", "pod ", tag("code", ", ".join(cell.pods) or "(none reserved)")))
        lines.append(tag("span", "namespace ", tag("code", cell.namespace)))
    if cell.taints:
        lines.append(tag("span", "taint ", join((tag("code", t) for t in cell.taints), ", ")))
    if cell.notes:
        notes = join(
            tag("li", tag("span", k, class_="key"), " ", tag("code", v)) for k, v in cell.notes.items()
        )
        lines.append(
            tag("details", tag("summary", "labels and annotations"), tag("ul", notes, class_="plain"))
        )
    return tag(
        "li",
        join(lines),
        class_=f"tile {cell.state}",
        data_state=cell.state,
        data_device=f"{cell.driver}/{cell.pool}/{cell.name}",
    )


def _driver_section(driver: str, cells: Sequence[DeviceCell], totals: Totals) -> Html:
    rows = []
    for node, on_node in groupby(cells, key=lambda c: c.node):
        node_cells = list(on_node)
        heading = node or "(not node-local)"
        rows.append(
            tag(
                "div",
                tag("h3", heading, tag("span", f" {len(node_cells)} device(s)", class_="dim")),
                tag("ul", join(_tile(c) for c in node_cells), class_="tiles"),
                class_="node-row",
                data_node=node,
            )
        )
    summary = f"{totals.devices} device(s), {totals.allocated} allocated, {totals.free} free"
    return tag(
        "section",
        tag("h2", driver, " ", tag("span", summary, class_="dim", data_totals=driver)),
        join(rows) if rows else note("No device matches the filters."),
        class_="driver",
        data_driver=driver,
    )


def _select(
    name: str, label: str, values: Sequence[str | tuple[str, str]], chosen: str, everything: bool = True
) -> Html:
    """A select of `values` (each a value, or a value and its words); `everything`: an "all" first."""
    options = [Html(f'<option value=""{attrs({"selected": not chosen})}>all</option>')] if everything else []
    for item in values:
        value, words = item if isinstance(item, tuple) else (item, item)
        options.append(
            Html(f"<option{attrs({'value': value, 'selected': value == chosen})}>{esc(words)}</option>")
        )
    return tag("label", label, " ", tag("select", join(options), name=name, id=f"filter-{name}"))


def _filters(
    cells: Sequence[DeviceCell], chosen: DeviceFilter, clusters: Sequence[tuple[str, str]], cluster: str
) -> Html:
    drivers = sorted({c.driver for c in cells})
    nodes = sorted({c.node for c in cells if c.node})
    namespaces = sorted({c.namespace for c in cells if c.namespace})
    several = len(clusters) > 1
    clear = f"/devices?{urlencode({'cluster': cluster})}" if several else "/devices"
    return tag(
        "form",
        _select("cluster", "Cluster", clusters, cluster, everything=False) if several else Html(""),
        _select("driver", "Driver", drivers, chosen.driver),
        _select("node", "Node", nodes, chosen.node),
        _select("namespace", "Namespace", namespaces, chosen.namespace),
        tag("button", "Filter", type="submit"),
        tag("a", "Clear", href=clear) if chosen.active else Html(""),
        method="get",
        action="/devices",
        class_="filters",
        role="search",
    )


def legend() -> Html:
    return tag(
        "ul",
        join(
            tag("li", tag("span", s, aria_hidden="true", class_="shape"), " ", w, class_=f"tile {k}")
            for k, (s, w) in STATES.items()
        ),
        class_="legend",
        aria_label="Legend",
    )


def _cluster_links(clusters: Sequence[tuple[str, str]], cluster: str) -> Html:
    """Every cluster's map as a link (the current one marked), for reading without the form."""
    items = [
        tag(
            "li",
            link(
                f"/devices?{urlencode({'cluster': key})}",
                label,
                aria_current="page" if key == cluster else None,
            ),
            " (shown)" if key == cluster else "",
        )
        for key, label in clusters
    ]
    return tag("nav", tag("ul", join(items), class_="plain"), aria_label="Clusters", id="clusters")


def device_map_page(
    cells: Sequence[DeviceCell],
    chosen: DeviceFilter,
    warnings: Sequence[str] = (),
    clusters: Sequence[tuple[str, str]] = (),
    cluster: str = "",
    error: str = "",
) -> Html:
    """`clusters`: (key, label) of every cluster with a map, `cluster` this one's; `error`: why it could
    not be read (the page then says so, and offers the others)."""
    label = dict(clusters).get(cluster, "")
    title = f"Device map of {label}" if len(clusters) > 1 else "Device map"
    if error:
        body = [
            _filters(cells, chosen, clusters, cluster),
            note(f"✗ {error}", "bad"),
            _cluster_links(clusters, cluster),
        ]
        return page(title, join(body), current="devices")
    all_totals = totals_by_driver(cells)
    shown = [c for c in cells if chosen.keeps(c)]
    devices = sum(t.devices for t in all_totals.values())
    allocated = sum(t.allocated for t in all_totals.values())
    by_state = {state: sum(1 for c in cells if c.state == state) for state in STATES}
    summary = table(
        ["Driver", "Devices", "Allocated", "Free"],
        [[d, t.devices, t.allocated, t.free] for d, t in all_totals.items()]
        + [[tag("strong", "Total"), devices, allocated, devices - allocated]],
        caption=join(["Totals (as ", tag("code", "dra-gitops inventory"), " counts them)"]),
        id="totals",
    )
    states = tag(
        "p", join((f"{n} {STATES[s][1]}" for s, n in by_state.items()), ", "), class_="dim", id="state-counts"
    )
    parts = [_filters(cells, chosen, clusters, cluster), summary, states, legend()]
    if len(clusters) > 1:
        parts.insert(1, _cluster_links(clusters, cluster))
    if chosen.active:
        parts.append(tag("p", f"Showing {len(shown)} of {len(cells)} device(s).", id="shown"))
    for driver, on_driver in groupby(shown, key=lambda c: c.driver):
        group = list(on_driver)
        parts.append(_driver_section(driver, group, totals_by_driver(group)[driver]))
    if not shown:
        parts.append(
            note("No device matches the filters." if cells else "No ResourceSlice publishes any device.")
        )
    if warnings:
        parts.append(tag("section", tag("h2", "Warnings"), tag("ul", join(tag("li", w) for w in warnings))))
    return page(title, join(parts), current="devices")
