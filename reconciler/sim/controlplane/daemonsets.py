"""DaemonSet controller: one pod per eligible node, rolling updates with the real controller's window.

As kube-controller-manager's daemon controller does: pods carry ``controller-revision-hash`` (the
hash of the template, also the name suffix of a ControllerRevision) and ``pod-template-generation``.
A template change under RollingUpdate with ``maxSurge: 0`` deletes old pods (unavailable ones at
once, available ones within ``maxUnavailable``) and creates the new pod on a node only once the old
pod is gone from the API (a terminating pod still occupies its node). With ``maxSurge`` the new pod
comes up beside the old one, which is deleted once the new one is available. OnDelete replaces
nothing by itself.
"""

from __future__ import annotations

import math
from typing import Any

from reconciler.dra.nodematch import daemon_pod_tolerations, pod_selects_node, untolerated_taint
from reconciler.sim.controlplane.objects import is_terminating, md, pod_phase, pod_ready, template_hash
from reconciler.sim.controlplane.workload import WorkloadController
from reconciler.sim.storebase import Obj

REVISION_LABEL = "controller-revision-hash"
GENERATION_LABEL = "pod-template-generation"


def _scaled(value: Any, total: int) -> int:
    """An int-or-percent of ``total``, rounded up (as the daemon controller scales both bounds)."""
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        return math.ceil(int(value[:-1]) * total / 100)
    return int(value)


