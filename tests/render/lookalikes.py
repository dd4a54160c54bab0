"""Look-alikes of the shapes public DRA driver projects ship, written for these tests (none copied):

* `plugin_driver_files`: a kubelet-plugin DaemonSet with none of our labels that mounts the kubelet plugin
  registration directory and reads its mode from a ConfigMap, plus a canary reading its own copy (the shape
  of Intel's and dra-driver-cpu's manifests);
* `controller_files`: a controller Deployment whose env names the driver a DeviceClass uses (NVIDIA ships
  one beside its kubelet plugin);
* `chart_named_after_itself`: a chart naming its DaemonSet and controller after the chart (not the release),
  honouring `nameOverride`, with a `.Capabilities` fallback for the DRA API version, a multi-line `fail`,
  a `crds/` folder and an optional dependency.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

PLUGIN_NS = "cpu-dra"
PLUGIN_DRIVER = "cpu.lookalike.example"


def _daemonset(name: str, image: str, config: str, canary_for: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": PLUGIN_NS}
    spec: dict[str, Any] = {
        "serviceAccountName": "cpu-dra",
        "containers": [
            {
                "name": "plugin",
                "image": image,
                "args": ["--mode-file=/etc/cpu-dra/mode"],
                "volumeMounts": [
                    {"name": "registration", "mountPath": "/var/lib/kubelet/plugins_registry"},
                    {"name": "mode", "mountPath": "/etc/cpu-dra"},
                ],
            }
        ],
        "volumes": [
            {"name": "registration", "hostPath": {"path": "/var/lib/kubelet/plugins_registry"}},
            {"name": "mode", "configMap": {"name": config}},
        ],
    }
    if canary_for is not None:
        meta["annotations"] = {"dra-gitops.io/canary-for": canary_for}
        spec["nodeSelector"] = {"dra-gitops.io/canary": "true"}
    else:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "dra-gitops.io/canary", "operator": "DoesNotExist"}]}
                    ]
                }
            }
        }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}}, "spec": spec},
        },
    }


def _config_map(name: str, mode: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": PLUGIN_NS},
        "data": {"mode": mode},
    }


def plugin_driver_files(
    *,
    image: str = "cpu-dra:v1",
    mode: str = "grouped",
    canary_image: str = "cpu-dra:v1",
    canary_mode: str = "grouped",
) -> dict[str, str]:
    """The plugin-only driver as repository files (path to YAML)."""
    docs = {
        "cluster/namespace.yaml": [
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": PLUGIN_NS}}
        ],
        "cluster/plugin.yaml": [
            _config_map("cpu-dra-mode", mode),
            _daemonset("cpu-dra-kubelet-plugin", image, "cpu-dra-mode", None),
        ],
        "cluster/canary.yaml": [
            _config_map("cpu-dra-mode-canary", canary_mode),
            _daemonset(
                "cpu-dra-kubelet-plugin-canary", canary_image, "cpu-dra-mode-canary", "cpu-dra-kubelet-plugin"
            ),
        ],
    }
    return {path: yaml.safe_dump_all(items, sort_keys=False) for path, items in docs.items()}


CONTROLLER_NS = "gpu-operator"
CONTROLLER_DRIVER = "gpu.lookalike.example"


def controller_files(*, image: str = "gpu-controller:v1", canary_image: str | None = None) -> dict[str, str]:
    """A DeviceClass and a controller Deployment naming its driver in an env value (no label of ours)."""

    def deployment(name: str, tag: str, canary_for: str | None) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "namespace": CONTROLLER_NS}
        pod: dict[str, Any] = {
            "containers": [
                {
                    "name": "controller",
                    "image": tag,
                    "env": [{"name": "RESOURCE_DRIVER", "value": CONTROLLER_DRIVER}],
                }
            ]
        }
        if canary_for:
            meta["annotations"] = {"dra-gitops.io/canary-for": canary_for}
            pod["nodeSelector"] = {"dra-gitops.io/canary": "true"}
        return {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": meta,
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": name}},
                "template": {"metadata": {"labels": {"app": name}}, "spec": pod},
            },
        }

    items: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CONTROLLER_NS}},
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CONTROLLER_DRIVER},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{CONTROLLER_DRIVER}'"}}]},
        },
        deployment("gpu-controller", image, None),
    ]
    if canary_image is not None:
        items.append(deployment("gpu-controller-canary", canary_image, "gpu-controller"))
    return {"cluster/gpu.yaml": yaml.safe_dump_all(items, sort_keys=False)}


def write(root: Path, files: dict[str, str]) -> None:
    for path, text in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


CHART_DRIVER = "gpu.chart.example"

_CHART_FILES = {
    "Chart.yaml": """apiVersion: v2
