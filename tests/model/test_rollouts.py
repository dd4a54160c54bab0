"""The rollout budget and the new-template pods a Deployment rollout needs devices for (pure)."""

from __future__ import annotations

from typing import Any

import pytest

from reconciler.model.rollouts import deployment_budget, int_or_percent, rollout_surge, template_changed


def deployment(
    replicas: int | None = 2, strategy: dict[str, Any] | None = None, image: str = "t:1"
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selector": {"matchLabels": {"app": "t"}},
        "template": {
            "metadata": {"labels": {"app": "t"}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        },
    }
    if replicas is not None:
        spec["replicas"] = replicas
    if strategy is not None:
        spec["strategy"] = strategy
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "t", "namespace": "ml"},
        "spec": spec,
    }


def live(body: dict[str, Any]) -> dict[str, Any]:
    """As the server returns it: defaults filled in."""
    out = {**body, "spec": {**body["spec"], "progressDeadlineSeconds": 600}}
    template = out["spec"]["template"]
    container = {
        **template["spec"]["containers"][0],
        "imagePullPolicy": "IfNotPresent",
        "terminationMessagePath": "/dev/termination-log",
    }
    out["spec"]["template"] = {
        **template,
        "spec": {**template["spec"], "containers": [container], "restartPolicy": "Always"},
    }
    return out


@pytest.mark.parametrize(
    ("value", "total", "up", "expected"),
    [
        (None, 4, True, 0),
        (2, 4, True, 2),
        ("25%", 2, True, 1),
        ("25%", 2, False, 0),
        ("50%", 3, False, 1),
        ("100%", 3, True, 3),
    ],
)
def test_int_or_percent(value: Any, total: int, up: bool, expected: int) -> None:
    assert int_or_percent(value, total, up) == expected


def test_budget_defaults_and_recreate() -> None:
    assert deployment_budget(deployment(2)) == (1, 0)
    assert deployment_budget(deployment(8)) == (2, 2)
    assert deployment_budget(deployment(None)) == (1, 0)  # replicas default to 1
    assert deployment_budget(deployment(2, {"type": "Recreate"})) is None
    both_zero = {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": "10%"}}
    assert deployment_budget(deployment(2, both_zero)) == (0, 1)


def test_template_changed_against_the_base_or_the_live_object() -> None:
    old, new = deployment(image="t:1"), deployment(image="t:2")
    assert template_changed(new, old, live(old))
    assert not template_changed(deployment(3), old, live(old))  # replicas are no template change
    assert not template_changed(old, None, live(old))  # server defaults do not count
    assert template_changed(new, None, live(old))
    assert not template_changed(new, None, None)


def test_rollout_surge_only_when_old_pods_keep_their_devices() -> None:
    old, new = deployment(image="t:1"), deployment(image="t:2")
    pods, why = rollout_surge(new, old, live(old)) or (0, "")
    assert pods == 1 and "maxUnavailable 0 and maxSurge 1: the 2 old pod(s) keep their devices" in why
    assert rollout_surge(old, old, live(old)) is None  # nothing rolls
    room = {"rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}}
    assert rollout_surge(deployment(2, room, "t:2"), old, live(old)) is None
    assert rollout_surge(deployment(2, {"type": "Recreate"}, "t:2"), old, live(old)) is None
    assert rollout_surge(new, old, None) is None  # not running yet: its pods are all new anyway
    wide = {"rollingUpdate": {"maxSurge": "100%", "maxUnavailable": 0}}
    assert (rollout_surge(deployment(2, wide, "t:2"), old, live(old)) or (0, ""))[0] == 2
    # scaled down at once from 4: the controller scales the old pods down before surging
    assert rollout_surge(new, None, live(deployment(4))) is None
    statefulset = {**new, "kind": "StatefulSet"}
    assert rollout_surge(statefulset, old, live(old)) is None
