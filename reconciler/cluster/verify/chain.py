"""The DRA chain of one pod, link by link: claim created -> allocated -> reserved for the pod -> pod
scheduled on the allocated node -> pod Ready (pure). The first broken link is the evidence's problem.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reconciler.cluster.diagnose import pod_claim_refs
from reconciler.cluster.objects import meta, namespace_of, nsname, pod_phase, pod_ready
from reconciler.cluster.verify.result import ClaimEvidence
from reconciler.dra.extended import pending_extended_claim, request_mappings
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list


def chain_of(
    pod: Mapping[str, Any],
    claims: Mapping[tuple[str, str], Mapping[str, Any]],
    extended: Mapping[str, str] | None = None,
) -> list[ClaimEvidence]:
    """Evidence for every claim of one pod (pure). ``extended``: the extended resources DeviceClasses back
    (resource -> class): a waiting pod that asks them is owed the claim the scheduler makes for them."""
    ns = namespace_of(pod)
    uid = meta(pod).get("uid")
    pod_node = as_dict(pod.get("spec")).get("nodeName") or None
    done = pod_phase(pod) == "Succeeded"
    ready = pod_ready(pod)
    out: list[ClaimEvidence] = []
    refs = pod_claim_refs(pod)
    owed = pending_extended_claim(pod, extended or {}) if not pod_node and not done else None
    if owed is not None:
        resources = sorted(
            {m["resourceName"] for m in request_mappings(as_dict(pod.get("spec")), _requests(owed))}
        )
        out.append(
            ClaimEvidence(
                nsname(pod),
                f"{ns}/(not created)",
                [],
                None,
                False,
                ready,
                pod_node=pod_node,
                problem=f"claim for extended resources {', '.join(resources)} not created yet "
                "(the scheduler makes it once a node can have the devices)",
            )
        )
    if not refs and not out:
        problem = "" if ready or done else ("pod not scheduled" if not pod_node else "pod not Ready")
        return [
            ClaimEvidence(nsname(pod), "", [], pod_node, False, ready, problem=problem, pod_node=pod_node)
        ]
    for pcname, cname, template in refs:
        if cname is None:
            out.append(
                ClaimEvidence(
                    nsname(pod),
                    f"{ns}/(not created)",
                    [],
                    None,
                    False,
                    ready,
                    pod_node=pod_node,
                    problem=f"claim {pcname} from template {template} not created yet",
                )
            )
            continue
        claim = claims.get((ns, cname))
        if claim is None:
            out.append(
                ClaimEvidence(
                    nsname(pod),
                    f"{ns}/{cname}",
                    [],
                    None,
                    False,
                    ready,
                    pod_node=pod_node,
                    problem=f"claim {ns}/{cname} does not exist",
                )
            )
            continue
        alloc = dra.claim_allocation(dict(claim))
        reserved = any(
            as_dict(r).get("uid") == uid for r in as_list(as_dict(claim.get("status")).get("reservedFor"))
        )
        devices = [f"{d['driver']}/{d['pool']}/{d['device']}" for d in alloc["devices"]]
        node = alloc["node"] or pod_node
        problem = ""
        if done:
            problem = ""  # a finished pod released its claim; its run is the evidence
        elif not alloc["allocated"]:
            problem = "claim not allocated"
        elif not reserved:
            problem = "claim not reserved for the pod"
        elif not pod_node:
            problem = "pod not scheduled"
        elif alloc["node"] and alloc["node"] != pod_node:
            problem = f"pod on node {pod_node} but claim allocated on {alloc['node']}"
        elif not ready:
            problem = "pod not Ready"
        out.append(
            ClaimEvidence(
                nsname(pod),
                f"{ns}/{cname}",
                devices,
                node,
                reserved,
                ready,
                allocated=bool(alloc["allocated"]),
                pod_node=pod_node,
                problem=problem,
            )
        )
    return out


def _requests(claim: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [as_dict(r) for r in as_list(as_dict(as_dict(claim.get("spec")).get("devices")).get("requests"))]
