"""StatefulSet (ordered pods, ordinal names) and Job controllers."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.sim.controlplane.objects import (
    is_terminating,
    md,
    now,
    pod_done,
    pod_phase,
    pod_ready,
    set_condition,
    template_hash,
)
from reconciler.sim.controlplane.workload import WorkloadController, spec_int
from reconciler.sim.storebase import Obj


class StatefulSetJobControl(WorkloadController):
    # ------------------------------------------------------------------ statefulsets (minimal)

    def statefulsets(self, pods: list[Obj]) -> None:
        for sts in self.store.list("apps", "statefulsets"):
            if not is_terminating(sts):
                self._statefulset(sts, pods)

    def _statefulset(self, sts: Obj, pods: list[Obj]) -> None:
        ns, name = md(sts)["namespace"], md(sts)["name"]
        spec = sts.get("spec") or {}
        want = spec_int(spec, "replicas", 1)
        rev_hash = template_hash(spec.get("template") or {})
        rev = f"{name}-{rev_hash}"
        self._sync_revision(sts, "StatefulSet", rev, rev_hash)
        # a terminating pod keeps its ordinal until it is gone: only then is it recreated
        owned = {md(p)["name"]: p for p in self._owned(pods, sts)}
        self._create_ordinals(sts, owned, want, rev)
        for pname, p in owned.items():
            idx = pname.rsplit("-", 1)[-1]
            if idx.isdigit() and int(idx) >= want and not is_terminating(p):
                self.try_delete("", "pods", ns, pname)
        active = [
            p
            for n, p in owned.items()
            if n.rsplit("-", 1)[-1].isdigit() and int(n.rsplit("-", 1)[-1]) < want and not is_terminating(p)
        ]
        self._roll_ordinals(sts, active, want, rev)
        self._write_statefulset_status(sts, active, want, rev)

    def _create_ordinals(self, sts: Obj, owned: dict[str, Obj], want: int, rev: str) -> None:
        """Pods by ordinal, lowest first: OrderedReady waits for each to be Ready, Parallel does not."""
        ns, name = md(sts)["namespace"], md(sts)["name"]
        spec = sts.get("spec") or {}
        parallel = spec.get("podManagementPolicy") == "Parallel"
        for i in range(want):
            pname = f"{name}-{i}"
            p = owned.get(pname)
            if p is None:
                pod = self._pod_from_template(spec.get("template") or {}, ns, sts, "StatefulSet", "apps/v1")
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

    def _roll_ordinals(self, sts: Obj, active: list[Obj], want: int, rev: str) -> None:
        """The rolling update: highest ordinal first, one at a time, only while every pod is Ready."""
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        partition = int((strategy.get("rollingUpdate") or {}).get("partition") or 0)
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
            self.try_delete("", "pods", md(sts)["namespace"], md(outdated[0])["name"])

    def _write_statefulset_status(self, sts: Obj, active: list[Obj], want: int, rev: str) -> None:
        ready = [p for p in active if pod_ready(p)]
        updated = [p for p in active if (md(p).get("labels") or {}).get("controller-revision-hash") == rev]
        # currentRevision moves to the update revision once every replica runs it
        previous = (sts.get("status") or {}).get("currentRevision")
        current_rev = rev if len(updated) == want or not previous else str(previous)
        current = [
            p for p in active if (md(p).get("labels") or {}).get("controller-revision-hash") == current_rev
        ]

        def write(obj: Obj) -> None:
            st = obj.setdefault("status", {})
            st["replicas"] = len(active)
            st["readyReplicas"] = len(ready)
            st["availableReplicas"] = len(ready)
            st["currentReplicas"] = len(current)
            st["updatedReplicas"] = len(updated)
            st["currentRevision"] = current_rev
            st["updateRevision"] = rev
            st["observedGeneration"] = md(obj).get("generation", 1)
            st["collisionCount"] = 0

        self._write_status_if_changed("apps", "statefulsets", sts, write)

    # ------------------------------------------------------------------ jobs

    def jobs(self, pods: list[Obj]) -> None:
        for job in self.store.list("batch", "jobs"):
            if not is_terminating(job):
                self._job(job, pods)

    def _job(self, job: Obj, pods: list[Obj]) -> None:
        spec = job.get("spec") or {}
        completions = spec_int(spec, "completions", 1)
        backoff = spec_int(spec, "backoffLimit", 6)
        owned = self._owned(pods, job)
        succeeded = len([p for p in owned if pod_phase(p) == "Succeeded"])
        failed = len([p for p in owned if pod_phase(p) == "Failed"])
        active = len([p for p in owned if not pod_done(p) and not is_terminating(p)])
        finished = any(
            c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
            for c in (job.get("status") or {}).get("conditions") or []
        )
        if not finished and not spec.get("suspend") and failed <= backoff:
            want = min(spec_int(spec, "parallelism", 1), completions - succeeded) - active
            for _ in range(max(0, want)):
                self.try_create("", "pods", self._job_pod(job))

        def write(obj: Obj) -> None:
            _job_status(obj.setdefault("status", {}), succeeded, failed, active, completions, backoff)

        self._write_status_if_changed("batch", "jobs", job, write)

    def _job_pod(self, job: Obj) -> Obj:
        name, uid = md(job)["name"], md(job).get("uid")
        template = copy.deepcopy((job.get("spec") or {}).get("template") or {})
        pod = self._pod_from_template(template, md(job)["namespace"], job, "Job", "batch/v1")
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
        return pod


def _job_status(
    st: dict[str, Any], succeeded: int, failed: int, active: int, completions: int, backoff: int
) -> None:
    """A Job's counts, and Complete or Failed (with the success/failure target) once it is."""
    st.setdefault("startTime", now())
    for k, v in (("active", active), ("succeeded", succeeded), ("failed", failed)):
        if v:
            st[k] = v
        else:
            st.pop(k, None)
    st["ready"] = 0
    conditions = st.get("conditions") or []
    if succeeded >= completions and not any(c.get("type") == "Complete" for c in conditions):
        st["completionTime"] = now()
        for ctype in ("SuccessCriteriaMet", "Complete"):
            set_condition(
                st, ctype, "True", "CompletionsReached", "Reached expected number of succeeded pods"
            )
    elif failed > backoff and not any(c.get("type") == "Failed" for c in conditions):
        for ctype in ("FailureTarget", "Failed"):
            set_condition(
                st, ctype, "True", "BackoffLimitExceeded", "Job has reached the specified backoff limit"
            )
