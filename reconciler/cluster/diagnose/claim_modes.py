"""The failure modes of one claim in scope, checked in order: missing-class, selector-error
(`selector.py`), node-failure, prepare-failure, device-taint (free devices it cannot use for an
untolerated taint, from the slice or a DeviceTaintRule), exhaustion (only when the free count is known),
else pending (nothing conclusive yet, an unknown free count with its reason; nothing when it is
healthy). Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from reconciler.cluster.diagnose.evidence import claim_status_line, class_counts, event_line
from reconciler.cluster.diagnose.scope import ClassifierBase, Subject
from reconciler.cluster.diagnose.selector import selector_diagnosis
from reconciler.cluster.diagnose.types import FAILED_PREPARE, FAILED_SCHEDULING, Diagnosis
from reconciler.cluster.objects import node_ready, nsname, pod_health, pod_phase, pod_ready
from reconciler.dra.allocator import claim_spec
from reconciler.model import dra
from reconciler.model.readers import as_dict, as_list

_MISSING_CLASS_RE = re.compile(r"device class (?P<cls>[A-Za-z0-9.\-]+) does not exist")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


@dataclass
class ClaimView:
    """What the modes of one claim look at: its spec, allocation, events and the evidence lines so far."""

    subject: Subject
    source: dict[str, Any] | None  # the claim, else its template: where the requests are
    alloc: dict[str, Any]
    events: list[dict[str, Any]]  # of its pods
    evidence: list[str]  # the claim's status and its pods' state
    event_lines: list[str]  # the events that are not Normal


class ClaimModes(ClassifierBase):
    """`subject(s)`: the diagnoses of one claim in scope, mode by mode in order."""

    def subject(self, s: Subject) -> None:
        view = self.view(s)
        if self.missing_class(view):
            return
        if view.source is None:
            self.no_spec(view)
            return
        if not view.alloc.get("allocated") and self.selector_error(view):
            return
        found = self.node_failure(view)
        found = self.prepare_failure(view) or found
        found = self.device_taint(view) or found
        found = self.exhaustion(view) or found
        if not found:
            self.pending(view)

    def view(self, s: Subject) -> ClaimView:
        events: list[dict[str, Any]] = []
        for pod in s.pods:
            events += self.pod_events(pod)
        evidence: list[str] = []
        if s.claim is not None:
            evidence.append(claim_status_line(s.claim))
        elif s.name is not None:
            evidence.append(f"claim {s.namespace}/{s.name}: does not exist")
        elif s.extended:
            evidence.append(
                f"pod {nsname(s.pods[0])}: its claim for extended resources is not created yet "
                "(the scheduler creates it once a node can have the devices)"
            )
        else:
            pod = s.pods[0]
            evidence.append(
                f"pod {nsname(pod)}: claim from template {s.template_name} not created yet (no status.resourceClaimStatuses entry)"
            )
        for pod in s.pods:
            h = pod_health(pod)
            node = as_dict(pod.get("spec")).get("nodeName")
            evidence.append(f"pod {nsname(pod)}: {h.describe()}, node {node or '(not scheduled)'}")
        alloc: dict[str, Any] = (
            dra.claim_allocation(s.claim) if s.claim is not None else {"allocated": False, "node": None}
        )
        event_lines = [event_line(e) for e in events if e.get("type") != "Normal"]
        return ClaimView(s, s.spec_source, alloc, events, evidence, event_lines)

    # 1. missing class (the object, or the scheduler's event)
    def missing_class(self, view: ClaimView) -> bool:
        s = view.subject
        requested = dra.requested_classes(view.source) if view.source is not None else []
        missing = [c for c in requested if c not in self.class_by_name]
        for e in view.events:
            m = _MISSING_CLASS_RE.search(str(e.get("message") or ""))
            if m and m.group("cls") not in self.class_by_name and m.group("cls") not in missing:
                missing.append(m.group("cls"))
        if not missing:
            return False
        holder = (
            f"ResourceClaimTemplate {s.namespace}/{s.template_name}"
            if s.claim is None and s.template_name
            else f"the extended resources of {s.ref}"
            if s.extended
            else s.ref
        )
        self.add(
            Diagnosis(
                "missing-class",
                s.ref,
                f"{holder} requests DeviceClass {', '.join(missing)}, which does not exist",
                evidence=[
                    *view.evidence,
                    *view.event_lines,
                    f"DeviceClasses in the cluster: {', '.join(sorted(self.class_by_name)) or 'none'}",
                ],
                recovery=[
                    f"create DeviceClass {', '.join(missing)} (apply the commit stage that defines it, or install the "
                    "driver chart that ships it)",
                    f"or fix deviceClassName in the claim/template to one of: {', '.join(sorted(self.class_by_name)) or '(none)'}",
                ],
            )
        )
        return True

    def no_spec(self, view: ClaimView) -> None:
        """Neither the claim nor its template exists (yet): pending, saying which is missing."""
        s = view.subject
        if s.name is None and s.template_name and (s.namespace, s.template_name) not in self.templates:
            summary = f"ResourceClaimTemplate {s.namespace}/{s.template_name} does not exist, so no claim is generated"
            recovery = [
                f"create ResourceClaimTemplate {s.namespace}/{s.template_name} or fix the pod's resourceClaims"
            ]
        elif s.name is not None and s.claim is None:
            summary = f"ResourceClaim {s.namespace}/{s.name} does not exist; the pod waits for it"
            recovery = [f"create ResourceClaim {s.namespace}/{s.name} or fix the pod's resourceClaims"]
        else:
            summary = "the claim has not been created yet"
            recovery = ["wait: kube-controller-manager creates the claim from the template"]
        self.add(Diagnosis("pending", s.ref, summary, [*view.evidence, *view.event_lines], recovery))

    # 1b. a selector failing at run time (kube-scheduler's SchedulerError, or foreseen)
    def selector_error(self, view: ClaimView) -> bool:
        s = view.subject
        assert view.source is not None
        messages = [str(e.get("message") or "") for e in view.events if e.get("reason") == FAILED_SCHEDULING]
        messages += [
            str(c.get("message") or "")
            for pod in s.pods
            for c in as_list(as_dict(pod.get("status")).get("conditions"))
            if as_dict(c).get("type") == "PodScheduled" and as_dict(c).get("status") == "False"
        ]
        claim_name = f"{s.namespace}/{s.name}" if s.name else f"{s.namespace}/(not created)"
        failing = selector_diagnosis(
            self.inv,
            s.ref,
            claim_name,
            claim_spec(view.source),
            messages,
            [*view.evidence, *view.event_lines],
            self.class_by_name,
        )
        if failing is None:
            return False
        self.add(failing)
        return True

    # 2. node failure
    def node_failure(self, view: ClaimView) -> bool:
        s, alloc = view.subject, view.alloc
        found = False
        nodes_of_claim = [alloc["node"]] if alloc.get("node") else []
        for pod in s.pods:
            n = as_dict(pod.get("spec")).get("nodeName")
            if n and n not in nodes_of_claim:
                nodes_of_claim.append(n)
        for node_name in nodes_of_claim:
            node = self.nodes.get(node_name)
            if node is not None and node_ready(node):
                continue
            ready = as_dict(
                next(
                    (
                        c
                        for c in as_list(as_dict(as_dict(node).get("status")).get("conditions"))
                        if as_dict(c).get("type") == "Ready"
                    ),
                    {},
                )
            )
            state = (
                "does not exist"
                if node is None
                else f"is NotReady ({ready.get('reason') or '?'}: {ready.get('message') or ''})"
            )
            self.add(
                Diagnosis(
                    "node-failure",
                    s.ref,
                    f"{s.ref} is allocated on node {node_name}, which {state}",
                    evidence=[*view.evidence, f"node {node_name} {state}", *view.event_lines],
                    recovery=[
                        f"drain and repair or replace node {node_name} (kubectl drain {node_name} --ignore-daemonsets)",
                        "the claim is released when its pods are deleted; their controllers then recreate them "
                        "on a healthy node with free devices",
                    ],
                    numbers={"node": node_name},
                )
            )
            found = True
        return found

    # 3. prepare failure
    def prepare_failure(self, view: ClaimView) -> bool:
        s, alloc = view.subject, view.alloc
        prepare = [e for e in view.events if e.get("reason") == FAILED_PREPARE]
        if not prepare:
            return False
        node = as_dict(prepare[-1].get("source")).get("host") or (alloc.get("node") if alloc else None)
        drivers = sorted({d["driver"] for d in alloc.get("devices", []) if d.get("driver")}) if alloc else []
        self.add(
            Diagnosis(
                "prepare-failure",
                s.ref,
                f"kubelet could not prepare the devices of {s.ref} on node {node or '?'}: "
                f"{str(prepare[-1].get('message') or '').strip()}",
                evidence=[*view.evidence, *[event_line(e) for e in prepare]]
                + self.driver_evidence(drivers[0] if len(drivers) == 1 else None, node),
                recovery=[
                    f"check the driver's kubelet-plugin pod on node {node or '?'} (Ready, registered with kubelet, logs)",
                    "restart the plugin pod if it lost its registration socket; then delete the stuck pod so it is retried",
                ],
            )
        )
        return True

    def waiting_counts(self, view: ClaimView) -> dict[str, dict[str, Any]]:
        """The device counts per class of a claim still waiting for its devices ({} once allocated)."""
        if view.alloc.get("allocated") or view.source is None:
            return {}
        return class_counts(self.inv, claim_spec(view.source))

    # 4. device-taint: enough devices are free, but taints its request does not tolerate keep it off them
    def device_taint(self, view: ClaimView) -> bool:
        s = view.subject
        counts = self.waiting_counts(view)
        blocked = {
            c: n
            for c, n in counts.items()
            if n.get("tainted") and _is_int(n["free"]) and n["free"] >= n["needed"] > n["free"] - n["tainted"]
        }
        if not blocked:
            return False
        taints = sorted({t for n in blocked.values() for t in n["taints"]})
        per = "; ".join(
            f"class {c}: needs {n['needed']}, {n['free']} free of {n['total']}, {n['tainted']} of them tainted"
            for c, n in blocked.items()
        )
        rules = sorted({t.split(":", 1)[0] for t in taints if t.startswith("DeviceTaintRule/")})
        recovery = (
            [
                f"when the maintenance is over, delete or narrow {', '.join(rules)} "
                f"(kubectl delete devicetaintrule {' '.join(r.split('/', 1)[1] for r in rules)})"
            ]
            if rules
            else []
        )
        if any(t.startswith("ResourceSlice/") for t in taints):
            recovery.append(
                "the driver taints these devices in its ResourceSlices: check the driver's health on their nodes"
            )
        recovery.append(
            "or, if the workload may use tainted devices, add a matching toleration to the claim's request"
        )
        self.add(
            Diagnosis(
                "device-taint",
                s.ref,
                f"{s.ref} cannot be allocated: the devices free for it carry taints its request does not "
                f"tolerate ({per}): {', '.join(taints)}",
                evidence=[*view.evidence, *view.event_lines, *[f"untolerated taint {t}" for t in taints]],
                recovery=recovery,
                numbers={
                    "classes": {c: {k: v for k, v in n.items() if k != "unknown"} for c, n in blocked.items()}
                },
            )
        )
        return True

    # 5. exhaustion
    def exhaustion(self, view: ClaimView) -> bool:
        s = view.subject
        counts = self.waiting_counts(view)
        # An unknown free count is never exhaustion: it is reported as unknown (pending), with why.
        classes = {
            c: n
            for c, n in counts.items()
            if _is_int(n["free"]) and _is_int(n["total"]) and n["total"] > 0 and n["free"] < n["needed"]
        }
        if not classes:
            return False
        cls, first = next(iter(classes.items()))
        numbers: dict[str, Any] = {k: first[k] for k in ("needed", "free", "total")}
        numbers["class"] = cls
        if len(counts) > 1:
            numbers["classes"] = counts
        drivers = sorted({dra.class_driver(self.class_by_name[c]) or c for c in classes})
        per = "; ".join(
            f"class {c}: needs {n['needed']}, {n['free']} free of {n['total']}" for c, n in classes.items()
        )
        waiting = [
            nsname(c)
            for c in self.snap.claims
            if not dra.claim_allocation(c)["allocated"] and set(dra.requested_classes(c)) & set(classes)
        ]
        self.add(
            Diagnosis(
                "exhaustion",
                s.ref,
                f"all devices matching {s.ref} are allocated ({per})",
                evidence=[
                    *view.evidence,
                    *view.event_lines,
                    f"pending claims waiting for {', '.join(classes)}: {len(waiting)}",
                ],
                recovery=[
                    f"free devices by deleting or scaling down workloads that hold {', '.join(classes)} devices "
                    "(kubectl get resourceclaims -A shows which are allocated,reserved)",
                    f"add nodes with {', '.join(drivers)} devices",
                    "or lower the request's count / the number of replicas",
                ],
                numbers=numbers,
            )
        )
        return True

    # else: pending, with the numbers and why a free count is unknown (nothing when it is healthy)
    def pending(self, view: ClaimView) -> None:
        s, alloc = view.subject, view.alloc
        assert view.source is not None
        if alloc.get("allocated") and all(pod_ready(p) or pod_phase(p) == "Succeeded" for p in s.pods):
            return  # healthy
        cannot = [e for e in view.events if e.get("reason") == FAILED_SCHEDULING]
        if alloc.get("allocated"):
            summary = f"{s.ref} is allocated; its pod is not Ready yet"
        elif cannot:
            summary = f"{s.ref} is not allocated: {str(cannot[-1].get('message') or '').strip()}"
        elif not s.pods:
            summary = (
                f"{s.ref} is not allocated: no pod uses it yet (allocation happens when a pod is scheduled)"
            )
        else:
            summary = f"{s.ref} is not allocated yet"
        counts = class_counts(self.inv, claim_spec(view.source))
        numbers = {c: {k: v for k, v in n.items() if k != "unknown"} for c, n in counts.items()}
        unknown = {c: n["unknown_reason"] for c, n in counts.items() if n.get("unknown_reason")}
        recovery = [
            "nothing conclusive yet: wait, or run `dra-gitops diagnose` again; check events with kubectl describe pod"
        ]
        # a class no device in the cluster matches: waiting does not help
        none = [c for c, n in counts.items() if n.get("total") == 0 and not n.get("unknown_reason")]
        if none and not alloc.get("allocated"):
            summary += f"; no device in the cluster matches DeviceClass {', '.join(none)}"
            recovery = [
                f"check the selectors of DeviceClass {', '.join(none)} and the request's against the devices the "
                "drivers publish (kubectl get resourceslices -o yaml), or install the driver that has them"
            ]
        if unknown and not alloc.get("allocated"):
            summary += (
                "; whether devices are free is unknown ("
                + "; ".join(f"class {c}: {why}" for c, why in unknown.items())
                + ")"
            )
            recovery.insert(
                0,
                "check by hand which devices the selectors match (kubectl get resourceslices -o yaml): "
                "the model cannot evaluate them, so it does not say the devices are used up",
            )
        self.add(
            Diagnosis(
                "pending",
                s.ref,
                summary,
                [
                    *view.evidence,
                    *view.event_lines,
                    *[
                        f"class {c}: needs {n['needed']}, {n['free']} free of {n['total']}"
                        + (f" (unknown: {n['unknown_reason']})" if n.get("unknown_reason") else "")
                        for c, n in counts.items()
                    ],
                ],
                recovery,
                numbers={"classes": numbers} if numbers else {},
            )
        )
