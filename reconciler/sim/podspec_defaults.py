"""The defaults kube-apiserver writes into every PodSpec, of Pods and of workload templates alike.

A live object read back from a real cluster carries them (`kubectl get -o yaml` shows them), so code that
compares a manifest with its live copy must see through them; the sim writes the same ones so that it
does too. Only defaults of the v1 API's defaulting functions are here (admission plugins, such as the
ServiceAccount token volume or DefaultTolerationSeconds, are applied elsewhere and only to Pods).
"""

from __future__ import annotations

from typing import Any

from reconciler.model.server_defaults import DEFAULT_MODE, ref_sources

__all__ = ["default_pod_spec"]

_PROBES = ("livenessProbe", "readinessProbe", "startupProbe")


def _image_pull_policy(image: Any) -> str:
    """Always for `:latest` or an untagged image (no digest), else IfNotPresent."""
    text = str(image or "")
    if "@" in text:
        return "IfNotPresent"
    last = text.rsplit("/", 1)[-1]
    tag = last.rsplit(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def _field_refs(items: Any) -> None:
    """env / downwardAPI items: fieldRef.apiVersion v1, resourceFieldRef.divisor 0."""
    for source in ref_sources(items):
        if isinstance(source.get("fieldRef"), dict):
            source["fieldRef"].setdefault("apiVersion", "v1")
        if isinstance(source.get("resourceFieldRef"), dict):
            source["resourceFieldRef"].setdefault("divisor", "0")


def _probe(probe: Any) -> None:
    if not isinstance(probe, dict):
        return
    probe.setdefault("timeoutSeconds", 1)
    probe.setdefault("periodSeconds", 10)
    probe.setdefault("successThreshold", 1)
    probe.setdefault("failureThreshold", 3)
    if isinstance(probe.get("httpGet"), dict):
        probe["httpGet"].setdefault("scheme", "HTTP")


def _container(container: Any) -> None:
    if not isinstance(container, dict):
        return
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    container.setdefault("imagePullPolicy", _image_pull_policy(container.get("image")))
    container.setdefault("resources", {})
    for port in container.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
    _field_refs(container.get("env"))
    for name in _PROBES:
        _probe(container.get(name))


def _volume(volume: Any) -> None:
    if not isinstance(volume, dict):
        return
    if isinstance(volume.get("hostPath"), dict):
        volume["hostPath"].setdefault("type", "")
    for kind in ("configMap", "secret", "projected", "downwardAPI"):
        if isinstance(volume.get(kind), dict):
            volume[kind].setdefault("defaultMode", DEFAULT_MODE)
    if isinstance(volume.get("downwardAPI"), dict):
        _field_refs(volume["downwardAPI"].get("items"))


def default_pod_spec(spec: Any, *, pod: bool) -> None:
    """Default a PodSpec in place; `pod` for a Pod's own spec (it gets a few more than a template)."""
    if not isinstance(spec, dict):
        return
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("securityContext", {})
    spec.setdefault("schedulerName", "default-scheduler")
    if pod:
        spec.setdefault("enableServiceLinks", True)
    for field in ("containers", "initContainers"):
        for container in spec.get(field) or []:
            _container(container)
    for volume in spec.get("volumes") or []:
        _volume(volume)
