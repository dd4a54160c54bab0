"""What every workload controller of the simulated controller-manager shares: pods from templates, owners."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.objects import controller_of, is_terminating, md, owner_ref, pod_done
from reconciler.sim.storebase import Obj


def spec_int(spec: dict[str, Any], key: str, default: int) -> int:
    """An integer field of a workload's spec (``default`` when unset)."""
    value = spec.get(key)
    return default if value is None else int(value)


def active_pods(pods: list[Obj]) -> list[Obj]:
    """Pods neither terminating nor finished."""
    return [p for p in pods if not is_terminating(p) and not pod_done(p)]


class WorkloadController(Component):
    """Base of the controller-manager parts: helpers to make and find the pods of a workload."""

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

    def _write_status_if_changed(self, group: str, plural: str, obj: Obj, fn: Any) -> None:
        trial = copy.deepcopy(obj)
        fn(trial)
        if trial.get("status") != obj.get("status"):
            self.try_mutate(group, plural, md(obj).get("namespace", ""), md(obj)["name"], fn, status=True)

    # ------------------------------------------------------------------ controller revisions

    def _revisions(self, owner: Obj) -> list[Obj]:
        uid = md(owner).get("uid")
        return [
            r
            for r in self.store.list("apps", "controllerrevisions", md(owner).get("namespace"))
            if (controller_of(r) or {}).get("uid") == uid
        ]

    def _sync_revision(self, owner: Obj, kind: str, name: str, rev_hash: str) -> int:
        """Make ``name`` the owner's newest ControllerRevision, as the DaemonSet and StatefulSet
        controllers do: created with the next revision number, or renumbered when an older template
        comes back (a rollback). Keeps ``revisionHistoryLimit`` unused revisions. Returns its number."""
        revisions = self._revisions(owner)
        newest = max((int(r.get("revision") or 0) for r in revisions), default=0)
        mine = next((r for r in revisions if md(r).get("name") == name), None)
        ns = md(owner)["namespace"]
        if mine is None:
            template = copy.deepcopy((owner.get("spec") or {}).get("template") or {})
            labels = dict((template.get("metadata") or {}).get("labels") or {})
            labels["controller-revision-hash"] = rev_hash
            template["$patch"] = "replace"
            created = self.try_create(
                "apps",
                "controllerrevisions",
                {
                    "apiVersion": "apps/v1",
                    "kind": "ControllerRevision",
                    "metadata": {
                        "name": name,
                        "namespace": ns,
                        "labels": labels,
                        "ownerReferences": [owner_ref(owner, "apps/v1", kind)],
                    },
                    "data": {"spec": {"template": template}},
                    "revision": newest + 1,
                },
            )
            number = newest + 1 if created is not None else 0
        elif int(mine.get("revision") or 0) < newest:
            number = newest + 1

            def renumber(obj: Obj) -> None:
                obj["revision"] = number

            self.try_mutate("apps", "controllerrevisions", ns, name, renumber)
        else:
            number = int(mine.get("revision") or 0)
        limit = int((owner.get("spec") or {}).get("revisionHistoryLimit", 10))
        old = sorted(
            (r for r in revisions if md(r).get("name") != name), key=lambda r: int(r.get("revision") or 0)
        )
        for r in old[: max(0, len(old) - limit)]:
            self.try_delete("apps", "controllerrevisions", ns, md(r)["name"])
        return number