name: gpu-lookalike
version: 0.1.0
{dependencies}""",
    "values.yaml": """driverName: gpu.chart.example
nameOverride: ""
image: {repository: registry.example.com/gpu-lookalike, tag: v1}
canaryNodes: exclude
""",
    "templates/_helpers.tpl": """{{- define "lookalike.name" -}}
{{- default .Chart.Name .Values.nameOverride -}}
{{- end -}}
{{- define "lookalike.placement" -}}
{{- if ne .Values.canaryNodes "any" }}
affinity:
  nodeAffinity:
    requiredDuringSchedulingIgnoredDuringExecution:
      nodeSelectorTerms:
        - matchExpressions:
            - key: dra-gitops.io/canary
              {{- if eq .Values.canaryNodes "only" }}
              operator: In
              values: ["true"]
              {{- else }}
              operator: DoesNotExist
              {{- end }}
{{- end }}
{{- end -}}
""",
    "templates/validate.yaml": """{{- if not .Values.driverName }}
{{- fail "driverName is empty.\\nSet it to the driver's name, for example:\\n  driverName: gpu.chart.example\\nthen render again." }}
{{- end }}
""",
    "templates/kubeletplugin.yaml": """apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ include "lookalike.name" . }}-kubelet-plugin
  labels:
    {{ .Release.Name }}-component: kubelet-plugin
spec:
  selector:
    matchLabels: {app: {{ include "lookalike.name" . }}-kubelet-plugin}
  template:
    metadata:
      labels: {app: {{ include "lookalike.name" . }}-kubelet-plugin}
    spec:
      {{- include "lookalike.placement" . | nindent 6 }}
      containers:
        - name: plugin
          image: {{ .Values.image.repository }}:{{ .Values.image.tag }}
          args: ["--driver-name={{ .Values.driverName }}"]
          volumeMounts:
            - {name: registration, mountPath: /var/lib/kubelet/plugins_registry}
      volumes:
        - name: registration
          hostPath: {path: /var/lib/kubelet/plugins_registry}
""",
    "templates/controller.yaml": """apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ include "lookalike.name" . }}-controller
spec:
  replicas: 1
  selector:
    matchLabels: {app: {{ include "lookalike.name" . }}-controller}
  template:
    metadata:
      labels: {app: {{ include "lookalike.name" . }}-controller}
    spec:
      {{- include "lookalike.placement" . | nindent 6 }}
      containers:
        - name: controller
          image: {{ .Values.image.repository }}-controller:{{ .Values.image.tag }}
          env:
            - {name: DRIVER_DOMAIN, value: {{ .Values.driverName }}}
""",
    "templates/deviceclass.yaml": """{{- if .Capabilities.APIVersions.Has "resource.k8s.io/v1/DeviceClass" }}
apiVersion: resource.k8s.io/v1
{{- else }}
apiVersion: resource.k8s.io/v1beta2
{{- end }}
kind: DeviceClass
metadata:
  name: {{ .Values.driverName }}
spec:
  selectors:
    - cel: {expression: "device.driver == '{{ .Values.driverName }}'"}
""",
    "crds/gpu-settings.yaml": """apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gpusettings.chart.example
spec:
  group: chart.example
  names: {kind: GpuSettings, plural: gpusettings, singular: gpusettings}
  scope: Cluster
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
""",
}


def chart_named_after_itself(dependency: str | None = None) -> dict[str, str]:
    """The chart's files under `charts/gpu-lookalike/` (with `dependency`, its Chart.yaml needs that chart
    from `charts/`)."""
    dependencies = ""
    if dependency is not None:
        dependencies = f"dependencies:\n  - name: {dependency}\n    version: 0.1.0\n"
    return {
        f"charts/gpu-lookalike/{path}": text.replace("{dependencies}", dependencies)
        for path, text in _CHART_FILES.items()
    }


def chart_config(*, main: dict[str, Any] | None = None, canary: dict[str, Any] | None = None) -> str:
    """`dra-gitops.yaml` with a main release and a canary release (`nameOverride`) of the chart."""
    releases: list[dict[str, Any]] = [
        {
            "releaseName": "gpu",
            "chart": "charts/gpu-lookalike",
            "namespace": "gpu-system",
            "values": main or {},
        },
    ]
    if canary is not None:
        releases.append(
            {
                "releaseName": "gpu-canary",
                "chart": "charts/gpu-lookalike",
                "namespace": "gpu-system",
                "values": {"nameOverride": "gpu-lookalike-canary", "canaryNodes": "only", **canary},
                "canaryFor": "gpu",
            }
        )
    return yaml.safe_dump({"charts": releases}, sort_keys=False)