def _no_execute_only(tolerations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tolerations with every NoSchedule taint tolerated: what still forbids a running pod."""
    return [*tolerations, {"operator": "Exists", "effect": "NoSchedule"}]


class DaemonSetControl(WorkloadController):
    # ------------------------------------------------------------------ daemonsets

    def daemonsets(self, pods: list[Obj]) -> None:
        nodes = self.store.list("", "nodes")
        for ds in self.store.list("apps", "daemonsets"):
            if is_terminating(ds):
                continue
            try:
                self._daemonset(ds, nodes, pods)
            except Exception:  # noqa: BLE001
                self.errors += 1

    def _daemonset(self, ds: Obj, nodes: list[Obj], pods: list[Obj]) -> None:
        ns, name = md(ds)["namespace"], md(ds)["name"]
        spec = ds.get("spec") or {}
        template = spec.get("template") or {}
        tspec = template.get("spec") or {}
        generation = str(md(ds).get("generation", 1))
        rev = template_hash(template)
        self._sync_revision(ds, "DaemonSet", f"{name}-{rev}", rev)
        tolerations = daemon_pod_tolerations(
            list(tspec.get("tolerations") or []), bool(tspec.get("hostNetwork"))
        )
        should_run: set[str] = set()
        may_continue: set[str] = set()
        for n in nodes:
            node_name, labels = md(n)["name"], md(n).get("labels") or {}
            if is_terminating(n) or not pod_selects_node(tspec, node_name, labels):
                continue
            taints = (n.get("spec") or {}).get("taints") or []
            if untolerated_taint(taints, tolerations) is None:
                should_run.add(node_name)
            if untolerated_taint(taints, _no_execute_only(tolerations)) is None:
                may_continue.add(node_name)
        # every owned pod that has not finished terminating occupies its node
        by_node: dict[str, list[Obj]] = {}
        for p in self._owned(pods, ds):
            by_node.setdefault(_ds_node(p), []).append(p)
        strategy = spec.get("updateStrategy") or {}
        surge = strategy.get("type", "RollingUpdate") == "RollingUpdate" and bool(
            _scaled((strategy.get("rollingUpdate") or {}).get("maxSurge", 0), len(should_run))
        )
        acted = False
        for node, plist in by_node.items():
            live = []
            for p in plist:
                if is_terminating(p):
                    continue
                if pod_phase(p) == "Failed" or node not in may_continue:
                    self.try_delete("", "pods", ns, md(p)["name"])
                    acted = True
                else:
                    live.append(p)
            for p in _duplicates(live, rev, generation, surge):
                self.try_delete("", "pods", ns, md(p)["name"])
                acted = True
        for node in sorted(should_run):
            if not by_node.get(node):
                self._create_daemon_pod(ds, template, node, rev, generation, tolerations)
                acted = True
        if not acted and strategy.get("type", "RollingUpdate") == "RollingUpdate":
            self._rolling_update(ds, by_node, should_run, rev, generation, tolerations)
        self._daemonset_status(ds, nodes, by_node, should_run, rev, generation)

    def _create_daemon_pod(
        self, ds: Obj, template: Obj, node: str, rev: str, generation: str, tolerations: list[Any]
    ) -> None:
        pod = self._pod_from_template(template, md(ds)["namespace"], ds, "DaemonSet", "apps/v1")
        pod["metadata"]["generateName"] = f"{md(ds)['name']}-"
        pod["metadata"]["labels"][REVISION_LABEL] = rev
        pod["metadata"]["labels"][GENERATION_LABEL] = generation
        pspec = pod["spec"]
        aff = pspec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
        aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
            ]
        }
        pspec["tolerations"] = list(tolerations)
        self.try_create("", "pods", pod)

    def _rolling_update(
        self,
        ds: Obj,
        by_node: dict[str, list[Obj]],
        should_run: set[str],
        rev: str,
        generation: str,
        tolerations: list[Any],
    ) -> None:
        ru = ((ds.get("spec") or {}).get("updateStrategy") or {}).get("rollingUpdate") or {}
        desired = len(should_run)
        max_surge = _scaled(ru.get("maxSurge", 0), desired)
        max_unavailable = _scaled(ru.get("maxUnavailable", 1), desired)
        if max_surge == 0 and max_unavailable == 0:
            max_unavailable = 1
        ns = md(ds)["namespace"]
        to_delete: list[Obj] = []
        if max_surge == 0:
            unavailable = 0
            replace_now: list[Obj] = []  # old pods that are unavailable anyway
            candidates: list[Obj] = []
            for node in sorted(should_run):
                new, old, ok = _updated_and_old(by_node.get(node, []), rev, generation)
                if not ok or (new is None) == (old is None):
                    unavailable += 1  # being replaced, or left for the next pass to sort out
                elif new is not None:
                    unavailable += 0 if pod_ready(new) else 1
                elif old is not None and not pod_ready(old):
                    replace_now.append(old)
                elif unavailable < max_unavailable and old is not None:
                    candidates.append(old)
            budget = max(0, min(max_unavailable - unavailable, len(candidates)))
            to_delete = replace_now + candidates[:budget]
        else:
            surged = 0
            create_now: list[str] = []
            create_candidates: list[str] = []
            for node in sorted(should_run):
                new, old, ok = _updated_and_old(by_node.get(node, []), rev, generation)
                if not ok or old is None:
                    continue
                if new is None:
                    if not pod_ready(old):
                        create_now.append(node)
                    elif surged < max_surge:
                        create_candidates.append(node)
                elif not pod_ready(new):
                    surged += 1
                else:
                    to_delete.append(old)
            room = max(0, min(max_surge - surged, len(create_candidates)))
            for node in create_now + create_candidates[:room]:
                self._create_daemon_pod(
                    ds, (ds.get("spec") or {}).get("template") or {}, node, rev, generation, tolerations
                )
        for p in to_delete:
            self.try_delete("", "pods", ns, md(p)["name"])

    def _daemonset_status(
        self,
        ds: Obj,
        nodes: list[Obj],
        by_node: dict[str, list[Obj]],
        should_run: set[str],
        rev: str,
        generation: str,
    ) -> None:
        desired = current = ready = updated = misscheduled = 0
        for n in nodes:
            nname = md(n)["name"]
            plist = by_node.get(nname) or []
            if nname not in should_run:
                misscheduled += 1 if plist else 0
                continue
            desired += 1
            if not plist:
                continue
            current += 1
            # the oldest pod of the node speaks for it, as in the real controller
            oldest = sorted(plist, key=lambda p: (md(p).get("creationTimestamp") or "", md(p)["name"]))[0]
            ready += 1 if pod_ready(oldest) else 0
            updated += 1 if _is_updated(oldest, rev, generation) else 0

        def write(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["desiredNumberScheduled"] = desired
            st["currentNumberScheduled"] = current
            st["numberMisscheduled"] = misscheduled
            st["numberReady"] = ready
            st["observedGeneration"] = md(obj).get("generation", 1)
            for key, value in (
                ("numberAvailable", ready),
                ("updatedNumberScheduled", updated),
                ("numberUnavailable", desired - ready),
            ):
                if value > 0:
                    st[key] = value
                else:
                    st.pop(key, None)

        self._write_status_if_changed("apps", "daemonsets", ds, write)


def _is_updated(pod: Obj, rev: str, generation: str) -> bool:
    labels = md(pod).get("labels") or {}
    return labels.get(REVISION_LABEL) == rev or labels.get(GENERATION_LABEL) == generation


def _duplicates(live: list[Obj], rev: str, generation: str, surge: bool) -> list[Obj]:
    """Pods beyond one per node: keep the oldest (with surge: the oldest old and the newest updated)."""
    if len(live) <= 1:
        return []
    by_age = sorted(live, key=lambda p: (md(p).get("creationTimestamp") or "", md(p)["name"]))
    if not surge:
        return by_age[1:]
    old = [p for p in by_age if not _is_updated(p, rev, generation)]
    new = [p for p in by_age if _is_updated(p, rev, generation)]
    return old[1:] + new[:-1]


def _updated_and_old(pods: list[Obj], rev: str, generation: str) -> tuple[Obj | None, Obj | None, bool]:
    """The node's updated and old pod (terminating ones ignored); ok False if there are several of either."""
    new: Obj | None = None
    old: Obj | None = None
    for p in pods:
        if is_terminating(p):
            continue
        if _is_updated(p, rev, generation):
            if new is not None:
                return None, None, False
            new = p
        else:
            if old is not None:
                return None, None, False
            old = p
    return new, old, True


def _ds_node(pod: Obj) -> str:
    node = (pod.get("spec") or {}).get("nodeName")
    if node:
        return str(node)
    aff = (((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return ""
