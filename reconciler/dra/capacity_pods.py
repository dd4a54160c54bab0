"""The pods a change adds, for the capacity prediction (:mod:`reconciler.dra.capacity`) (pure).

A Pod, or one pod per replica of a workload (a DaemonSet: one per node it runs on, pinned there as the
DaemonSet controller pins it; a rollout that keeps its old pods: its first new-template pods too), each
with its claims (named, generated from a template, or missing), after the pods already waiting in the
cluster. Also which allocated claims are being released (their pods deleted or finished).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.dra.extended import EXTENDED_CLAIM_INFIX, class_mapping, device_requests, extended_claim
from reconciler.dra.nodematch import node_selector_for, pod_selects_node, untolerated_taint
from reconciler.dra.noderesources import node_allocatable
from reconciler.dra.placement import NodeInfo, PodClaim, PodInfo, pod_priority
from reconciler.dra.podinfo import EXTENDED_CLAIM
from reconciler.dra.scoring import default_spread
from reconciler.model import dra
from reconciler.model.objects import Manifest
from reconciler.model.plan import Plan
from reconciler.model.readers import as_dict, as_list
from reconciler.model.rollouts import rollout_surge

__all__ = ["PodBuilder", "PodSource", "pod_done", "releasing_claims"]


@dataclass
class PodSource:
    """Where a predicted pod comes from."""

    manifest: Manifest | None  # the object of the change (None: a pod already waiting in the cluster)
    pods: int  # how many pods that object adds
    rollout: str = ""  # set when the pods are a rollout's first new-template pods: why they need devices


def _replicas(body: dict[str, Any]) -> int:
    """How many pods a (non-DaemonSet) workload runs."""
    kind = body.get("kind")
    spec = as_dict(body.get("spec"))
    if kind == "Job":
        value = spec.get("parallelism")
        return int(value) if isinstance(value, int) else 1
    if kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        value = spec.get("replicas")
        return int(value) if isinstance(value, int) else 1
    return 1


def pod_done(pod: dict[str, Any] | None) -> bool:
    """A pod whose claims the resourceclaim controller releases: deleted, being deleted, or finished."""
    if pod is None:
        return True
    if as_dict(pod.get("metadata")).get("deletionTimestamp"):
        return True
    return as_dict(pod.get("status")).get("phase") in ("Succeeded", "Failed")


def releasing_claims(live: Sequence[Manifest]) -> set[tuple[str, str]]:
    """Allocated claims that will give their devices back without anyone acting.

    A claim generated for a pod that is being deleted or has finished, and a claim being deleted whose
    every reserving pod is gone or going. An owner pod missing from the live list is not taken as gone
    (it may have been created between the LISTs) unless the claim itself is being deleted.
    """
    pods = {(m.ref.namespace, m.ref.name): m.body for m in live if m.kind == "Pod"}
    out: set[tuple[str, str]] = set()
    for m in live:
        if m.kind != "ResourceClaim" or not dra.is_dra_group(m.api_version):
            continue
        status = as_dict(m.body.get("status"))
        if not status.get("allocation"):
            continue
        meta = as_dict(m.body.get("metadata"))
        ns = m.ref.namespace
        owner = next(
            (
                as_dict(o)
                for o in as_list(meta.get("ownerReferences"))
                if as_dict(o).get("kind") == "Pod" and as_dict(o).get("controller")
            ),
            None,
        )
        if owner is not None:
            pod = pods.get((ns, str(owner.get("name"))))
            if pod is not None and pod_done(pod):
                out.add((ns, m.ref.name))
                continue
        if meta.get("deletionTimestamp"):
            users = [as_dict(r) for r in as_list(status.get("reservedFor"))]
            if all(
                pod_done(pods.get((ns, str(r.get("name"))))) for r in users if r.get("resource") == "pods"
            ):
                out.add((ns, m.ref.name))
    return out


# Controllers whose pods kube-scheduler spreads by default (helper.DefaultSelector: ReplicaSets, and so
# a Deployment's pods, StatefulSets and ReplicationControllers; and any pod a Service selects: a Job's
# pods only through a Service).
SPREAD_KINDS = ("ReplicaSet", "StatefulSet", "ReplicationController")


def _spread_selector(body: dict[str, Any]) -> dict[str, Any] | None:
    """The workload's pod selector as a LabelSelector; None when it selects nothing in particular."""
    selector = as_dict(as_dict(body.get("spec")).get("selector"))
    if body.get("kind") == "ReplicationController":
        selector = {"matchLabels": selector} if selector else {}
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return None
    return selector


def _template_labels(body: dict[str, Any]) -> dict[str, str]:
    """The labels of the pods a workload creates (a Pod's own)."""
    meta = (
        as_dict(body.get("metadata"))
        if body.get("kind") == "Pod"
        else as_dict(as_dict(as_dict(body.get("spec")).get("template")).get("metadata"))
    )
    return {str(k): str(v) for k, v in as_dict(meta.get("labels")).items()}


