"""Table-driven capacity cases: small YAML scenarios with the expected outcome of every pod.

Each file in capacity_cases/ holds a list of cases; each case has nodes, slices, classes, claims
(shared or pre-allocated), templates, pods (in creation order) and, per pod, `expect`
(fits / does-not-fit / at-risk / unknown: over every placement the scheduler's ties allow) with
optional `node` (the only node the scheduler may take), `ties` (the nodes that score equal best),
`devices` ({pod claim: [device names]}), `reason` (substrings of the explanation), `fits_in` (the
share of placements, "1/3") and `deciders` (the earlier pods whose node decides it). The placement
model (reconciler.dra.placement) and the exploration of ties (reconciler.dra.ties) answer.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from capacity_scenario import (
    allocation_status,
    claim,
    classes_of,
    node,
    pod_spec,
    resource_slice,
    taint_rule,
    template,
)

from reconciler.dra.allocator import Inventory
from reconciler.dra.placement import NodeInfo, Placement, PodClaim, PodInfo
from reconciler.dra.ties import PodVerdict, explore

CASES_DIR = Path(__file__).parent / "capacity_cases"


def load_cases() -> list[tuple[str, dict[str, Any]]]:
    out = []
    for path in sorted(CASES_DIR.glob("*.yaml")):
        for case in yaml.safe_load(path.read_text()):
            out.append((f"{path.stem}/{case['name']}", case))
    return out


CASES = load_cases()


def run_case(case: dict[str, Any]) -> dict[str, PodVerdict]:
    slices = [resource_slice(s, i) for i, s in enumerate(case.get("slices") or [])]
    claims = {}
    for c in case.get("claims") or []:
        body = claim(c)
        status = allocation_status(c)
        if status:
            body["status"] = status
        claims[c["name"]] = body
    templates = {t["name"]: template(t) for t in case.get("templates") or []}
    inv = Inventory(
        slices,
        classes_of(case),
        list(claims.values()),
        [taint_rule(r, i) for i, r in enumerate(case.get("taintRules") or [])],
    )
    nodes = [NodeInfo.from_node(node(n)) for n in case.get("nodes", ["n1"])]
    pods = []
    for seq, p in enumerate(case.get("pods") or []):
        spec = pod_spec(p)
        pod_claims = []
        for pc in spec.get("resourceClaims", []):
            if "resourceClaimTemplateName" in pc:
                tmpl = templates.get(pc["resourceClaimTemplateName"])
                generated = f"{p['name']}-{pc['name']}"
                body = None
                if tmpl is not None:
                    body = {
                        "kind": "ResourceClaim",
                        "metadata": {"name": generated},
                        "spec": tmpl["spec"]["spec"],
                    }
                missing = None if tmpl is not None else pc["resourceClaimTemplateName"]
                pod_claims.append(PodClaim(pc["name"], ("default", generated), body, missing))
            else:
                name = pc["resourceClaimName"]
                pod_claims.append(PodClaim(pc["name"], ("default", name), claims.get(name)))
        priority = int(p.get("priority", 0))
        labels = {str(k): str(v) for k, v in (p.get("labels") or {}).items()}
        pods.append(
            PodInfo(
                "default", p["name"], spec, pod_claims, priority, seq, labels=labels, spread=p.get("spread")
            )
        )
    placement = Placement(inv, nodes, explain=True)
    return {v.pod.name: v for v in explore(placement, pods).verdicts}


def test_the_suite_is_large_and_covers_every_feature() -> None:
    assert len(CASES) >= 60
    files = {name.partition("/")[0] for name, _ in CASES}
    assert files >= {
        "basics",
        "placement",
        "all_mode",
        "first_available",
        "constraints",
        "taints",
        "admin_access",
        "partitionable",
        "consumable",
        "slices",
        "ties",
    }


@pytest.mark.parametrize("case", [c for _, c in CASES], ids=[n for n, _ in CASES])
def test_case(case: dict[str, Any]) -> None:
    verdicts = run_case(case)
    for p in case["pods"]:
        v = verdicts[p["name"]]
        r = v.result
        text = r.reason() if r.outcome == "does-not-fit" else (r.unknown or "")
        where = f"pod {p['name']}: {v.verdict} ({v.fits}) on {r.node} ({text})"
        assert v.verdict == p["expect"], where
        tied = sorted(n for c in r.ties for n in c)
        if "node" in p:  # the scheduler's only choice
            assert tied == [p["node"]], f"{where}: ties {r.ties}"
        if "ties" in p:  # nodes that score equal best: the scheduler takes any of them
            assert tied == sorted(p["ties"]), f"{where}: ties {r.ties}"
        for pc_name, wanted in (p.get("devices") or {}).items():
            key = next(pc.key for pc in r.pod.claims if pc.name == pc_name)
            outcome = r.allocations[key]
            got = [res["device"] for res in outcome.allocation["devices"]["results"]]
            assert got == wanted, where
        for fragment in [p["reason"]] if isinstance(p.get("reason"), str) else p.get("reason") or []:
            assert fragment in text, where
        if "fits_in" in p:
            assert str(v.fits) == str(p["fits_in"]), where
        if "deciders" in p:
            assert [d.partition("/")[2] for d in v.deciders] == p["deciders"], where
        if "requests" in p:  # result request names, e.g. "gpu/big"
            key = next(pc.key for pc in r.pod.claims if pc.name == p["requests"]["claim"])
            got = [res["request"] for res in r.allocations[key].allocation["devices"]["results"]]
            assert got == p["requests"]["names"], where
