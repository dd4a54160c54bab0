"""RBAC escalation prevention of the simulated kube-apiserver: the admission of RBAC writes.

As ``pkg/registry/rbac`` does it: creating or updating a Role or ClusterRole needs every permission it
grants (or ``escalate`` on it; an ``aggregationRule`` needs cluster-admin), a RoleBinding or
ClusterRoleBinding needs the permissions of the role it references (or ``bind`` on that role). The
permissions held are the writer's bound rules (:class:`reconciler.sim.rbac.Authorizer`), compared rule
part by rule part as rbac's ``ruleCovers``; the refusal lists the missing rules as kube-apiserver does.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from reconciler.sim.auth import UserInfo
from reconciler.sim.rbac import RBAC_GROUP, Attributes, Authorizer
from reconciler.sim.storebase import Forbidden, NotFound, Obj, ResourceType

__all__ = ["EscalationCheck"]


class EscalationCheck:
    """Admission of RBAC writes: refuse granting what the writer does not hold."""

    def __init__(self, authz: Authorizer) -> None:
        self.authz = authz

    def admit(self, rtype: ResourceType, obj: Obj, old: Obj | None) -> None:
        """Refuse a Role/ClusterRole granting more than its writer holds, or a binding to such a role."""
        scope = self.authz.current_scope()
        if rtype.group != RBAC_GROUP or scope is None or scope.user.privileged:
            return
        user = scope.user
        md = obj.get("metadata") or {}
        name = str(md.get("name") or "")
        namespace = str(md.get("namespace") or "") if rtype.namespaced else ""
        if rtype.plural in ("roles", "clusterroles"):
            # `escalate` is checked with the request's own name: none for a POST (kube-apiserver's
            # RoleEscalationAuthorized reads the RequestInfo), so resourceNames only help PUT and PATCH
            url_name = scope.request.name if scope.request is not None else name
            if self._allowed(user, "escalate", rtype.plural, namespace, url_name):
                return
            rules = list(obj.get("rules") or [])
            if rtype.plural == "clusterroles" and (
                obj.get("aggregationRule") or (old or {}).get("aggregationRule")
            ):
                self._confirm(
                    user,
                    namespace,
                    [
                        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
                        {"verbs": ["*"], "nonResourceURLs": ["*"]},
                    ],
                    rtype,
                    name,
                    "must have cluster-admin privileges to use the aggregationRule",
                )
            self._confirm(user, namespace, rules, rtype, name)
        elif rtype.plural in ("rolebindings", "clusterrolebindings"):
            ref = obj.get("roleRef") or {}
            ref_plural = "clusterroles" if ref.get("kind") == "ClusterRole" else "roles"
            if self._allowed(user, "bind", ref_plural, namespace, str(ref.get("name") or "")):
                return
            if ref_plural == "clusterroles":
                role = self.authz.store.get_ref(RBAC_GROUP, "clusterroles", "", str(ref.get("name") or ""))
            else:
                role = self.authz.store.get_ref(RBAC_GROUP, "roles", namespace, str(ref.get("name") or ""))
            if role is None:
                raise NotFound(f'{ref_plural}.{RBAC_GROUP} "{ref.get("name")}" not found', name=name)
            self._confirm(user, namespace, list(role.get("rules") or []), rtype, name)

    def _allowed(self, user: UserInfo, verb: str, plural: str, namespace: str, name: str) -> bool:
        attrs = Attributes(user, verb, True, RBAC_GROUP, "*", plural, "", namespace, name)
        return self.authz.authorize(attrs).allowed

    def _confirm(
        self,
        user: UserInfo,
        namespace: str,
        rules: Iterable[Obj],
        rtype: ResourceType,
        name: str,
        message: str = "",
    ) -> None:
        owned = [rule for _, _, _, rule in self.authz.bound_rules(user, namespace)]
        missing = [
            part for rule in rules for part in _split_rule(rule) if not any(_covers(o, part) for o in owned)
        ]
        if not missing:
            return
        groups = "[" + " ".join(f'"{g}"' for g in user.groups) + "]"
        detail = message or (
            f'user "{user.name}" (groups={groups}) is attempting to grant RBAC permissions not currently held:\n'
            + _compact(missing)
        )
        raise Forbidden(f'{rtype.group_resource} "{name}" is forbidden: {detail}', name=name)


def _split_rule(rule: Obj) -> Iterator[Obj]:
    """A rule as its smallest parts (one verb, group, resource and name each), to compare rule sets."""
    verbs = rule.get("verbs") or []
    if rule.get("nonResourceURLs"):
        for verb in verbs:
            for url in rule["nonResourceURLs"]:
                yield {"verbs": [verb], "nonResourceURLs": [url]}
        return
    for verb in verbs:
        for group in rule.get("apiGroups") or []:
            for resource in rule.get("resources") or []:
                for name in rule.get("resourceNames") or [""]:
                    part: Obj = {"verbs": [verb], "apiGroups": [group], "resources": [resource]}
                    if name:
                        part["resourceNames"] = [name]
                    yield part


def _covers(owner: Obj, servant: Obj) -> bool:
    """Whether ``owner`` (a rule) grants everything ``servant`` (a split rule) does (rbac's ruleCovers)."""

    def has(values: list[str], wanted: str, star: str = "*") -> bool:
        return star in values or wanted in values

    verb = servant["verbs"][0]
    if not has(owner.get("verbs") or [], verb):
        return False
    if "nonResourceURLs" in servant:
        url = servant["nonResourceURLs"][0]
        return any(
            u == "*" or u == url or (u.endswith("*") and url.startswith(u[:-1]))
            for u in owner.get("nonResourceURLs") or []
        )
    if not has(owner.get("apiGroups") or [], servant["apiGroups"][0]):
        return False
    resource = servant["resources"][0]
    owned = owner.get("resources") or []
    sub = resource.split("/", 1)[1] if "/" in resource else ""
    if not (has(owned, resource) or (sub and f"*/{sub}" in owned)):
        return False
    names = owner.get("resourceNames") or []
    return not names or bool(servant.get("resourceNames")) and servant["resourceNames"][0] in names


def _compact(rules: list[Obj]) -> str:
    """The missing rules as kube-apiserver prints them, one per line."""

    def quoted(values: list[str]) -> str:
        return "[" + " ".join(f'"{v}"' for v in values) + "]"

    merged: dict[tuple[Any, ...], set[str]] = {}
    for rule in rules:
        key = (
            tuple(rule.get("apiGroups") or ()),
            tuple(rule.get("resources") or ()),
            tuple(rule.get("resourceNames") or ()),
            tuple(rule.get("nonResourceURLs") or ()),
        )
        merged.setdefault(key, set()).update(rule.get("verbs") or ())
    lines = []
    for (groups, resources, names, urls), verbs in merged.items():
        fields = []
        if groups or resources:
            fields += [f"APIGroups:{quoted(list(groups))}", f"Resources:{quoted(list(resources))}"]
        if names:
            fields.append(f"ResourceNames:{quoted(list(names))}")
        if urls:
            fields.append(f"NonResourceURLs:{quoted(list(urls))}")
        fields.append(f"Verbs:{quoted(sorted(verbs))}")
        lines.append("{" + ", ".join(fields) + "}")
    return "\n".join(lines)
