"""Write reconciler/model/served_table.py: which built-in kinds each Kubernetes release has, per API version.

The source is the OpenAPI schemas that kubernetes-validate ships per release (generated from each
release's api/openapi-spec, which lists every API version compiled into kube-apiserver, alpha and beta
ones too). A kind is a resource of a group version when the schemas have it with a `<Kind>List`; the
table keeps, for every (group, kind), the first and last release of each version. Whether a version is on
by default is not in the schemas: reconciler/model/served.py decides it from the version's stage.

python tools/served_table.py            # rewrite reconciler/model/served_table.py
python tools/served_table.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

from generated import write_or_check

TARGET = Path(__file__).resolve().parents[1] / "reconciler" / "model" / "served_table.py"
FIRST_RELEASE = 26  # the first release the DRA reference (docs/policy-input.md) covers
LAST_RELEASE = 37

Table = dict[tuple[str, str], dict[str, tuple[int, int]]]


def _gvks(minor: int) -> set[tuple[str, str, str]]:
    root = resources.files("kubernetes_validate") / "kubernetes-json-schema" / f"v1.{minor}.0-local"
    definitions = json.loads((root / "_definitions.json").read_text(encoding="utf-8"))["$defs"]
    return {
        (str(g["group"]), str(g["version"]), str(g["kind"]))
        for schema in definitions.values()
        for g in schema.get("x-kubernetes-group-version-kind", [])
    }


def build() -> Table:
    releases: dict[tuple[str, str, str], list[int]] = {}
    for minor in range(FIRST_RELEASE, LAST_RELEASE + 1):
        gvks = _gvks(minor)
        for group, version, kind in gvks:
            if not kind.endswith("List") and (group, version, kind + "List") in gvks:
                releases.setdefault((group, kind, version), []).append(minor)
    table: Table = {}
    for (group, kind, version), minors in sorted(releases.items()):
        if minors != list(range(minors[0], minors[-1] + 1)):
            raise SystemExit(f"{group}/{version} {kind}: releases {minors} are not contiguous")
        table.setdefault((group, kind), {})[version] = (minors[0], minors[-1])
    return table


def render(table: Table) -> str:
    from kubernetes_validate.version import __version__

    lines = [
        '"""Which built-in kinds each Kubernetes release has, per API version (generated: do not edit).',
        "",
        f"Written by `python tools/served_table.py` from the OpenAPI schemas of kubernetes-validate {__version__}",
        "(every API version compiled into kube-apiserver, whether on by default or not). Read through",
        "reconciler/model/served.py.",
        '"""',
        "",
        f"FIRST_RELEASE = {FIRST_RELEASE}",
        f"LAST_RELEASE = {LAST_RELEASE}",
        "",
        "# (group, kind) -> {version: (first release, last release)}, as minor versions of Kubernetes 1.x",
        "KINDS: dict[tuple[str, str], dict[str, tuple[int, int]]] = {",
    ]
    for (group, kind), versions in table.items():
        items = [f'"{v}": ({a}, {b})' for v, (a, b) in sorted(versions.items())]
        line = f'    ("{group}", "{kind}"): {{{", ".join(items)}}},'
        if len(line) <= 110:
            lines.append(line)
        else:  # one version a line, as the formatter writes it
            lines.append(f'    ("{group}", "{kind}"): {{')
            lines.extend(f"        {item}," for item in items)
            lines.append("    },")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    return write_or_check(TARGET, render(build()), "tools/served_table.py")


if __name__ == "__main__":
    raise SystemExit(main())
