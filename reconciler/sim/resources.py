"""The built-in kinds the simulated API server knows, and which group/versions serve them."""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.sim.storebase import ResourceType

STATUS = ("status",)
RESOURCE_GROUP = "resource.k8s.io"
ADMISSION_GROUP = "admissionregistration.k8s.io"
# resource.k8s.io versions a server can serve, newest first (that order decides the preferred one)
RESOURCE_VERSIONS = ("v1", "v1beta2", "v1beta1", "v1alpha3")


def _t(
    group: str,
    version: str,
    plural: str,
    kind: str,
    namespaced: bool,
    sub: tuple[str, ...] = (),
    short: tuple[str, ...] = (),
    gen: bool = True,
) -> ResourceType:
    return ResourceType(
        group=group,
        version=version,
        plural=plural,
        kind=kind,
        namespaced=namespaced,
        subresources=sub,
        singular=kind.lower(),
        short_names=short,
        has_generation=gen,
    )


def builtin_types() -> list[ResourceType]:
    """Every kind the store keeps (storage versions; events.k8s.io is served from core Events)."""
    return [
        _t("", "v1", "namespaces", "Namespace", False, STATUS, ("ns",), gen=False),
        _t("", "v1", "pods", "Pod", True, ("status", "log", "exec"), ("po",)),
        _t("", "v1", "nodes", "Node", False, STATUS, ("no",), gen=False),
        _t("", "v1", "configmaps", "ConfigMap", True, (), ("cm",), gen=False),
        _t("", "v1", "secrets", "Secret", True, (), gen=False),
        _t("", "v1", "serviceaccounts", "ServiceAccount", True, ("token",), ("sa",), gen=False),
        _t("", "v1", "services", "Service", True, STATUS, ("svc",), gen=False),
        _t("", "v1", "events", "Event", True, (), ("ev",), gen=False),
        _t("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim", True, STATUS, ("pvc",), gen=False),
        _t("apps", "v1", "deployments", "Deployment", True, STATUS, ("deploy",)),
        _t("apps", "v1", "replicasets", "ReplicaSet", True, STATUS, ("rs",)),
        _t("apps", "v1", "daemonsets", "DaemonSet", True, STATUS, ("ds",)),
        _t("apps", "v1", "statefulsets", "StatefulSet", True, STATUS, ("sts",)),
        _t("apps", "v1", "controllerrevisions", "ControllerRevision", True, gen=False),
        _t("batch", "v1", "jobs", "Job", True, STATUS),
        _t("batch", "v1", "cronjobs", "CronJob", True, STATUS, ("cj",)),
        _t("rbac.authorization.k8s.io", "v1", "roles", "Role", True, gen=False),
        _t("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", True, gen=False),
        _t("rbac.authorization.k8s.io", "v1", "clusterroles", "ClusterRole", False, gen=False),
        _t("rbac.authorization.k8s.io", "v1", "clusterrolebindings", "ClusterRoleBinding", False, gen=False),
        _t("coordination.k8s.io", "v1", "leases", "Lease", True, gen=False),
        _t("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy", True, (), ("netpol",)),
        _t(
            "apiextensions.k8s.io",
            "v1",
            "customresourcedefinitions",
            "CustomResourceDefinition",
            False,
            STATUS,
            ("crd", "crds"),
        ),
        _t("scheduling.k8s.io", "v1", "priorityclasses", "PriorityClass", False, (), ("pc",), gen=False),
        _t("node.k8s.io", "v1", "runtimeclasses", "RuntimeClass", False, gen=False),
        _t(ADMISSION_GROUP, "v1", "validatingadmissionpolicies", "ValidatingAdmissionPolicy", False, STATUS),
        _t(
            ADMISSION_GROUP,
            "v1",
            "validatingadmissionpolicybindings",
            "ValidatingAdmissionPolicyBinding",
            False,
        ),
        _t(RESOURCE_GROUP, "v1", "deviceclasses", "DeviceClass", False),
        _t(RESOURCE_GROUP, "v1", "resourceclaims", "ResourceClaim", True, STATUS),
        _t(RESOURCE_GROUP, "v1", "resourceclaimtemplates", "ResourceClaimTemplate", True),
        _t(RESOURCE_GROUP, "v1", "resourceslices", "ResourceSlice", False),
        _t(RESOURCE_GROUP, "v1alpha3", "devicetaintrules", "DeviceTaintRule", False, STATUS),
    ]


@dataclass(frozen=True)
class Served:
    """One resource as a group/version serves it, backed by a stored kind."""

    group: str
    version: str
    rtype: ResourceType  # the stored kind (its group/plural locate the objects)
    kind: str = ""  # kind as served, when it differs from the stored one (never, so far)

    @property
    def plural(self) -> str:
        return self.rtype.plural

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def converted(self) -> bool:
        """Objects need converting between the served and the stored shape."""
        return (self.group, self.version) != (self.rtype.group, self.rtype.version)


# resource.k8s.io kinds per served version, as on kube-apiserver 1.36: DeviceTaintRule is in v1beta2 and
# v1alpha3 (stored in the v1alpha3 shape, which v1beta2 shares), not yet in v1 (1.37 adds it there)
DRA_PLURALS = {
    "v1": ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"),
    "v1beta2": (
        "deviceclasses",
        "resourceclaims",
        "resourceclaimtemplates",
        "resourceslices",
        "devicetaintrules",
    ),
    "v1beta1": ("deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices"),
    "v1alpha3": ("devicetaintrules",),
}
