"""The simulated kube-controller-manager: workloads → pods, pod claims from templates, claim cleanup."""

from __future__ import annotations

import copy
import math
from typing import Any

from reconciler.sim.controlplane.base import (
    POD_CLAIM_ANNOTATION,
    RESOURCE,
    Component,
    Obj,
    condition,
    controller_of,
    is_terminating,
    labels_match,
    md,
    node_ready,
    now,
    owner_ref,
    pod_done,
    pod_fits_node_selection,
    pod_phase,
    pod_ready,
    set_condition,
    template_hash,
    untolerated_taint,
)

DS_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]


def _int_or_percent(value: Any, total: int, round_up: bool) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        frac = int(value[:-1]) * total / 100
        return math.ceil(frac) if round_up else math.floor(frac)
    return int(value)


def _num(spec: dict[str, Any], key: str, default: int) -> int:
    value = spec.get(key)
    return default if value is None else int(value)


def _active(pods: list[Obj]) -> list[Obj]:
    return [p for p in pods if not is_terminating(p) and not pod_done(p)]


class ControllerManager(Component):
    name = "controller-manager"
    watches = frozenset(
        {
            ("", "namespaces"),
            ("", "pods"),
            ("", "nodes"),
            ("apps", "deployments"),
            ("apps", "replicasets"),
            ("apps", "daemonsets"),
            ("apps", "statefulsets"),
            ("batch", "jobs"),
            (RESOURCE, "resourceclaims"),
            (RESOURCE, "resourceclaimtemplates"),
        }
    )

    def reconcile(self) -> None:
        self.service_accounts()
        pods = self.store.list("", "pods")
        self.deployments()
        self.replicasets(pods)
        self.daemonsets(pods)
        self.statefulsets(pods)
        self.jobs(pods)
        self.pod_claims(self.store.list("", "pods"))

    # ------------------------------------------------------------------ namespaces

    def service_accounts(self) -> None:
        existing = {
            md(sa).get("namespace")
            for sa in self.store.list("", "serviceaccounts")
            if md(sa).get("name") == "default"
        }
        for ns in self.store.list("", "namespaces"):
            name = md(ns).get("name")
            if name in existing or is_terminating(ns):
                continue
            self.try_create(
                "",
                "serviceaccounts",
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": name},
                },
            )

    # ------------------------------------------------------------------ pods from templates

    def _pod_from_template(self, template: Obj, namespace: str, owner: Obj, kind: str, api: str) -> Obj:
        tmpl = copy.deepcopy(template or {})
        tmd = tmpl.get("metadata") or {}
        pod_md: dict[str, Any] = {
            "namespace": namespace,
            "labels": dict(tmd.get("labels") or {}),
            "ownerReferences": [owner_ref(owner, api, kind)],
        }
        if tmd.get("annotations"):
            pod_md["annotations"] = dict(tmd["annotations"])
        spec = tmpl.get("spec") or {}
        spec.setdefault("restartPolicy", "Always")
        spec.setdefault("schedulerName", "default-scheduler")
        spec.setdefault("terminationGracePeriodSeconds", 30)
        spec.setdefault("dnsPolicy", "ClusterFirst")
        spec.setdefault("securityContext", {})
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": pod_md,
            "spec": spec,
            "status": {"phase": "Pending"},
        }

    def _owned(self, pods: list[Obj], owner: Obj) -> list[Obj]:
        uid = md(owner).get("uid")
        ns = md(owner).get("namespace")
        return [
            p for p in pods if md(p).get("namespace") == ns and (controller_of(p) or {}).get("uid") == uid
        ]

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
        dmd, spec = md(d), d.get("spec") or {}
        ns, name = dmd["namespace"], dmd["name"]
        desired = int(spec.get("replicas", 1) if spec.get("replicas") is not None else 1)
        template = spec.get("template") or {}
        phash = template_hash(template)
        new_rs = next(
            (rs for rs in owned if (md(rs).get("labels") or {}).get("pod-template-hash") == phash), None
        )
        old = [rs for rs in owned if rs is not new_rs]
        revision = 1 + max(
            [
                int((md(rs).get("annotations") or {}).get("deployment.kubernetes.io/revision", "0"))
                for rs in owned
            ]
            or [0]
        )
        strategy = spec.get("strategy") or {}
        recreate = strategy.get("type") == "Recreate"
        ru = strategy.get("rollingUpdate") or {}
        max_surge = _int_or_percent(ru.get("maxSurge", "25%"), desired, True)
        max_unavail = _int_or_percent(ru.get("maxUnavailable", "25%"), desired, False)
        if max_surge == 0 and max_unavail == 0:
            max_unavail = 1
        old_total = sum(int((rs.get("spec") or {}).get("replicas") or 0) for rs in old)
        old_pods = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in old)
        if new_rs is None:
            if recreate:
                initial = desired if old_total == 0 and old_pods == 0 else 0
            else:
                initial = max(0, min(desired, desired + max_surge - old_total))
            tmpl = copy.deepcopy(template)
            tmpl.setdefault("metadata", {}).setdefault("labels", {})["pod-template-hash"] = phash
            selector = copy.deepcopy(spec.get("selector") or {})
            selector.setdefault("matchLabels", {})["pod-template-hash"] = phash
            rs_obj = {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "metadata": {
                    "name": f"{name}-{phash}",
                    "namespace": ns,
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
                return
        new_spec = int((new_rs.get("spec") or {}).get("replicas") or 0)
        new_avail = int((new_rs.get("status") or {}).get("availableReplicas") or 0)
        # scale the new ReplicaSet
        if recreate:
            target_new = desired if old_pods == 0 and old_total == 0 else 0
        else:
            allowed = desired + max_surge - old_total - new_spec
            target_new = min(desired, new_spec + max(0, allowed)) if new_spec < desired else desired
        if target_new != new_spec:
            self._scale_rs(new_rs, target_new)
        # scale old ReplicaSets down
        if recreate:
            for rs in old:
                if int((rs.get("spec") or {}).get("replicas") or 0):
                    self._scale_rs(rs, 0)
        else:
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
        # status
        every = [new_rs, *old]
        replicas = sum(int((rs.get("status") or {}).get("replicas") or 0) for rs in every)
        ready = sum(int((rs.get("status") or {}).get("readyReplicas") or 0) for rs in every)
        avail = sum(int((rs.get("status") or {}).get("availableReplicas") or 0) for rs in every)
        updated = int((new_rs.get("status") or {}).get("replicas") or 0)
        complete = updated == desired and replicas == desired and avail == desired and new_avail == desired
        rs_name = md(new_rs).get("name")

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
            if avail >= desired - max_unavail:
                set_condition(
                    st,
                    "Available",
                    "True",
                    "MinimumReplicasAvailable",
                    "Deployment has minimum availability.",
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

        self._write_status_if_changed("apps", "deployments", d, write)

    def _scale_rs(self, rs: Obj, replicas: int) -> None:
        def fn(obj: Obj) -> None:
            obj.setdefault("spec", {})["replicas"] = replicas

        self.try_mutate("apps", "replicasets", md(rs)["namespace"], md(rs)["name"], fn)

    def _write_status_if_changed(self, group: str, plural: str, obj: Obj, fn: Any) -> None:
        trial = copy.deepcopy(obj)
        fn(trial)
        if trial.get("status") != obj.get("status"):
            self.try_mutate(group, plural, md(obj).get("namespace", ""), md(obj)["name"], fn, status=True)

    # ------------------------------------------------------------------ replicasets

    def replicasets(self, pods: list[Obj]) -> None:
        for rs in self.store.list("apps", "replicasets"):
            if is_terminating(rs):
                continue
            owned = self._owned(pods, rs)
            active = _active(owned)
            want = _num(rs.get("spec") or {}, "replicas", 1)
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

    # ------------------------------------------------------------------ statefulsets (minimal)

    def statefulsets(self, pods: list[Obj]) -> None:
        for sts in self.store.list("apps", "statefulsets"):
            if is_terminating(sts):
                continue
            ns, name = md(sts)["namespace"], md(sts)["name"]
            spec = sts.get("spec") or {}
            want = _num(spec, "replicas", 1)
            template = spec.get("template") or {}
            rev = f"{name}-{template_hash(template)}"
            owned = {md(p)["name"]: p for p in self._owned(pods, sts) if not is_terminating(p)}
            parallel = spec.get("podManagementPolicy") == "Parallel"
            for i in range(want):
                pname = f"{name}-{i}"
                p = owned.get(pname)
                if p is None:
                    pod = self._pod_from_template(template, ns, sts, "StatefulSet", "apps/v1")
                    pod["metadata"]["name"] = pname
                    pod["metadata"]["labels"].update(
                        {
                            "statefulset.kubernetes.io/pod-name": pname,
                            "controller-revision-hash": rev,
                            "apps.kubernetes.io/pod-index": str(i),
                        }
                    )
                    pod["spec"].setdefault("hostname", pname)
                    if spec.get("serviceName"):
                        pod["spec"].setdefault("subdomain", spec["serviceName"])
                    self.try_create("", "pods", pod)
                    if not parallel:
                        break
                elif pod_phase(p) == "Failed":
                    self.try_delete("", "pods", ns, pname)
                    break
                elif not parallel and not pod_ready(p):
                    break
            for pname in owned:
                idx = pname.rsplit("-", 1)[-1]
                if idx.isdigit() and int(idx) >= want:
                    self.try_delete("", "pods", ns, pname)
            active = [
                p
                for n, p in owned.items()
                if n.rsplit("-", 1)[-1].isdigit() and int(n.rsplit("-", 1)[-1]) < want
            ]
            outdated = sorted(
                [p for p in active if (md(p).get("labels") or {}).get("controller-revision-hash") != rev],
                key=lambda p: -int(md(p)["name"].rsplit("-", 1)[-1]),
            )
            if outdated and all(pod_ready(p) for p in active) and len(active) == want:
                self.try_delete("", "pods", ns, md(outdated[0])["name"])
            ready = [p for p in active if pod_ready(p)]
            updated = [
                p for p in active if (md(p).get("labels") or {}).get("controller-revision-hash") == rev
            ]

            def write(obj: Obj, a: Any = active, r: Any = ready, u: Any = updated, rv: str = rev) -> None:
                st = obj.setdefault("status", {})
                st["replicas"] = len(a)
                st["readyReplicas"] = len(r)
                st["availableReplicas"] = len(r)
                st["currentReplicas"] = len(u)
                st["updatedReplicas"] = len(u)
                st["currentRevision"] = rv
                st["updateRevision"] = rv
                st["observedGeneration"] = md(obj).get("generation", 1)
                st["collisionCount"] = 0

            self._write_status_if_changed("apps", "statefulsets", sts, write)

    # ------------------------------------------------------------------ jobs

    def jobs(self, pods: list[Obj]) -> None:
        for job in self.store.list("batch", "jobs"):
            if is_terminating(job):
                continue
            ns, name = md(job)["namespace"], md(job)["name"]
            spec = job.get("spec") or {}
            completions = _num(spec, "completions", 1)
            parallelism = _num(spec, "parallelism", 1)
            backoff = _num(spec, "backoffLimit", 6)
            owned = self._owned(pods, job)
            succeeded = len([p for p in owned if pod_phase(p) == "Succeeded"])
            failed = len([p for p in owned if pod_phase(p) == "Failed"])
            active = [p for p in owned if not pod_done(p) and not is_terminating(p)]
            st0 = job.get("status") or {}
            finished = any(
                c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
                for c in st0.get("conditions") or []
            )
            if not finished and not spec.get("suspend"):
                want = min(parallelism, completions - succeeded) - len(active)
                if failed > backoff:
                    want = 0
                uid = md(job).get("uid")
                for _ in range(max(0, want)):
                    template = copy.deepcopy(spec.get("template") or {})
                    pod = self._pod_from_template(template, ns, job, "Job", "batch/v1")
                    pod["metadata"]["generateName"] = f"{name}-"
                    pod["metadata"]["labels"].update(
                        {
                            "batch.kubernetes.io/job-name": name,
                            "job-name": name,
                            "batch.kubernetes.io/controller-uid": uid,
                            "controller-uid": uid,
                        }
                    )
                    if pod["spec"].get("restartPolicy") == "Always":
                        pod["spec"]["restartPolicy"] = "Never"
                    self.try_create("", "pods", pod)

            def write(
                obj: Obj,
                s: int = succeeded,
                f: int = failed,
                a: int = len(active),
                completions: int = completions,
                backoff: int = backoff,
            ) -> None:
                st = obj.setdefault("status", {})
                st.setdefault("startTime", now())
                for k, v in (("active", a), ("succeeded", s), ("failed", f)):
                    if v:
                        st[k] = v
                    else:
                        st.pop(k, None)
                st["ready"] = 0
                if s >= completions and not any(
                    c.get("type") == "Complete" for c in st.get("conditions") or []
                ):
                    st["completionTime"] = now()
                    set_condition(
                        st,
                        "SuccessCriteriaMet",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    )
                    set_condition(
                        st,
                        "Complete",
                        "True",
                        "CompletionsReached",
                        "Reached expected number of succeeded pods",
                    )
                elif f > backoff and not any(c.get("type") == "Failed" for c in st.get("conditions") or []):
                    set_condition(
                        st,
                        "FailureTarget",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )
                    set_condition(
                        st,
                        "Failed",
                        "True",
                        "BackoffLimitExceeded",
                        "Job has reached the specified backoff limit",
                    )

            self._write_status_if_changed("batch", "jobs", job, write)

    # ------------------------------------------------------------------ resource claims for pods

    def pod_claims(self, pods: list[Obj]) -> None:
        claims = self.store.list(RESOURCE, "resourceclaims")
        by_owner: dict[tuple[str, str], Obj] = {}
        for c in claims:
            owner = controller_of(c)
            ann = (md(c).get("annotations") or {}).get(POD_CLAIM_ANNOTATION)
            if owner and owner.get("kind") == "Pod" and ann:
                by_owner[(str(owner.get("uid")), ann)] = c
        pods_by_uid = {md(p).get("uid"): p for p in pods}
        for pod in pods:
            if is_terminating(pod) or pod_done(pod):
                continue
            entries = (pod.get("spec") or {}).get("resourceClaims") or []
            statuses = {
                s.get("name"): s for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
            }
            ns, pname, puid = md(pod)["namespace"], md(pod)["name"], md(pod).get("uid")
            new_status: list[dict[str, Any]] = []
            changed = False
            for entry in entries:
                cname = entry.get("name")
                tname = entry.get("resourceClaimTemplateName")
                if not tname:
                    continue
                if cname in statuses:
                    new_status.append(statuses[cname])
                    continue
                existing: Obj | None = by_owner.get((str(puid), str(cname)))
                if existing is None:
                    tmpl = self.store.get(RESOURCE, "resourceclaimtemplates", ns, tname)
                    if tmpl is None:
                        continue  # real controller-manager: retries until the template exists
                    existing = self._create_claim(pod, str(cname), tmpl)
                    if existing is None:
                        continue
                new_status.append({"name": cname, "resourceClaimName": md(existing)["name"]})
                changed = True
            if changed:
                order = [e.get("name") for e in entries]
                final = sorted(
                    new_status, key=lambda s: order.index(s.get("name")) if s.get("name") in order else 99
                )

                def fn(obj: Obj, f: list[dict[str, Any]] = final) -> None:
                    obj.setdefault("status", {})["resourceClaimStatuses"] = f

                self.try_mutate("", "pods", ns, pname, fn, status=True)
        # generated claims of finished pods are deleted (their owner GC covers deleted pods)
        for (puid, _), claim in by_owner.items():
            owner_pod = pods_by_uid.get(puid)
            if owner_pod is not None and pod_done(owner_pod) and not is_terminating(claim):
                self.try_delete(RESOURCE, "resourceclaims", md(claim)["namespace"], md(claim)["name"])

    def _create_claim(self, pod: Obj, pod_claim_name: str, tmpl: Obj) -> Obj | None:
        base = f"{md(pod)['name']}-{pod_claim_name}"[:57]
        tspec = tmpl.get("spec") or {}
        tmd = tspec.get("metadata") or {}
        annotations = dict(tmd.get("annotations") or {})
        annotations[POD_CLAIM_ANNOTATION] = pod_claim_name
        claim: Obj = {
            "apiVersion": f"{RESOURCE}/v1",
            "kind": "ResourceClaim",
            "metadata": {
                "generateName": f"{base}-",
                "namespace": md(pod)["namespace"],
                "annotations": annotations,
                "ownerReferences": [owner_ref(pod, "v1", "Pod")],
            },
            "spec": copy.deepcopy(tspec.get("spec") or {}),
        }
        if tmd.get("labels"):
            claim["metadata"]["labels"] = dict(tmd["labels"])
        return self.try_create(RESOURCE, "resourceclaims", claim)


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


__all__ = ["ControllerManager", "condition", "node_ready"]
