"""DaemonSet controller: one pod per eligible node, rolling updates by controller-revision-hash."""

from __future__ import annotations

from reconciler.sim.controlplane.base import (
    Obj,
    is_terminating,
    md,
    pod_fits_node_selection,
    pod_phase,
    pod_ready,
    template_hash,
    untolerated_taint,
)
from reconciler.sim.controlplane.workload import WorkloadController

DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


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
        rev = template_hash(template)
        probe = {**tspec, "tolerations": list(tspec.get("tolerations") or []) + DS_TOLERATIONS}
        eligible = [
            n
            for n in nodes
            if not is_terminating(n)
            and pod_fits_node_selection(tspec, n)
            and untolerated_taint(probe, n) is None
        ]
        eligible_names = {md(n)["name"] for n in eligible}
        owned = [p for p in self._owned(pods, ds) if not is_terminating(p)]
        by_node: dict[str, list[Obj]] = {}
        for p in owned:
            node = _ds_node(p)
            by_node.setdefault(node, []).append(p)
        # failed pods are replaced; pods on nodes that no longer qualify are removed
        for node, plist in list(by_node.items()):
            for p in plist:
                if pod_phase(p) == "Failed" or node not in eligible_names:
                    self.try_delete("", "pods", ns, md(p)["name"])
                    plist.remove(p)
        # rolling update: replace one out-of-date pod at a time when all others are ready
        outdated = [
            p
            for plist in by_node.values()
            for p in plist
            if (md(p).get("labels") or {}).get("controller-revision-hash") != rev
        ]
        all_ready = all(pod_ready(p) for plist in by_node.values() for p in plist)
        if outdated and all_ready and (spec.get("updateStrategy") or {}).get("type") != "OnDelete":
            victim = sorted(outdated, key=lambda p: md(p)["name"])[0]
            self.try_delete("", "pods", ns, md(victim)["name"])
            by_node[_ds_node(victim)].remove(victim)
        for node in sorted(eligible_names):
            if by_node.get(node):
                continue
            pod = self._pod_from_template(template, ns, ds, "DaemonSet", "apps/v1")
            pod["metadata"]["generateName"] = f"{name}-"
            pod["metadata"]["labels"]["controller-revision-hash"] = rev
            pod["metadata"]["labels"]["pod-template-generation"] = str(md(ds).get("generation", 1))
            pspec = pod["spec"]
            aff = pspec.setdefault("affinity", {}).setdefault("nodeAffinity", {})
            aff["requiredDuringSchedulingIgnoredDuringExecution"] = {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                ]
            }
            pspec["tolerations"] = list(pspec.get("tolerations") or []) + DS_TOLERATIONS
            self.try_create("", "pods", pod)
        current = [p for plist in by_node.values() for p in plist]
        desired = len(eligible_names)
        scheduled = [p for p in current if (p.get("spec") or {}).get("nodeName")]
        ready = [p for p in current if pod_ready(p)]
        updated = [p for p in current if (md(p).get("labels") or {}).get("controller-revision-hash") == rev]

        def write(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["desiredNumberScheduled"] = desired
            st["currentNumberScheduled"] = len(scheduled)
            st["numberMisscheduled"] = 0
            st["numberReady"] = len(ready)
            st["numberAvailable"] = len(ready)
            st["updatedNumberScheduled"] = len(updated)
            st["observedGeneration"] = md(obj).get("generation", 1)
            if desired - len(ready) > 0:
                st["numberUnavailable"] = desired - len(ready)
            else:
                st.pop("numberUnavailable", None)
            for k in ("numberAvailable", "updatedNumberScheduled"):
                if not st[k]:
                    del st[k]

        self._write_status_if_changed("apps", "daemonsets", ds, write)


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
