"""StatefulSet (ordered pods, ordinal names) and Job controllers."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.sim.controlplane.base import (
    Obj,
    is_terminating,
    md,
    now,
    pod_done,
    pod_phase,
    pod_ready,
    set_condition,
    template_hash,
)
from reconciler.sim.controlplane.workload import WorkloadController, _num


class StatefulSetJobControl(WorkloadController):
    # ------------------------------------------------------------------ statefulsets (minimal)

    def statefulsets(self, pods: list[Obj]) -> None:
        for sts in self.store.list("apps", "statefulsets"):
            if is_terminating(sts):
                continue
            ns, name = md(sts)["namespace"], md(sts)["name"]
            spec = sts.get("spec") or {}
            want = _num(spec, "replicas", 1)
            template = spec.get("template") or {}
            rev_hash = template_hash(template)
            rev = f"{name}-{rev_hash}"
            self._sync_revision(sts, "StatefulSet", rev, rev_hash)
            # a terminating pod keeps its ordinal until it is gone: only then is it recreated
            owned = {md(p)["name"]: p for p in self._owned(pods, sts)}
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
                elif is_terminating(p):
                    if not parallel:
                        break
                elif pod_phase(p) == "Failed":
                    self.try_delete("", "pods", ns, pname)
                    break
                elif not parallel and not pod_ready(p):
                    break
            for pname, p in owned.items():
                idx = pname.rsplit("-", 1)[-1]
                if idx.isdigit() and int(idx) >= want and not is_terminating(p):
                    self.try_delete("", "pods", ns, pname)
            active = [
                p
                for n, p in owned.items()
                if n.rsplit("-", 1)[-1].isdigit()
                and int(n.rsplit("-", 1)[-1]) < want
                and not is_terminating(p)
            ]
            strategy = spec.get("updateStrategy") or {}
            partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
            # rolling update: highest ordinal first, one at a time, only while every pod is Ready
            outdated = sorted(
                [
                    p
                    for p in active
                    if (md(p).get("labels") or {}).get("controller-revision-hash") != rev
                    and int(md(p)["name"].rsplit("-", 1)[-1]) >= partition
                ],
                key=lambda p: -int(md(p)["name"].rsplit("-", 1)[-1]),
            )
            if (
                outdated
                and strategy.get("type", "RollingUpdate") == "RollingUpdate"
                and all(pod_ready(p) for p in active)
                and len(active) == want
            ):
                self.try_delete("", "pods", ns, md(outdated[0])["name"])
            ready = [p for p in active if pod_ready(p)]
            updated = [
                p for p in active if (md(p).get("labels") or {}).get("controller-revision-hash") == rev
            ]
            # currentRevision moves to the update revision once every replica runs it
            previous = (sts.get("status") or {}).get("currentRevision")
            current_rev = rev if len(updated) == want or not previous else str(previous)
            current = [
                p
                for p in active
                if (md(p).get("labels") or {}).get("controller-revision-hash") == current_rev
            ]

            def write(
                obj: Obj,
                a: Any = active,
                r: Any = ready,
                u: Any = updated,
                c: Any = current,
                rv: str = rev,
                cur: str = current_rev,
            ) -> None:
                st = obj.setdefault("status", {})
                st["replicas"] = len(a)
                st["readyReplicas"] = len(r)
                st["availableReplicas"] = len(r)
                st["currentReplicas"] = len(c)
                st["updatedReplicas"] = len(u)
                st["currentRevision"] = cur
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