def _daemon_nodes(pod_spec: dict[str, Any], nodes: Sequence[NodeInfo]) -> list[NodeInfo]:
    """Nodes a DaemonSet runs a pod on: those its selection matches and whose taints it tolerates."""
    out = []
    for node in nodes:
        if not pod_selects_node(pod_spec, node.name, node.labels):
            continue
        if untolerated_taint(node.taints, pod_spec.get("tolerations")) is not None:
            continue
        out.append(node)
    return out


def _pinned(pod_spec: dict[str, Any], node: str) -> dict[str, Any]:
    """The pod spec with the required node affinity the DaemonSet controller gives each pod."""
    spec = dict(pod_spec)
    affinity = dict(as_dict(spec.get("affinity")))
    node_affinity = dict(as_dict(affinity.get("nodeAffinity")))
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = node_selector_for(node)
    affinity["nodeAffinity"] = node_affinity
    spec["affinity"] = affinity
    return spec


class PodBuilder:
    """Turns the change and the live pods into the pods to place."""

    def __init__(self, plan: Plan, head: Sequence[Manifest], live: Sequence[Manifest]) -> None:
        self.templates = {
            (m.ref.namespace, m.ref.name): m.body
            for m in [*live, *head]  # the head version of a template wins over the live one
            if m.kind == "ResourceClaimTemplate" and dra.is_dra_group(m.api_version)
        }
        self.claims: dict[tuple[str, str], dict[str, Any]] = {
            (m.ref.namespace, m.ref.name): m.body
            for m in live
            if m.kind == "ResourceClaim" and dra.is_dra_group(m.api_version)
        }
        # DeviceClass by the extended resource it backs (implicit and explicit names), head over live;
        # what a node advertises in its allocatable is a device plugin's
        classes = {m.ref.name: m.body for m in [*live, *head] if m.kind == "DeviceClass"}
        self.extended_classes = class_mapping(classes.values())
        self.advertised = {
            r for m in live if m.kind == "Node" for r, q in node_allocatable(m.body).items() if q > 0
        }
        self.priority_classes = [m.body for m in [*live, *head] if m.kind == "PriorityClass"]
        self.owners = {(m.ref.namespace, m.kind, m.ref.name): m.body for m in live if m.kind in SPREAD_KINDS}
        services = {(m.ref.namespace, m.ref.name): m.body for m in [*live, *head] if m.kind == "Service"}
        self.services: dict[str, list[dict[str, Any]]] = {}  # namespace -> the Services' selectors
        for (ns, _), body in services.items():
            selector = as_dict(as_dict(body.get("spec")).get("selector"))
            if selector:
                self.services.setdefault(ns, []).append(selector)
        self.plan = plan
        self.live = live
        self.pods: list[PodInfo] = []
        self.sources: list[PodSource] = []  # per pod
        self.new_claims: list[tuple[tuple[str, str], Manifest]] = []  # ResourceClaims the change creates

    def claim_for(self, ns: str, pod_name: str, pc: dra.PodClaim, statuses: dict[str, str]) -> PodClaim:
        if pc.claim:
            return PodClaim(pc.name, (ns, pc.claim), self.claims.get((ns, pc.claim)))
        generated = statuses.get(pc.name)
        if generated and (ns, generated) in self.claims:
            return PodClaim(pc.name, (ns, generated), self.claims[(ns, generated)])
        template = self.templates.get((ns, pc.template or ""))
        name = f"{pod_name}-{pc.name}"
        claim = None
        if template is not None:
            claim = {
                "apiVersion": template.get("apiVersion"),
                "kind": "ResourceClaim",
                "metadata": {"name": name, "namespace": ns},
                "spec": dra.claim_spec_of(template) or {},
            }
        return PodClaim(pc.name, (ns, name), claim, None if claim is not None else pc.template)

    def uses_devices(self, spec: dict[str, Any]) -> bool:
        """Whether a pod spec asks for devices: claims, or extended resources backed by DRA."""
        return bool(dra.pod_claims(spec)) or bool(self.extended_claims("", "", spec))

    def extended_claims(self, ns: str, pod_name: str, spec: dict[str, Any]) -> list[PodClaim]:
        """Extended resources backed by DRA (a class's `extendedResourceName`, or the implicit
        `deviceclass.resource.kubernetes.io/<class>`) as the scheduler allocates them: one claim for the
        pod with a request per container and resource of that many devices of the class
        (:mod:`reconciler.dra.extended`; what no DeviceClass maps, or a node advertises, is a device
        plugin's, judged against node allocatable instead)."""
        requests = device_requests(spec, self.extended_classes, self.advertised)
        if not requests:
            return []
        claim = extended_claim(ns, pod_name, requests)
        name = f"{pod_name}{EXTENDED_CLAIM_INFIX.rstrip('-')}"
        claim["metadata"]["name"] = name
        return [PodClaim(EXTENDED_CLAIM, (ns, name), claim)]

    def add(
        self,
        ns: str,
        name: str,
        spec: dict[str, Any],
        source: PodSource,
        statuses: dict[str, str],
        labels: dict[str, str] | None = None,
        spread: dict[str, Any] | None = None,
    ) -> None:
        claims = [self.claim_for(ns, name, pc, statuses) for pc in dra.pod_claims(spec)]
        claims += self.extended_claims(ns, name, spec)
        priority = pod_priority(spec, self.priority_classes)
        pod = PodInfo(
            ns, name, spec, claims, priority, seq=len(self.pods), labels=labels or {}, spread=spread
        )
        self.pods.append(pod)
        self.sources.append(source)

    def _owner_selector(self, ns: str, meta: dict[str, Any]) -> dict[str, Any] | None:
        """The selector of the ReplicaSet or StatefulSet that owns a live pod (its default spreading)."""
        for o in as_list(meta.get("ownerReferences")):
            o = as_dict(o)
            if o.get("controller") and o.get("kind") in SPREAD_KINDS:
                owner = self.owners.get((ns, str(o.get("kind")), str(o.get("name"))))
                return _spread_selector(owner) if owner is not None else None
        return None

    def spread(self, ns: str, labels: dict[str, str], owner: dict[str, Any] | None) -> dict[str, Any] | None:
        """The pod's default spreading: its Services' and its owner's selectors."""
        return default_spread(labels, self.services.get(ns, []), owner)

    def waiting_pods(self) -> None:
        """Pods already waiting for the scheduler come first (created earlier)."""
        waiting = [
            m
            for m in self.live
            if m.kind == "Pod"
            and not as_dict(m.body.get("spec")).get("nodeName")
            and as_dict(m.body.get("status")).get("phase") in (None, "Pending")
            and not as_dict(m.body.get("metadata")).get("deletionTimestamp")
            and self.uses_devices(as_dict(m.body.get("spec")))
        ]
        waiting.sort(
            key=lambda m: (str(as_dict(m.body.get("metadata")).get("creationTimestamp") or ""), m.ref.name)
        )
        for m in waiting:
            meta = as_dict(m.body.get("metadata"))
            labels = {str(k): str(v) for k, v in as_dict(meta.get("labels")).items()}
            statuses = {
                str(as_dict(s).get("name")): str(as_dict(s).get("resourceClaimName"))
                for s in as_list(as_dict(m.body.get("status")).get("resourceClaimStatuses"))
                if as_dict(s).get("resourceClaimName")
            }
            spec = as_dict(m.body.get("spec"))
            spread = self.spread(m.ref.namespace, labels, self._owner_selector(m.ref.namespace, meta))
            self.add(m.ref.namespace, m.ref.name, spec, PodSource(None, 1), statuses, labels, spread)

    def change_pods(self, nodes: Sequence[NodeInfo]) -> None:
        live_by_ref = {m.ref: m for m in self.live}
        for change in self.plan.changes:
            new = change.new
            if new is None or change.op == "delete":
                continue
            running = live_by_ref.get(new.ref) or change.old
            if new.kind == "ResourceClaim" and dra.is_dra_group(new.api_version):
                key = (new.ref.namespace, new.ref.name)
                if running is None:
                    self.claims[key] = new.body
                    self.new_claims.append((key, new))
                continue
            pod_spec = dra.pod_spec_of(new.body)
            if pod_spec is None or not self.uses_devices(pod_spec):
                continue
            ns, name = new.ref.namespace, new.ref.name
            if new.kind == "DaemonSet":
                targets = _daemon_nodes(pod_spec, nodes)
                if running is not None:
                    continue  # the DaemonSet runs already: its pods have their devices
                source = PodSource(new, len(targets))
                for node in targets:
                    self.add(ns, f"{name}-{node.name}", _pinned(pod_spec, node.name), source, {})
                continue
            count = _replicas(new.body)
            rollout = ""
            if running is not None:
                # Only pods added by the change need new devices, and the pods a rollout starts before
                # any old pod gives its devices back.
                count = max(0, count - _replicas(running.body))
                old = change.old.body if change.old is not None else None
                surge = rollout_surge(new.body, old, running.body)
                if surge is not None and surge[0] > count:
                    count, rollout = surge
            source = PodSource(new, count, rollout)
            labels = _template_labels(new.body)
            owner = _spread_selector(new.body) if new.kind in ("Deployment", *SPREAD_KINDS) else None
            spread = self.spread(ns, labels, owner)
            for index in range(count):
                pod_name = name if new.kind == "Pod" else f"{name}-{index}"
                self.add(ns, pod_name, pod_spec, source, {}, labels, spread)
