"""deploy/ closed by default (issue 28): a NetworkPolicy around the reconciler, the operator port never
published (only the webhook receiver, through the example's Ingress), the dashboard's token mounted, the
Pod Security Standard `restricted` on the namespace and met by the pod, the example's image by digest."""

from __future__ import annotations

from typing import Any

import pytest
from deploy_support import KUBECTL, NO_KUBECTL, kustomize

pytestmark = pytest.mark.skipif(KUBECTL is None, reason=NO_KUBECTL)


def _one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(found) == 1, (kind, name, [o["metadata"]["name"] for o in found])
    return found[0]


def test_the_network_policy_opens_the_receiver_and_keeps_the_operator_port_inside() -> None:
    objects = kustomize("base")
    deployment = _one(objects, "Deployment")
    policy = _one(objects, "NetworkPolicy")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    assert set(policy["spec"]["policyTypes"]) == {"Ingress", "Egress"}
    ports = {
        p["name"]: p["containerPort"]
        for p in deployment["spec"]["template"]["spec"]["containers"][0]["ports"]
    }
    assert ports == {"http": 8080, "webhooks": 8081}
    by_port: dict[Any, list[Any]] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            by_port.setdefault(port["port"], []).append(rule.get("from"))
    assert by_port["webhooks"] == [None]  # from anywhere the Ingress comes from
    (sources,) = by_port["http"]
    assert {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}} in sources
    assert {"podSelector": {}} in sources and len(sources) == 2
    egress = {p["port"] for rule in policy["spec"]["egress"] for p in rule["ports"]}
    assert {53, 443, 6443, 22} <= egress


def test_only_the_receiver_is_published_and_the_dashboard_needs_its_token() -> None:
    objects = kustomize("base")
    container = _one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = container["args"]
    assert "--listen=0.0.0.0:8080" in args and "--webhook-listen=0.0.0.0:8081" in args
    token = next(a for a in args if a.startswith("--ui-token-file=")).split("=", 1)[1]
    mount = next(m for m in container["volumeMounts"] if m["name"] == "ui-token")
    assert token.startswith(mount["mountPath"] + "/")
    volume = next(
        v
        for v in _one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
        if v["name"] == "ui-token"
    )
    assert volume["secret"]["secretName"] == "dra-gitops-ui" and not volume["secret"].get("optional")
    services = {s["metadata"]["name"]: s for s in objects if s["kind"] == "Service"}
    assert [p["targetPort"] for p in services["dra-gitops"]["spec"]["ports"]] == ["http"]
    assert [p["targetPort"] for p in services["dra-gitops-webhooks"]["spec"]["ports"]] == ["webhooks"]
    example = kustomize("overlays/example")
    ingress = _one(example, "Ingress")
    backends = [
        (path["path"], path["backend"]["service"]["name"])
        for rule in ingress["spec"]["rules"]
        for path in rule["http"]["paths"]
    ]
    assert backends == [("/hooks/", "dra-gitops-webhooks")]
    image = _one(example, "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    name, _, digest = image.partition("@sha256:")
    assert name == "registry.example.com/dra-gitops" and len(digest) == 64


def test_pod_security_restricted_is_enforced_and_met() -> None:
    """The namespace enforces `restricted`; the pod meets each of its controls (as the Pod Security
    Standards list them for `restricted`, v1.37)."""
    objects = kustomize("base")
    namespace = _one(objects, "Namespace")
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for source in ("base", "overlays/opa"):
        pod = _one(kustomize(source), "Deployment")["spec"]["template"]["spec"]
        assert not any(pod.get(k) for k in ("hostNetwork", "hostPID", "hostIPC"))
        allowed = {
            "configMap",
            "csi",
            "downwardAPI",
            "emptyDir",
            "ephemeral",
            "persistentVolumeClaim",
            "projected",
            "secret",
        }
        for volume in pod.get("volumes", []):
            assert set(volume) - {"name"} <= allowed, volume
        pod_context = pod.get("securityContext") or {}
        for container in pod["containers"] + pod.get("initContainers", []):
            context = container.get("securityContext") or {}
            merged = {**pod_context, **context}
            assert merged.get("runAsNonRoot") is True and merged.get("runAsUser", 1) != 0, container["name"]
            assert (merged.get("seccompProfile") or {}).get("type") in ("RuntimeDefault", "Localhost")
            assert context.get("allowPrivilegeEscalation") is False, container["name"]
            assert not context.get("privileged")
            capabilities = context.get("capabilities") or {}
            assert capabilities.get("drop") == ["ALL"] and set(capabilities.get("add") or []) <= {
                "NET_BIND_SERVICE"
            }
            assert not any(p.get("hostPort") for p in container.get("ports", []))
