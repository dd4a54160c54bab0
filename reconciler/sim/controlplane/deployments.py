"""Deployment and ReplicaSet controllers: rolling updates through ReplicaSets keyed by pod-template-hash."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.model.rollouts import deployment_budget
from reconciler.sim.controlplane.objects import (
    controller_of,
    is_terminating,
    labels_match,
    md,
    owner_ref,
    pod_ready,
    set_condition,
    template_hash,
)
from reconciler.sim.controlplane.workload import WorkloadController, active_pods, spec_int
from reconciler.sim.storebase import Obj

REVISION = "deployment.kubernetes.io/revision"


def _revision(rs: Obj) -> int:
    try:
        return int((md(rs).get("annotations") or {}).get(REVISION, "0"))
    except ValueError:
        return 0


def _deployment_conditions(st: dict[str, Any], available: bool, complete: bool, rs_name: str) -> None:
    """The Available and Progressing conditions, worded as the deployment controller words them."""
    if available:
        set_condition(
            st, "Available", "True", "MinimumReplicasAvailable", "Deployment has minimum availability."
        )
    else:
        set_condition(
            st,
            "Available",
            "False",
            "MinimumReplicasUnavailable",
            "Deployment does not have minimum availability.",
        )
    if complete:
        set_condition(
            st,
            "Progressing",
            "True",
            "NewReplicaSetAvailable",
            f'ReplicaSet "{rs_name}" has successfully progressed.',
        )
    else:
        set_condition(
            st, "Progressing", "True", "ReplicaSetUpdated", f'ReplicaSet "{rs_name}" is progressing.'
        )
    for c in st.get("conditions") or []:
        c.pop("lastProbeTime", None)
        c.setdefault("lastUpdateTime", c.get("lastTransitionTime"))


class DeploymentControl(WorkloadController):
    # ------------------------------------------------------------------ deployments

    def deployments(self) -> None:
        all_rs = self.store.list("apps", "replicasets")
        for d in self.store.list("apps", "deployments"):
            if is_terminating(d):
                continue
            try:
                self._deployment(
                    d, [rs for rs in all_rs if (controller_of(rs) or {}).get("uid") == md(d).get("uid")]
                )
            except Exception:  # noqa: BLE001 - one malformed object must not stop the others
                self.errors += 1

    def _deployment(self, d: Obj, owned: list[Obj]) -> None:
        spec = d.get("spec") or {}
        desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        phash = template_hash(spec.get("template") or {})
        found = next(
            (rs for rs in owned if (md(rs).get("labels") or {}).get("pod-template-hash") == phash), None
        )
        old = [rs for rs in owned if rs is not found]
        rolling = deployment_budget(d)  # None: Recreate
        new_rs = self._new_replicaset(d, found, owned, old, desired, phash, rolling)
        if new_rs is None:
            return
        self._roll(new_rs, old, desired, rolling)
        self._write_status(d, new_rs, old, desired, rolling)

    def _new_replicaset(
        self,
        d: Obj,
        found: Obj | None,
        owned: list[Obj],
        old: list[Obj],
        desired: int,
        phash: str,
        rolling: tuple[int, int] | None,
    ) -> Obj | None:
        """The ReplicaSet of the current template, created (or made the newest revision again on a
        rollback) as needed, its revision on the Deployment; None when it could not be created."""
        dmd, spec = md(d), d.get("spec") or {}
        revision = 1 + max(
            [
                int((md(rs).get("annotations") or {}).get("deployment.kubernetes.io/revision", "0"))
                for rs in owned
            ]
            or [0]
        )
        max_surge = (rolling or (0, 0))[0]
        new_rs = found
        if new_rs is None:
            old_total = sum(int((rs.get("spec") or {}).get("replicas") or 0) for rs in old)
            old_pods = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in old)
            if rolling is None:
                initial = desired if old_total == 0 and old_pods == 0 else 0
            else:
                initial = max(0, min(desired, desired + max_surge - old_total))
            tmpl = copy.deepcopy(spec.get("template") or {})
            tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = phash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = phash
            rs_obj = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{dmd['name']}-{phash}",
                    "namespace": dmd["namespace"],
                    "labels": dict(tmpl["metadata"]["labels"]),
                    "annotations": {
                        "deployment.kubernetes.io/revision": str(revision),
                        "deployment.kubernetes.io/desired-replicas": str(desired),
                        "deployment.kubernetes.io/max-replicas": str(desired + max_surge),
                    },
                    "ownerReferences": [owner_ref(d, "apps/v1", "Deployment")],
                },
                "spec": {"replicas": initial, "selector": selector, "template": tmpl},
            }
            new_rs = self.try_create("apps", "replicasets", rs_obj)
            if new_rs is None:
                return None
        elif old and _revision(new_rs) < revision - 1:
            # a rollback to an older template: its ReplicaSet becomes the newest revision again
            new_rs = self._annotate(new_rs, "apps", "replicasets", str(revision)) or new_rs
        if (dmd.get("annotations") or {}).get(REVISION) != str(_revision(new_rs)):
            self._annotate(d, "apps", "deployments", str(_revision(new_rs)))
        return new_rs

    def _roll(self, new_rs: Obj, old: list[Obj], desired: int, rolling: tuple[int, int] | None) -> None:
        """The rollout: the new ReplicaSet up within maxSurge, the old ones down within maxUnavailable
        (Recreate: the old ones to zero first, then the new one up)."""
        old_total = sum(int((rs.get("spec") or {}).get("replicas") or 0) for rs in old)
        old_pods = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in old)
        new_spec = int((new_rs.get("spec") or {}).get("replicas") or 0)
        if rolling is None:
            target_new = desired if old_pods == 0 and old_total == 0 else 0
            if target_new != new_spec:
                self._scale_rs(new_rs, target_new)
            for rs in old:
                if int((rs.get("spec") or {}).get("replicas") or 0):
                    self._scale_rs(rs, 0)
            return
        max_surge, max_unavail = rolling
        allowed = desired + max_surge - old_total - new_spec
        target_new = min(desired, new_spec + max(0, allowed)) if new_spec < desired else desired
        if target_new != new_spec:
            self._scale_rs(new_rs, target_new)
        new_avail = int((new_rs.get("status") or {}).get("availableReplicas") or 0)
        total_avail = new_avail + sum(
            int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in old
        )
        budget = total_avail - (desired - max_unavail)
        for rs in sorted(old, key=lambda r: md(r).get("creationTimestamp") or ""):
            cur = int((rs.get("spec") or {}).get("replicas") or 0)
            if cur == 0:
                continue
            unhealthy = max(0, cur - int((rs.get("status") or {}).get("availableReplicas") or 0))
            step = min(cur, unhealthy + max(0, budget))
            if step > 0:
                self._scale_rs(rs, cur - step)
                budget -= max(0, step - unhealthy)

    def _write_status(
        self, d: Obj, new_rs: Obj, old: list[Obj], desired: int, rolling: tuple[int, int] | None
    ) -> None:
        every = [new_rs, *old]
        replicas = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in every)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas") or 0) for rs in every)
        avail = sum(int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in every)
        updated = int((new_rs.get("status") or {}).get("replicas") or 0)
        new_avail = int((new_rs.get("status") or {}).get("availableReplicas") or 0)
        complete = updated == desired and replicas == desired and avail == desired and new_avail == desired
        available = avail >= desired - (rolling or (0, 0))[1]
        rs_name = str(md(new_rs).get("name"))

        def write(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["observedGeneration"] = md(obj).get("generation", 1)
            st["replicas"] = replicas
            st["updatedReplicas"] = updated
            st["readyReplicas"] = ready
            st["availableReplicas"] = avail
            if replicas - avail > 0:
                st["unavailableReplicas"] = max(0, replicas - avail)
            else:
                st.pop("unavailableReplicas", None)
            for k in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
                if not st[k]:
                    del st[k]
            _deployment_conditions(st, available, complete, rs_name)

        self._write_status_if_changed("apps", "deployments", d, write)

    def _annotate(self, obj: Obj, group: str, plural: str, revision: str) -> Obj | None:
        def fn(o: Obj) -> None:
            o.setdefault("metadata", {}).setdefault("annotations", {})[REVISION] = revision

        return self.try_mutate(group, plural, md(obj)["namespace"], md(obj)["name"], fn)

    def _scale_rs(self, rs: Obj, replicas: int) -> None:
        def fn(obj: Obj) -> None:
            obj.setdefault("spec", {})["replicas"] = replicas

        self.try_mutate("apps", "replicasets", md(rs)["namespace"], md(rs)["name"], fn)

    # ------------------------------------------------------------------ replicasets

    def replicasets(self, pods: list[Obj]) -> None:
        for rs in self.store.list("apps", "replicasets"):
            if is_terminating(rs):
                continue
            owned = self._owned(pods, rs)
            active = active_pods(owned)
            want = spec_int(rs.get("spec") or {}, "replicas", 1)
            ns = md(rs)["namespace"]
            if len(active) < want:
                for _ in range(want - len(active)):
                    pod = self._pod_from_template(
                        (rs.get("spec") or {}).get("template") or {}, ns, rs, "ReplicaSet", "apps/v1"
                    )
                    pod["metadata"]["generateName"] = f"{md(rs)['name']}-"
                    self.try_create("", "pods", pod)
            elif len(active) > want:
                # delete not-ready / unscheduled / newest first, like the real controller
                def rank(p: Obj) -> tuple[int, int, str]:
                    return (
                        0 if not (p.get("spec") or {}).get("nodeName") else 1,
                        1 if pod_ready(p) else 0,
                        "".join(chr(255 - ord(c)) for c in (md(p).get("creationTimestamp") or "")),
                    )

                for p in sorted(active, key=rank)[: len(active) - want]:
                    self.try_delete("", "pods", ns, md(p)["name"])
                active = sorted(active, key=rank)[len(active) - want :]
            ready = [p for p in active if pod_ready(p)]
            tmpl_labels = ((rs.get("spec") or {}).get("template") or {}).get("metadata", {}).get(
                "labels"
            ) or {}

            def write(
                obj: Obj, n: int = len(active), r: int = len(ready), lab: Any = tmpl_labels, act: Any = active
            ) -> None:
                st = obj.setdefault("status", {})
                st["replicas"] = n
                st["fullyLabeledReplicas"] = len(
                    [p for p in act if labels_match({"matchLabels": lab}, md(p).get("labels") or {})]
                )
                st["readyReplicas"] = r
                st["availableReplicas"] = r
                st["observedGeneration"] = md(obj).get("generation", 1)
                for k in ("fullyLabeledReplicas", "readyReplicas", "availableReplicas"):
                    if not st[k]:
                        del st[k]

            self._write_status_if_changed("apps", "replicasets", rs, write)
