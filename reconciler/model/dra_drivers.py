"""Driver workloads: how a DaemonSet, Deployment or StatefulSet is known to run a DRA driver (its labels,
the kubelet plugin directories it mounts, a driver name it carries, `drivers:` of dra-gitops.yaml), its
driver, role and canary, and the digests of what its pods run and read (template, ConfigMaps, Secrets).

Part of :mod:`reconciler.model.dra` (which re-exports every name here); same defensive reading rules.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from reconciler.errors import ManifestError
from reconciler.model.dra_workloads import pod_spec_of
from reconciler.model.driver_rollout import ROLLOUT_ANNOTATION, RolloutSpec
from reconciler.model.readers import (
    annotations_of,
    as_dict,
    as_dicts,
    as_list,
    as_str,
    dig,
    kind_of,
    labels_of,
)
from reconciler.model.repoconfig import rollout_annotation
from reconciler.model.server_defaults import without_container_defaults, without_volume_defaults

DRIVER_ANNOTATION = "dra-gitops.io/driver"
CANARY_ANNOTATION = "dra-gitops.io/canary-for"
COMPONENT_LABEL = "app.kubernetes.io/component"
DRIVER_COMPONENTS = frozenset({"kubelet-plugin", "kubeletplugin"})
DRIVER_WORKLOAD_KINDS = frozenset({"DaemonSet", "Deployment", "StatefulSet"})

_DRIVER_FLAGS = ("--driver-name", "--driver")
_DRIVER_ENV = ("DRIVER_NAME", "DRA_DRIVER_NAME")
# Pod-template fields that define what a driver pod runs; placement (nodeSelector, affinity,
# tolerations), names and labels are deliberately absent so a canary can differ only there.
_DIGEST_CONTAINER_FIELDS = (
    "name",
    "image",
    "command",
    "args",
    "env",
    "envFrom",
    "volumeMounts",
    "securityContext",
    "resources",
)


# --- driver workloads --------------------------------------------------------------------------------

# Where a kubelet plugin registers with the kubelet and keeps its socket: a pod template mounting either runs
# a kubelet plugin, whatever its labels say.
PLUGIN_DIRECTORIES = ("/var/lib/kubelet/plugins_registry", "/var/lib/kubelet/plugins")


@dataclass(frozen=True)
class DriverHints:
    """What recognizes a driver workload beyond its own labels: the driver names DeviceClasses and
    ResourceSlices use (of the desired state and the cluster), and the workloads `drivers:` of
    `dra-gitops.yaml` declares ((kind, namespace, name) to the driver's name)."""

    known_drivers: frozenset[str] = frozenset()
    declared: Mapping[tuple[str, str, str], str] = dataclasses.field(default_factory=dict)
    allow_no_nodes: frozenset[str] = frozenset()  # drivers whose main DaemonSet may run on no node
    rollouts: Mapping[str, RolloutSpec] = dataclasses.field(default_factory=dict)  # `rollout:` by driver
    # How each workload body was recognized inside the block of these hints (by the body's identity; the
    # body is kept so its id is not reused): a check asks for every workload from plan, stages and input.
    recognized: dict[int, tuple[dict[str, Any], str | None]] = dataclasses.field(
        default_factory=dict, compare=False, hash=False, repr=False
    )


_HINTS: ContextVar[DriverHints | None] = ContextVar("driver_hints", default=None)
_NO_HINTS = DriverHints()


@contextmanager
def driver_hints(hints: DriverHints) -> Iterator[None]:
    """Driver workloads are recognized with `hints` inside the block (a check, a delivery)."""
    token = _HINTS.set(hints)
    try:
        yield
    finally:
        _HINTS.reset(token)


def current_hints() -> DriverHints:
    return _HINTS.get() or _NO_HINTS


ALLOW_NO_NODES_ANNOTATION = "dra-gitops.io/allow-no-nodes"


def allows_no_nodes(body: dict[str, Any]) -> str | None:
    """Why a main driver workload may desire 0 pods (a GPU pool autoscaled to zero), or None: the annotation
    `dra-gitops.io/allow-no-nodes: "true"`, or `allowNoNodes: true` of its driver in `drivers:`."""
    if not is_driver_workload(body) or canary_for(body) is not None:
        return None
    if str(annotations_of(body).get(ALLOW_NO_NODES_ANNOTATION, "")).strip().lower() == "true":
        return f'annotation {ALLOW_NO_NODES_ANNOTATION}: "true"'
    driver = workload_driver(body)
    if driver is not None and driver in current_hints().allow_no_nodes:
        return f"allowNoNodes of driver {driver} in dra-gitops.yaml"
    return None


def rollout_of(body: dict[str, Any], where: str) -> RolloutSpec | None:
    """How a main driver DaemonSet is upgraded in waves: its annotation `dra-gitops.io/rollout`, or its
    driver's `rollout` in dra-gitops.yaml (both, differing: an error); None: as before, no waves. The
    annotation anywhere else is an error (`where`: the manifest's file:line)."""
    text = annotations_of(body).get(ROLLOUT_ANNOTATION)
    main_daemonset = kind_of(body) == "DaemonSet" and is_driver_workload(body) and canary_for(body) is None
    if not main_daemonset:
        if text is not None:
            if not is_driver_workload(body):
                what = (
                    f"this {kind_of(body) or 'object'}, which is not recognized as a driver workload (label "
                    "app.kubernetes.io/component: kubelet-plugin, annotation dra-gitops.io/driver, or `drivers:` "
                    "of dra-gitops.yaml)"
                )
            elif canary_for(body) is not None:
                what = "a canary (it is upgraded whole before the waves)"
            else:
                what = f"this driver {kind_of(body)}: waves replace a DaemonSet's pods node by node"
            raise ManifestError(
                f"annotation {ROLLOUT_ANNOTATION} belongs on a driver's main kubelet-plugin DaemonSet, not on {what}",
                where=where,
            )
        return None
    driver = workload_driver(body)
    declared = current_hints().rollouts.get(driver) if driver is not None else None
    if text is None:
        return declared
    spec = rollout_annotation(str(text), where)
    if declared is not None and declared != spec:
        raise ManifestError(
            f"annotation {ROLLOUT_ANNOTATION} and the `rollout` of driver {driver} in dra-gitops.yaml differ: "
            "keep one",
            where=where,
        )
    return spec


def _is_driver_label(key: Any, value: Any) -> bool:
    # NVIDIA's chart labels with "<release>-component: kubelet-plugin" instead of the recommended key.
    if not isinstance(key, str) or value not in DRIVER_COMPONENTS:
        return False
    return key == COMPONENT_LABEL or key.endswith("-component")


def _plugin_mount(spec: dict[str, Any]) -> str | None:
    for volume in as_dicts(spec.get("volumes")):
        path = as_str(dig(volume, "hostPath", "path"))
        if path is None:
            continue
        path = path.rstrip("/")
        for directory in PLUGIN_DIRECTORIES:
            if path == directory or path.startswith(f"{directory}/"):
                return path
    return None


def _words(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(container, word) of every command/arg word (a `--flag=value` split) and every literal env value."""
    out: list[tuple[str, str]] = []
    for container in as_dicts(spec.get("containers")) + as_dicts(spec.get("initContainers")):
        name = as_str(container.get("name")) or "?"
        for word in as_list(container.get("command")) + as_list(container.get("args")):
            if isinstance(word, str):
                out.append((name, word))
                if "=" in word:
                    out.append((name, word.split("=", 1)[1].strip("'\"")))
        for env in as_dicts(container.get("env")):
            value = as_str(env.get("value"))
            if value:
                out.append((name, value))
    return out


def _named_driver(spec: dict[str, Any], known: frozenset[str]) -> tuple[str, str] | None:
    """(container, driver) for the first container flag or env value naming a known driver."""
    if not known:
        return None
    for container, word in _words(spec):
        if word in known:
            return container, word
    return None


def recognized_by(body: dict[str, Any]) -> str | None:
    """How a DaemonSet/Deployment/StatefulSet is known to run a DRA driver (kubelet plugin or controller):
    our annotation or a kubelet-plugin label; a pod template mounting the kubelet plugin directories; a
    container flag or env value naming a driver a DeviceClass or ResourceSlice uses; a workload declared in
    `drivers:` of `dra-gitops.yaml`. None for anything else."""
    if kind_of(body) not in DRIVER_WORKLOAD_KINDS:
        return None
    hints = _HINTS.get()
    if hints is None:
        return _recognized_by(body, _NO_HINTS)
    known = hints.recognized.get(id(body))
    if known is not None and known[0] is body:
        return known[1]
    found = _recognized_by(body, hints)
    hints.recognized[id(body)] = (body, found)
    return found


def _recognized_by(body: dict[str, Any], hints: DriverHints) -> str | None:
    spec = pod_spec_of(body)
    if spec is None:
        return None
    if as_str(annotations_of(body).get(DRIVER_ANNOTATION)):
        return f"annotation {DRIVER_ANNOTATION}"
    for meta in (dig(body, "metadata"), dig(body, "spec", "template", "metadata")):
        for key, value in labels_of(meta).items():
            if _is_driver_label(key, value):
                return f"label {key}={value}"
    mount = _plugin_mount(spec)
    if mount is not None:
        return f"mounts the kubelet plugin directory {mount}"
    declared = hints.declared.get(_workload_key(body))
    if declared is not None:
        return f"declared in `drivers` of dra-gitops.yaml (driver {declared})"
    named = _named_driver(spec, hints.known_drivers)
    if named is not None:
        return f"container {named[0]} names driver {named[1]}, used by a DeviceClass or ResourceSlice"
    return None


def _workload_key(body: dict[str, Any]) -> tuple[str, str, str]:
    namespace = as_str(dig(body, "metadata", "namespace")) or "default"
    return kind_of(body), namespace, as_str(dig(body, "metadata", "name")) or ""


def is_driver_workload(body: dict[str, Any]) -> bool:
    """A DaemonSet/Deployment/StatefulSet running a DRA driver (see `recognized_by`)."""
    return recognized_by(body) is not None


def driver_role(body: dict[str, Any]) -> str:
    """`kubelet-plugin` (a DaemonSet, or any workload mounting the plugin directories) or `controller`."""
    spec = as_dict(pod_spec_of(body))
    if kind_of(body) == "DaemonSet" or _plugin_mount(spec) is not None:
        return "kubelet-plugin"
    return "controller"


def _driver_from_args(args: list[Any]) -> str | None:
    words = [a for a in args if isinstance(a, str)]
    for i, word in enumerate(words):
        for flag in _DRIVER_FLAGS:
            if word.startswith(flag + "="):
                value = word[len(flag) + 1 :].strip("'\"")
                if value:
                    return value
            elif word == flag and i + 1 < len(words) and not words[i + 1].startswith("-"):
                return words[i + 1]
    return None


def workload_driver(body: dict[str, Any]) -> str | None:
    """The driver name of a driver workload: annotation, else container flags, else env; else None."""
    if not is_driver_workload(body):
        return None
    annotated = as_str(annotations_of(body).get(DRIVER_ANNOTATION))
    if annotated:
        return annotated.strip()
    spec = as_dict(pod_spec_of(body))
    containers = as_dicts(spec.get("containers")) + as_dicts(spec.get("initContainers"))
    for container in containers:
        found = _driver_from_args(as_list(container.get("command")) + as_list(container.get("args")))
        if found:
            return found
    for container in containers:
        for env in as_dicts(container.get("env")):
            value = as_str(env.get("value"))
            if env.get("name") in _DRIVER_ENV and value:
                return value
    hints = current_hints()
    named = _named_driver(spec, hints.known_drivers)
    if named is not None:
        return named[1]
    return hints.declared.get(_workload_key(body))


def canary_for(body: dict[str, Any]) -> str | None:
    """The main workload a driver canary stands in for; None on anything that is not a driver workload."""
    if not is_driver_workload(body):
        return None
    value = as_str(annotations_of(body).get(CANARY_ANNOTATION))
    return value.strip() if value and value.strip() else None


def driver_template_digest(body: dict[str, Any]) -> str | None:
    """sha256 of what a driver pod runs (containers and volumes), so canary and main can be compared.

    Server defaults are left out, so a live workload digests like its manifest.
    """
    if not is_driver_workload(body):
        return None
    spec = as_dict(pod_spec_of(body))

    def containers(field: str) -> list[dict[str, Any]]:
        return [
            without_container_defaults({k: c[k] for k in _DIGEST_CONTAINER_FIELDS if k in c})
            for c in as_dicts(spec.get(field))
        ]

    material = {
        # A changed template annotation restarts every driver pod (a config checksum, a restart stamp).
        "annotations": as_dict(dig(body, "spec", "template", "metadata", "annotations")),
        "containers": containers("containers"),
        "initContainers": containers("initContainers"),
        "volumes": [without_volume_defaults(v) for v in as_list(spec.get("volumes"))],
    }
    canonical = json.dumps(
        _without_config_names(material), sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


# Where a pod names the ConfigMaps and Secrets it reads: the names are left out of the template digest (a
# canary may read its own copy), their content is `driver_config_digest`'s.
_CONFIG_REFS = {
    "configMap": ("name",),
    "configMapKeyRef": ("name",),
    "configMapRef": ("name",),
    "secret": ("secretName", "name"),
    "secretKeyRef": ("name",),
    "secretRef": ("name",),
}


def _without_config_names(node: Any, key: str = "") -> Any:
    if isinstance(node, dict):
        names = _CONFIG_REFS.get(key, ())
        return {k: _without_config_names(v, k) for k, v in node.items() if k not in names}
    if isinstance(node, list):
        return [_without_config_names(item) for item in node]
    return node


# --- what a driver reads: its ConfigMaps and Secrets ------------------------------------------------

CONFIG_KINDS = frozenset({"ConfigMap", "Secret"})


def mounted_config(workload: dict[str, Any]) -> set[tuple[str, str]]:
    """(kind, name) of the ConfigMaps and Secrets a workload's pods mount or read env from."""
    spec = pod_spec_of(workload) or {}
    found: set[tuple[str, str]] = set()
    for volume in spec.get("volumes") or []:
        if not isinstance(volume, dict):
            continue
        if isinstance(volume.get("configMap"), dict):
            found.add(("ConfigMap", str(volume["configMap"].get("name"))))
        if isinstance(volume.get("secret"), dict):
            found.add(("Secret", str(volume["secret"].get("secretName"))))
        for source in (volume.get("projected") or {}).get("sources") or []:
            if isinstance(source, dict) and isinstance(source.get("configMap"), dict):
                found.add(("ConfigMap", str(source["configMap"].get("name"))))
            if isinstance(source, dict) and isinstance(source.get("secret"), dict):
                found.add(("Secret", str(source["secret"].get("name"))))
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if not isinstance(container, dict):
            continue
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") if isinstance(env, dict) else None
            if isinstance(value_from, dict) and isinstance(value_from.get("configMapKeyRef"), dict):
                found.add(("ConfigMap", str(value_from["configMapKeyRef"].get("name"))))
            if isinstance(value_from, dict) and isinstance(value_from.get("secretKeyRef"), dict):
                found.add(("Secret", str(value_from["secretKeyRef"].get("name"))))
        for env_from in container.get("envFrom") or []:
            if isinstance(env_from, dict) and isinstance(env_from.get("configMapRef"), dict):
                found.add(("ConfigMap", str(env_from["configMapRef"].get("name"))))
            if isinstance(env_from, dict) and isinstance(env_from.get("secretRef"), dict):
                found.add(("Secret", str(env_from["secretRef"].get("name"))))
    return found


# A live ConfigMap or Secret as `check --cluster` keeps it: its content's digest under this key, no value.
CONTENT_DIGEST = "_contentDigest"


def config_content_digest(body: dict[str, Any]) -> str:
    """sha256 of a ConfigMap's or Secret's content, not its name: `data` and `binaryData`; a Secret's
    `stringData` counts as the base64 `data` the API server stores it as (what a manifest writes and what
    the cluster returns digest alike). A copy made by `content_digest_only` gives its digest."""
    stored = body.get(CONTENT_DIGEST)
    if isinstance(stored, str):
        return stored
    material = {k: body.get(k) for k in ("data", "binaryData") if body.get(k)}
    if body.get("kind") == "Secret" and isinstance(body.get("stringData"), dict):
        data = dict(as_dict(body.get("data")))
        for key, value in body["stringData"].items():
            data[key] = base64.b64encode(str(value).encode()).decode()
        material["data"] = data
    elif body.get("stringData"):
        material["stringData"] = body.get("stringData")
    canonical = json.dumps(material, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


def content_digest_only(body: dict[str, Any]) -> dict[str, Any]:
    """A ConfigMap or Secret with no content left but its digest (`CONTENT_DIGEST`): what `check --cluster`
    keeps of the live ones driver workloads read, so no value reaches the policy input, logs or output."""
    meta = as_dict(body.get("metadata"))
    kept = {k: meta[k] for k in ("name", "namespace", "uid", "resourceVersion") if k in meta}
    return {
        "apiVersion": body.get("apiVersion") or "v1",
        "kind": body.get("kind"),
        "metadata": kept,
        CONTENT_DIGEST: config_content_digest(body),
    }


def driver_config_digest(
    body: dict[str, Any], namespace: str, contents: Mapping[tuple[str, str, str], str]
) -> str:
    """sha256 of the content of every ConfigMap and Secret a driver workload's pods read, by content only:
    a canary reading its own copy of the main driver's ConfigMap digests the same when the copy is equal.
    `contents` maps (kind, namespace, name) to `config_content_digest`; one it lacks counts as absent."""
    found = sorted(
        f"{kind}:{contents.get((kind, namespace, name), 'absent')}" for kind, name in mounted_config(body)
    )
    return hashlib.sha256("\n".join(found).encode()).hexdigest()
