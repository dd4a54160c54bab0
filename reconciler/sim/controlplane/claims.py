"""ResourceClaims for pods: generated from ResourceClaimTemplates, deleted when their pod finishes."""

from __future__ import annotations

import copy
from typing import Any

from reconciler.sim.controlplane.base import Component
from reconciler.sim.controlplane.objects import (
    POD_CLAIM_ANNOTATION,
    RESOURCE,
    controller_of,
    is_terminating,
    md,
    owner_ref,
    pod_done,
)
from reconciler.sim.storebase import Obj


class PodClaimControl(Component):
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
