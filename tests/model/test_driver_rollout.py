"""`rollout:` of a driver (issue 32): in dra-gitops.yaml and as a DaemonSet annotation, validated strictly."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest
import yaml

from reconciler.errors import ManifestError
from reconciler.model import dra
from reconciler.model.driver_rollout import Probe, RolloutSpec, Wave, parse_duration
from reconciler.model.repoconfig import SCHEMA, drivers_of, rollout_annotation, rollouts_of, validate_config

GOOD = """\
drivers:
  - name: gpu.example.com
    rollout:
      waves: ["1", "3", "10%", "50%", "100%"]
      soak: 2m
      drainDevices: true
      probe: {class: gpu.example.com, image: registry.example.com/gpu-probe:1}
      maxFailedNodes: 1
  - name: nic.example.com
"""


def test_a_full_rollout_is_read_with_its_defaults_elsewhere() -> None:
    validate_config(GOOD, "dra-gitops.yaml")
    jsonschema.validate(yaml.safe_load(GOOD), SCHEMA)
    drivers = drivers_of(yaml.safe_load(GOOD))
    assert drivers[0].rollout == RolloutSpec(
        waves=(Wave(1, False), Wave(3, False), Wave(10, True), Wave(50, True), Wave(100, True)),
        soak_seconds=120.0,
        drain_devices=True,
        probe=Probe("gpu.example.com", "registry.example.com/gpu-probe:1"),
        max_failed_nodes=1,
    )
    assert drivers[1].rollout is None
    assert list(rollouts_of(drivers)) == ["gpu.example.com"]
    minimal = drivers_of({"drivers": [{"name": "d", "rollout": {"waves": ["100%"]}}]})[0].rollout
    assert minimal == RolloutSpec(waves=(Wave(100, True),))
    assert minimal.to_json() == {
        "waves": ["100%"],
        "soakSeconds": 0.0,
        "drainDevices": False,
        "maxFailedNodes": 0,
    }


@pytest.mark.parametrize(
    ("old", "new", "error"),
    [
        (
            '"50%", "100%"',
            '"100%", "50%"',
            ":4: `drivers[0].rollout.waves[4]`: waves count the nodes done so far",
        ),
        ('"100%"]', '"90%"]', ':4: `drivers[0].rollout.waves` must end with "100%"'),
        (
            '"1", "3"',
            '"10%", "3"',
            ":4: `drivers[0].rollout.waves[1]`: counts of nodes come before percentages",
        ),
        ('"1", "3"', '"3", "3"', "('3' after '3')"),
        (
            '"1", "3"',
            '"0", "3"',
            ':4: `drivers[0].rollout.waves[0]` must be a node count ("1", "5") or a percentage',
        ),
        ('"1", "3"', '"1", "150%"', "`drivers[0].rollout.waves[1]` must be a node count"),
        ('"1", "3"', '"1", "2.5"', "`drivers[0].rollout.waves[1]` must be a node count"),
        (
            '["1", "3", "10%", "50%", "100%"]',
            "[]",
            ":4: `drivers[0].rollout.waves` must list at least one wave",
        ),
        (
            '["1", "3", "10%", "50%", "100%"]',
            "100%",
            ":4: `drivers[0].rollout.waves` must be a list of strings",
        ),
        (
            "soak: 2m",
            "soak: 2 minutes",
            ":5: `drivers[0].rollout.soak` must be a duration like 30s, 2m or 1h30m",
        ),
        ("soak: 2m", "soak: -5s", ":5: `drivers[0].rollout.soak` must be a duration"),
        (
            "drainDevices: true",
            "drainDevices: yes please",
            ":6: `drivers[0].rollout.drainDevices` must be a boolean",
        ),
        (
            "drainDevices: true",
            "drainDevice: true",
            ":6: unknown key `drivers[0].rollout.drainDevice`; did you mean",
        ),
        (
            "maxFailedNodes: 1",
            "maxFailedNodes: -1",
            ":8: `drivers[0].rollout.maxFailedNodes` must be at least 0",
        ),
        (
            "maxFailedNodes: 1",
            "maxFailedNodes: one",
            ":8: `drivers[0].rollout.maxFailedNodes` must be an integer",
        ),
        (
            "image: registry.example.com/gpu-probe:1",
            "img: x",
            ":7: unknown key `drivers[0].rollout.probe.img`",
        ),
        ("image: registry.example.com/gpu-probe:1}", "}", ":7: `drivers[0].rollout.probe` needs `image`"),
        ('      waves: ["1", "3", "10%", "50%", "100%"]\n', "", ":4: `drivers[0].rollout` needs `waves`"),
    ],
)
def test_each_mistake_is_an_error_at_its_line(old: str, new: str, error: str) -> None:
    assert old in GOOD
    with pytest.raises(ManifestError) as raised:
        validate_config(GOOD.replace(old, new, 1), "dra-gitops.yaml")
    assert str(raised.value).startswith("dra-gitops.yaml:"), str(raised.value)
    assert error in str(raised.value), str(raised.value)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30.0),
        ("2m", 120.0),
        ("1h30m", 5400.0),
        ("500ms", 0.5),
        ("90", 90.0),
        ("0", 0.0),
        ("1m30s", 90.0),
    ],
)
def test_soak_durations(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "m", "2 m", "2d", "-1s", "1h-5m", "s30", "-3"])
def test_soak_durations_refused(text: str) -> None:
    assert parse_duration(text) is None


def plugin_daemonset(
    annotations: dict[str, str] | None = None, canary_for: str | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": "gpu-plugin",
        "namespace": "gpu",
        "labels": {"app.kubernetes.io/component": "kubelet-plugin"},
        "annotations": {"dra-gitops.io/driver": "gpu.example.com", **(annotations or {})},
    }
    if canary_for:
        meta["annotations"]["dra-gitops.io/canary-for"] = canary_for
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": meta,
        "spec": {"template": {"spec": {"containers": [{"name": "plugin", "image": "gpu:2"}]}}},
    }


ANNOTATION = "dra-gitops.io/rollout"


def test_the_annotation_form_on_a_plain_driver_daemonset() -> None:
    body = plugin_daemonset({ANNOTATION: '{waves: ["1", "100%"], soak: 30s, drainDevices: true}'})
    spec = dra.rollout_of(body, "gpu/plugin.yaml:1")
    assert spec == RolloutSpec(waves=(Wave(1, False), Wave(100, True)), soak_seconds=30.0, drain_devices=True)
    json_form = plugin_daemonset(
        {ANNOTATION: '{"waves": ["1", "100%"], "soak": "30s", "drainDevices": true}'}
    )
    assert dra.rollout_of(json_form, "gpu/plugin.yaml:1") == spec
    assert dra.rollout_of(plugin_daemonset(), "gpu/plugin.yaml:1") is None


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ('{waves: ["1"]}', 'gpu/plugin.yaml:7: `dra-gitops.io/rollout.waves` must end with "100%"'),
        ("{waves: [", "gpu/plugin.yaml:7: annotation dra-gitops.io/rollout is not YAML"),
        ("", "gpu/plugin.yaml:7: annotation dra-gitops.io/rollout is empty"),
        (
            '{waves: ["100%"], soak: soon}',
            "gpu/plugin.yaml:7: `dra-gitops.io/rollout.soak` must be a duration",
        ),
        (
            '{waves: ["100%"], wave: 1}',
            "gpu/plugin.yaml:7: unknown key `dra-gitops.io/rollout.wave`; did you mean",
        ),
        ('["100%"]', "gpu/plugin.yaml:7: `dra-gitops.io/rollout` must be a mapping"),
    ],
)
def test_annotation_mistakes_are_errors_at_the_manifest(value: str, error: str) -> None:
    with pytest.raises(ManifestError) as raised:
        dra.rollout_of(plugin_daemonset({ANNOTATION: value}), "gpu/plugin.yaml:7")
    assert str(raised.value).startswith(error), str(raised.value)
    with pytest.raises(ManifestError):
        rollout_annotation(value, "gpu/plugin.yaml:7")


def test_the_annotation_elsewhere_is_an_error() -> None:
    canary = plugin_daemonset({ANNOTATION: '{waves: ["100%"]}'}, canary_for="gpu-plugin")
    with pytest.raises(
        ManifestError, match="belongs on a driver.s main kubelet-plugin DaemonSet, not on a canary"
    ):
        dra.rollout_of(canary, "gpu/canary.yaml:1")
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "annotations": {ANNOTATION: '{waves: ["100%"]}'}},
        "spec": {"template": {"spec": {"containers": [{"name": "web", "image": "web"}]}}},
    }
    with pytest.raises(
        ManifestError, match="not on this Deployment, which is not recognized as a driver workload"
    ):
        dra.rollout_of(deployment, "web.yaml:1")


def test_the_config_names_the_rollout_of_the_drivers_daemonset_and_a_differing_annotation_is_an_error() -> (
    None
):
    declared = drivers_of(yaml.safe_load(GOOD))
    hints = dra.hints_of([], allow_no_nodes=(), rollouts=rollouts_of(declared))
    with dra.driver_hints(hints):
        assert dra.rollout_of(plugin_daemonset(), "gpu/plugin.yaml:1") == declared[0].rollout
        with pytest.raises(ManifestError, match="differ: keep one"):
            dra.rollout_of(plugin_daemonset({ANNOTATION: '{waves: ["100%"]}'}), "gpu/plugin.yaml:1")
        same = '{waves: ["1", "3", "10%", "50%", "100%"], soak: 120s, drainDevices: true, maxFailedNodes: 1, '
        same += "probe: {class: gpu.example.com, image: registry.example.com/gpu-probe:1}}"
        assert (
            dra.rollout_of(plugin_daemonset({ANNOTATION: same}), "gpu/plugin.yaml:1") == declared[0].rollout
        )
    assert dra.rollout_of(plugin_daemonset(), "gpu/plugin.yaml:1") is None


def test_the_annotation_on_a_driver_controller_deployment_is_an_error() -> None:
    controller = plugin_daemonset({ANNOTATION: '{waves: ["100%"]}'})
    controller["kind"] = "Deployment"
    with pytest.raises(
        ManifestError, match="not on this driver Deployment: waves replace a DaemonSet's pods"
    ):
        dra.rollout_of(controller, "gpu/controller.yaml:1")
