"""The device map page (pure): per driver, a row per node with its devices drawn by state (free,
allocated, tainted, on a node that is not Ready) and the claim, pods and namespace holding each; filters
by driver, node and namespace (a GET form, so it works without JavaScript); totals that add up to
`inventory`'s."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby

from reconciler.ui.devices import DeviceCell, DeviceFilter, Totals, totals_by_driver
from reconciler.ui.html import Html, attrs, esc, join, tag
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


def _select(name: str, label: str, values: Sequence[str], chosen: str) -> Html:
    options = [Html(f'<option value=""{attrs({"selected": not chosen})}>all</option>')]
    for value in values:
        options.append(
            Html(f"<option{attrs({'value': value, 'selected': value == chosen})}>{esc(value)}</option>")
        )
    return tag("label", label, " ", tag("select", join(options), name=name, id=f"filter-{name}"))


def _filters(cells: Sequence[DeviceCell], chosen: DeviceFilter) -> Html:
    drivers = sorted({c.driver for c in cells})
    nodes = sorted({c.node for c in cells if c.node})
    namespaces = sorted({c.namespace for c in cells if c.namespace})
    return tag(
        "form",
        _select("driver", "Driver", drivers, chosen.driver),
        _select("node", "Node", nodes, chosen.node),
        _select("namespace", "Namespace", namespaces, chosen.namespace),
        tag("button", "Filter", type="submit"),
        tag("a", "Clear", href="/devices") if chosen.active else Html(""),
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


def device_map_page(cells: Sequence[DeviceCell], chosen: DeviceFilter, warnings: Sequence[str] = ()) -> Html:
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
    parts = [_filters(cells, chosen), summary, states, legend()]
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
    return page("Device map", join(parts), current="devices")
