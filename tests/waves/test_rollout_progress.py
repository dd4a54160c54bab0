"""The progress of a driver upgrade in waves as the state keeps it (model/wave_progress.py), the strategy it
is delivered with, and the metric the controller exports from it."""

from __future__ import annotations

from typing import Any

from reconciler.loop.metrics import Metrics
from reconciler.model import dra
from reconciler.model.driver_rollout import RolloutSpec, Wave
from reconciler.model.objects import Manifest, ref_of
from reconciler.model.wave_progress import (
    RolloutProgress,
    current_rollout,
    paused_rollout,
    rollouts_from_json,
    with_rollout,
    with_wave_strategy,
)


def test_progress_round_trips_and_says_where_it_is() -> None:
    progress = RolloutProgress(
        "gpu.example.com",
        "gpu-system",
        "plugin",
        revision="abc",
        wave=2,
        of=4,
        nodes=6,
        done=["n1", "n4"],
        failed_nodes={"n2": "pod p on n2: CrashLoopBackOff"},
        phase="soaking",
        soak_until="2026-01-01T00:02:00Z",
    )
    again = RolloutProgress.from_json(progress.to_json())
    assert again == progress
    assert progress.verified
    assert progress.line() == (
        "wave 2 of 4 (soaking), 2/6 nodes done, 1 failed (n2), next soak ends at 2026-01-01T00:02:00Z"
    )
    assert RolloutProgress.from_json({"wave": 1}) is None  # edited by hand: no driver, no DaemonSet
    assert RolloutProgress.from_json("garbage") is None


def daemonset(name: str, annotations: dict[str, str], strategy: Any = None) -> Manifest:
    body: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": name, "namespace": "gpu-system", "annotations": annotations},
        "spec": {
            "selector": {},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/component": "kubelet-plugin"}},
                "spec": {"containers": [{"name": "plugin", "image": "plugin:1"}]},
            },
        },
    }
    if strategy is not None:
        body["spec"]["updateStrategy"] = strategy
    return Manifest(body=body, ref=ref_of(body), path="d.yaml", line=1)


def test_only_main_driver_daemonsets_with_a_rollout_are_delivered_on_delete() -> None:
    main = daemonset("plugin", {"dra-gitops.io/driver": "gpu.example.com"})
    canary = daemonset(
        "plugin-canary",
        {"dra-gitops.io/driver": "gpu.example.com", "dra-gitops.io/canary-for": "plugin"},
        {"type": "RollingUpdate"},
    )
    other = daemonset("other", {"dra-gitops.io/driver": "nic.example.com"}, {"type": "RollingUpdate"})
    spec = RolloutSpec(waves=(Wave(100, True),))
    hints = dra.hints_of([main, canary, other], rollouts={"gpu.example.com": spec})
    with dra.driver_hints(hints):
        out = {
            m.ref.name: m.body["spec"].get("updateStrategy")
            for m in with_wave_strategy([main, canary, other])
        }
    assert out == {
        "plugin": {"type": "OnDelete"},
        "plugin-canary": {"type": "RollingUpdate"},
        "other": {"type": "RollingUpdate"},
    }
    assert "updateStrategy" not in main.body["spec"]  # the manifest as written is left alone


def test_the_wave_gauge() -> None:
    metrics = Metrics()
    metrics.set_rollout_wave("gpu-cluster", "gpu.example.com", 3, 4)
    text = metrics.render()[0].decode()
    assert 'dra_gitops_driver_rollout_wave{driver="gpu.example.com",target="gpu-cluster"} 3.0' in text
    assert 'dra_gitops_driver_rollout_waves{driver="gpu.example.com",target="gpu-cluster"} 4.0' in text


def test_each_daemonsets_progress_is_kept_and_the_single_object_form_still_reads() -> None:
    gpu = RolloutProgress("gpu.example.com", "gpu-system", "gpu-plugin", wave=2, of=2, phase="done")
    nic = RolloutProgress("nic.example.com", "gpu-system", "nic-plugin", wave=1, of=2, phase="soaking")
    # A state written before holds one object: read as a list of one, the new progress put after it.
    assert rollouts_from_json(gpu.to_json()) == [gpu] and current_rollout(gpu.to_json()) == gpu
    both = with_rollout(gpu.to_json(), nic)
    assert both == [gpu.to_json(), nic.to_json()]
    # A DaemonSet's newer progress takes its own place; the other's stays.
    later = RolloutProgress("nic.example.com", "gpu-system", "nic-plugin", wave=1, of=2, phase="suspended")
    again = with_rollout(both, later)
    assert rollouts_from_json(again) == [gpu, later] and current_rollout(again) == later
    assert paused_rollout([later.to_json(), gpu.to_json()]) == later  # the paused one, not the newest
    assert paused_rollout(both) == nic
    # Nothing, or what does not read as progress (a state edited by hand), is left out.
    assert rollouts_from_json(None) == [] and current_rollout([]) is None and paused_rollout(None) is None
    assert rollouts_from_json([{"wave": 1}, "x", gpu.to_json()]) == [gpu]
    assert with_rollout("garbage", gpu) == [gpu.to_json()]
