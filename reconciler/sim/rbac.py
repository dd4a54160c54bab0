"""RBAC of the simulated kube-apiserver: request attributes, the authorizer, the default roles.

As in Kubernetes (``plugin/pkg/auth/authorizer/rbac``, ``pkg/registry/rbac``):

* every request is described by its attributes (user, verb, API group, resource, subresource, namespace,
  name; or a non-resource path) the way ``RequestInfoFactory`` derives them from the URL;
* a user is allowed when a rule of a ClusterRole bound by a ClusterRoleBinding, or of a Role/ClusterRole
  bound by a RoleBinding in the request's namespace, names one of their subjects and matches the attributes
  (``*`` wildcards, ``*/subresource``, ``resourceNames``, ``nonResourceURLs`` with a trailing ``*``);
* creating or updating a Role/ClusterRole needs the permissions it grants, or ``escalate`` on it; a binding
  needs the permissions of the role it references, or ``bind`` on that role
  (:mod:`reconciler.sim.rbac_escalation`);
* members of ``system:masters`` pass everything.

Real clusters bootstrap ``system:discovery``, ``system:basic-user`` and ``system:public-info-viewer`` bound
to every authenticated user, and ``cluster-admin`` bound to ``system:masters``; :func:`bootstrap` does too.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field

from reconciler.sim.auth import UserInfo
from reconciler.sim.store import Store
from reconciler.sim.storebase import AlreadyExists, Obj

RBAC_GROUP = "rbac.authorization.k8s.io"
NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})
_VERB_OF_METHOD = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_NON_RESOURCE_VERBS = {
    "GET": "get",
    "POST": "post",
    "PUT": "put",
    "PATCH": "patch",
    "DELETE": "delete",
    "HEAD": "head",
}


@dataclass(frozen=True)
class Attributes:
    """What one authorization check asks (Kubernetes' authorizer.Attributes)."""

    user: UserInfo
    verb: str
    resource_request: bool
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""

    @property
    def combined_resource(self) -> str:
        return f"{self.resource}/{self.subresource}" if self.subresource else self.resource


@dataclass(frozen=True)
class Decision:
    """The answer to one check; ``role``/``rule`` locate the rule that allowed it (``-1``: none/bypass)."""

    attributes: Attributes
    allowed: bool
    reason: str = ""
    role: str = ""  # "ClusterRole/NAME" or "Role/NS/NAME"
    rule: int = -1


def request_attributes(user: UserInfo, method: str, path: str, query: dict[str, str]) -> Attributes:
    """The attributes of an HTTP request, as kube-apiserver's RequestInfoFactory derives them."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, version, rest = "", parts[1], parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return Attributes(user, _NON_RESOURCE_VERBS.get(method, method.lower()), False, path=path or "/")
    verb = ""
    if rest[0] == "watch":
        verb, rest = "watch", rest[1:]
    namespace = ""
    if rest and rest[0] == "namespaces" and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in NAMESPACE_SUBRESOURCES:
            rest = rest[2:]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if not verb:
        if method in _VERB_OF_METHOD:
            verb = _VERB_OF_METHOD[method]
        elif method == "DELETE":
            verb = "delete" if name else "deletecollection"
        elif name:
            verb = "get"
        else:
            verb = "watch" if query.get("watch", "").lower() in ("1", "true") else "list"
    if verb == "get" and subresource == "exec":
        # A WebSocket exec is a GET, authorized as `create` (AuthorizePodWebsocketUpgradeCreatePermission,
        # on by default since 1.31), like the POST of SPDY.
        verb = "create"
    if verb in ("list", "watch") and not name:
        # a single-object list/watch (fieldSelector=metadata.name=X) is checked against resourceNames
        for term in (query.get("fieldSelector") or "").split(","):
            key, sep, value = term.partition("=")
            if sep and key.strip() == "metadata.name":
                name = value.lstrip("=").strip()
    return Attributes(user, verb, True, group, version, resource, subresource, namespace, name, path)


# ---- rules -----------------------------------------------------------------------------------------------


def rule_allows(attrs: Attributes, rule: Obj) -> bool:
    """One PolicyRule against one request (rbac's RuleAllows)."""
    verbs = rule.get("verbs") or []
    if "*" not in verbs and attrs.verb not in verbs:
        return False
    if not attrs.resource_request:
        for url in rule.get("nonResourceURLs") or []:
            if url == "*" or url == attrs.path or (url.endswith("*") and attrs.path.startswith(url[:-1])):
                return True
        return False
    groups = rule.get("apiGroups") or []
    if "*" not in groups and attrs.api_group not in groups:
        return False
    if not _resource_matches(rule.get("resources") or [], attrs.combined_resource, attrs.subresource):
        return False
    names = rule.get("resourceNames") or []
    return not names or attrs.name in names


def _resource_matches(resources: list[str], combined: str, subresource: str) -> bool:
    for resource in resources:
        if resource in ("*", combined):
            return True
        if subresource and resource == f"*/{subresource}":
            return True
    return False


def _subject_matches(subject: Obj, user: UserInfo, binding_namespace: str) -> bool:
    kind = subject.get("kind")
    name = subject.get("name")
    if kind == "User":
        return bool(name == user.name)
    if kind == "Group":
        return name in user.groups
    if kind == "ServiceAccount":
        return user.service_account == (subject.get("namespace") or binding_namespace, name)
    return False


def _describe(subject: Obj) -> str:
    if subject.get("kind") == "ServiceAccount":
        return f'ServiceAccount "{subject.get("name")}/{subject.get("namespace")}"'
    return f'{subject.get("kind")} "{subject.get("name")}"'


# ---- the authorizer ------------------------------------------------------------------------------------


@dataclass
class RequestScope:
    """The user of the request being served on this thread and every check made for it."""

    user: UserInfo
    request: Attributes | None = None
    checks: list[Decision] = field(default_factory=list)


class Authorizer:
    """RBAC over the store's Roles, ClusterRoles and bindings (system:masters pass everything)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._local = threading.local()

    @contextlib.contextmanager
    def acting_as(self, user: UserInfo, request: Attributes | None = None) -> Iterator[RequestScope]:
        """The request's scope: admission checks made while serving it are recorded into it."""
        scope = RequestScope(user, request)
        previous = getattr(self._local, "scope", None)
        self._local.scope = scope
        try:
            yield scope
        finally:
            self._local.scope = previous

    def current_scope(self) -> RequestScope | None:
        """The scope of the request being served on this thread (None outside one)."""
        scope: RequestScope | None = getattr(self._local, "scope", None)
        return scope

    # ---- authorization

    def bound_rules(self, user: UserInfo, namespace: str) -> Iterator[tuple[str, str, int, Obj]]:
        """(binding description, role ref, rule index, rule) for every rule that applies to the user."""
        for binding in self.store.list_ref(RBAC_GROUP, "clusterrolebindings", None)[0]:
            yield from self._binding_rules(binding, user, "")
        if namespace:
            for binding in self.store.list_ref(RBAC_GROUP, "rolebindings", namespace)[0]:
                yield from self._binding_rules(binding, user, namespace)

    def _binding_rules(
        self, binding: Obj, user: UserInfo, namespace: str
    ) -> Iterator[tuple[str, str, int, Obj]]:
        subject = next(
            (s for s in binding.get("subjects") or [] if _subject_matches(s, user, namespace)), None
        )
        if subject is None:
            return
        ref = binding.get("roleRef") or {}
        role_name = str(ref.get("name") or "")
        if ref.get("kind") == "ClusterRole":
            role = self.store.get_ref(RBAC_GROUP, "clusterroles", "", role_name)
            role_id = f"ClusterRole/{role_name}"
        elif ref.get("kind") == "Role" and namespace:
            role = self.store.get_ref(RBAC_GROUP, "roles", namespace, role_name)
            role_id = f"Role/{namespace}/{role_name}"
        else:
            return
        if role is None:
            return
        kind = "RoleBinding" if namespace else "ClusterRoleBinding"
        where = f' in namespace "{namespace}"' if namespace else ""
        described = f'{kind} "{binding["metadata"]["name"]}"{where} of {ref.get("kind")} "{role_name}" to {_describe(subject)}'
        for index, rule in enumerate(role.get("rules") or []):
            yield described, role_id, index, rule

    def authorize(self, attrs: Attributes) -> Decision:
        """Allowed when a bound rule matches; system:masters always are."""
        if attrs.user.privileged:
            decision = Decision(attrs, True, "system:masters")
        else:
            decision = Decision(attrs, False)
            for described, role_id, index, rule in self.bound_rules(attrs.user, attrs.namespace):
                if rule_allows(attrs, rule):
                    decision = Decision(attrs, True, f"RBAC: allowed by {described}", role_id, index)
                    break
        scope = self.current_scope()
        if scope is not None:
            scope.checks.append(decision)
        return decision

    def authorize_implicit_create(self) -> Decision | None:
        """The ``create`` check of a patch that would create its object (None: nothing to check).

        kube-apiserver's patch handler wraps the create path of a server-side apply in a second
        authorization, verb ``create`` with the request's other attributes, so ``patch`` alone may update
        an object but never create one, dry-run included.
        """
        scope = self.current_scope()
        if scope is None or scope.request is None or scope.user.privileged:
            return None
        return self.authorize(dataclasses.replace(scope.request, verb="create"))


def forbidden_message(attrs: Attributes) -> str:
    """kube-apiserver's 403 message for a request RBAC refused."""
    user = attrs.user.name
    if not attrs.resource_request:
        return f'forbidden: User "{user}" cannot {attrs.verb} path "{attrs.path}"'
    scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
    reason = (
        f'User "{user}" cannot {attrs.verb} resource "{attrs.combined_resource}" in API group '
        f'"{attrs.api_group}" {scope}'
    )
    qualified = f"{attrs.resource}.{attrs.api_group}" if attrs.api_group else attrs.resource
    if attrs.name:
        return f'{qualified} "{attrs.name}" is forbidden: {reason}'
    return f"{qualified} is forbidden: {reason}"


def forbidden_details(attrs: Attributes) -> Obj:
    details: Obj = {}
    if attrs.name:
        details["name"] = attrs.name
    if attrs.api_group:
        details["group"] = attrs.api_group
    if attrs.resource:
        details["kind"] = attrs.resource
    return details


# ---- the default roles of every cluster ------------------------------------------------------------------

_BOOTSTRAP_LABELS = {"kubernetes.io/bootstrapping": "rbac-defaults"}
_AUTOUPDATE = {"rbac.authorization.kubernetes.io/autoupdate": "true"}
DEFAULT_CLUSTER_ROLES: dict[str, list[Obj]] = {
    "cluster-admin": [
        {"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]},
        {"nonResourceURLs": ["*"], "verbs": ["*"]},
    ],
    "system:discovery": [
        {
            "nonResourceURLs": [
                "/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*",
                "/readyz", "/version", "/version/",
            ],
            "verbs": ["get"],
        }
    ],
    "system:basic-user": [
        {
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
            "verbs": ["create"],
        },
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]},
    ],
    "system:public-info-viewer": [
        {"nonResourceURLs": ["/healthz", "/livez", "/readyz", "/version", "/version/"], "verbs": ["get"]}
    ],
}  # fmt: skip
DEFAULT_BINDINGS: dict[str, tuple[str, ...]] = {
    "cluster-admin": ("system:masters",),
    "system:discovery": ("system:authenticated",),
    "system:basic-user": ("system:authenticated",),
    "system:public-info-viewer": ("system:authenticated", "system:unauthenticated"),
}


def bootstrap(store: Store) -> None:
    """The default ClusterRoles and ClusterRoleBindings a real control plane creates at start."""
    meta = {"labels": _BOOTSTRAP_LABELS, "annotations": _AUTOUPDATE}
    for name, rules in DEFAULT_CLUSTER_ROLES.items():
        with contextlib.suppress(AlreadyExists):
            store.create(RBAC_GROUP, "clusterroles", {"metadata": {"name": name, **meta}, "rules": rules})
    for name, groups in DEFAULT_BINDINGS.items():
        subjects = [{"apiGroup": RBAC_GROUP, "kind": "Group", "name": g} for g in groups]
        binding = {
            "metadata": {"name": name, **meta},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": subjects,
        }
        with contextlib.suppress(AlreadyExists):
            store.create(RBAC_GROUP, "clusterrolebindings", binding)


__all__ = [
    "Attributes",
    "Authorizer",
    "Decision",
    "bootstrap",
    "forbidden_details",
    "forbidden_message",
    "request_attributes",
    "rule_allows",
]
