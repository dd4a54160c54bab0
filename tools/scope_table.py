"""Write reconciler/model/scope_table.py: whether each built-in kind is namespaced, per API version.

The source is the official Kubernetes Python client (the `kubernetes` package we pin): every list operation
of every API class is generated from the release's OpenAPI spec, with the path the API server serves it at.
A resource is namespaced when its list is served under `/namespaces/{namespace}/` (`list_namespaced_pod`),
cluster-scoped when it is not (`list_node`); the kind is the model of the list's items (`V1PodList`).

The OpenAPI schemas kubernetes-validate ships (model/served_table.py) know kinds the client no longer has
(resource.k8s.io/v1alpha1 and v1alpha2, removed in 1.31). A resource keeps its scope in every version (the
versions are views of the same stored objects), so such a kind takes the scope the client gives it in
another version; a kind the client has in no version at all takes it from `RETIRED` below, each with where
the Kubernetes documentation says it.

python tools/scope_table.py            # rewrite reconciler/model/scope_table.py
python tools/scope_table.py --check    # exit 1 when it is out of date
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from generated import write_or_check

ROOT = Path(__file__).resolve().parents[1]
TARGET = ROOT / "reconciler" / "model" / "scope_table.py"
sys.path.insert(0, str(ROOT))

# Kinds of released API versions the client (built for the newest release) no longer has, with the scope
# their API served them with: the Kubernetes DRA reference ("DeviceClass, ResourceSlice, DeviceTaintRule,
# ResourceClass (old), ResourcePoolStatusRequest are cluster-scoped; ResourceClaim, ResourceClaimTemplate,
# PodScheduling(Context), Resource{Claim,Class}Parameters are namespaced"), the paths of the Python client
# 30 (ResourceV1alpha2Api: /apis/resource.k8s.io/v1alpha2/resourceclasses, .../namespaces/{namespace}/
# resourceclassparameters) and the API reference of 1.26-1.28 (ClusterCIDR: /apis/networking.k8s.io/
# v1alpha1/clustercidrs).
RETIRED: dict[tuple[str, str], bool] = {
    ("resource.k8s.io", "ResourceClass"): False,
    ("resource.k8s.io", "ResourceClassParameters"): True,
    ("resource.k8s.io", "ResourceClaimParameters"): True,
    ("resource.k8s.io", "PodScheduling"): True,
    ("resource.k8s.io", "PodSchedulingContext"): True,
    ("networking.k8s.io", "ClusterCIDR"): False,
}
# What served_table.py counts as a kind (meta/v1 has an APIGroupList) but no API serves as a resource.
NOT_RESOURCES = frozenset({("", "APIGroup")})

Gvk = tuple[str, str, str]
_OPERATION = re.compile(r"\n    def _(list_\w+)_serialize\(.*?resource_path='([^']+)'", re.S)
_RESPONSE = re.compile(r"\n    def (list_\w+)_with_http_info\(.*?'200': \"(\w+)\"", re.S)
# The client's model names: an optional group prefix (`CoreV1Event`), the version, the kind.
_MODEL = re.compile(r"^(?:[A-Z][a-z]+)*?V\d+(?:alpha\d+|beta\d+)?(?P<kind>[A-Z]\w*)List$")
_PATH = re.compile(r"^/(?:api|apis/(?P<group>[^/]+))/(?P<version>[^/]+)/(?P<rest>.+)$")


def from_client() -> dict[Gvk, bool]:
    """(group, version, kind) -> namespaced, from every list operation of the client's API classes."""
    import kubernetes.client.api as api

    found: dict[Gvk, bool] = {}
    for module in sorted(Path(api.__file__).parent.glob("*_api.py")):
        text = module.read_text(encoding="utf-8")
        paths = dict(_OPERATION.findall(text))
        for operation, model in _RESPONSE.findall(text):
            if operation.endswith("_for_all_namespaces") or operation not in paths:
                continue
            path, kind = _PATH.match(paths[operation]), _MODEL.match(model)
            if path is None or kind is None:
                continue  # the custom objects API: its paths are templates, its kinds anyone's
            gvk = (path["group"] or "", path["version"], kind["kind"])
            namespaced = path["rest"].startswith("namespaces/{namespace}/")
            if found.setdefault(gvk, namespaced) != namespaced:
                raise SystemExit(f"{gvk}: listed both namespaced and cluster-wide")
    return found


def build() -> dict[Gvk, bool]:
    from reconciler.model.served_table import KINDS

    client = from_client()
    by_kind: dict[tuple[str, str], bool] = {}
    for (group, _, kind), namespaced in client.items():
        if by_kind.setdefault((group, kind), namespaced) != namespaced:
            raise SystemExit(f"{group} {kind}: namespaced in one version, cluster-scoped in another")
    table = dict(client)
    for (group, kind), versions in KINDS.items():
        for version in versions:
            if (group, version, kind) in table or (group, kind) in NOT_RESOURCES:
                continue
            scope = by_kind.get((group, kind), RETIRED.get((group, kind)))
            if scope is None:
                raise SystemExit(f"{group}/{version} {kind}: no scope in the client nor in RETIRED")
            table[(group, version, kind)] = scope
    return dict(sorted(table.items()))


def render(table: dict[Gvk, bool]) -> str:
    from kubernetes import __version__

    lines = [
        '"""Whether each built-in kind is namespaced, per API version (generated: do not edit).',
        "",
        f"Written by `python tools/scope_table.py` from the paths of the Kubernetes Python client {__version__}",
        "(with the kinds of the schemas in served_table.py it no longer has). Read through reconciler/model/scope.py.",
        '"""',
        "",
        "# (group, version, kind) -> namespaced",
        "NAMESPACED: dict[tuple[str, str, str], bool] = {",
    ]
    lines += [f'    ("{g}", "{v}", "{k}"): {namespaced},' for (g, v, k), namespaced in table.items()]
    lines.append("}")
    return "\n".join(lines) + "\n"


def main() -> int:
    return write_or_check(TARGET, render(build()), "tools/scope_table.py")


if __name__ == "__main__":
    raise SystemExit(main())
