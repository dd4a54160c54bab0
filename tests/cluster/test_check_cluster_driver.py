"""`check PATH --cluster` judges a driver upgrade against what the cluster runs (no revision needed).

The reconciler and `check --repo --base` compare with a revision; a working copy checked before a push
has none, so its driver workloads are compared with their live copies (defaulted by the server).
"""

from __future__ import annotations

import json
from pathlib import Path

from test_apply_command import EXAMPLE, copy_example, run, sim  # noqa: F401  (fixture)

from reconciler.model.compare import live_driver_base
from reconciler.model.loader import load_paths
from reconciler.model.objects import Manifest, ref_of
from reconciler.sim.server import SimCluster

MAIN = "10-driver/kubelet-plugin.yaml"
CANARY = "10-driver/kubelet-plugin-canary.yaml"


def bump(repo: Path, relative: str) -> None:
    path = repo / relative
    path.write_text(path.read_text().replace("gpu-example-driver:v0.3.0", "gpu-example-driver:v0.4.0"))


def check(repo: Path, kubeconfig: Path) -> tuple[int, list[dict[str, object]]]:
    done = run("check", str(repo), "--cluster", "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    return done.exit_code, json.loads(done.stdout)["findings"]


def test_a_driver_upgrade_without_a_canary_is_denied_before_the_push(
    sim: tuple[SimCluster, Path],  # noqa: F811
    tmp_path: Path,
) -> None:
    _, kubeconfig = sim
    applied = run("apply", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
    assert applied.exit_code == 0, applied.output

    unchanged = copy_example(tmp_path, "unchanged")
    assert check(unchanged, kubeconfig) == (0, [])  # the live copies carry server defaults: no change

    main_first = copy_example(tmp_path, "main-first")
    bump(main_first, MAIN)
    code, findings = check(main_first, kubeconfig)
    assert code == 1 and [f["rule"] for f in findings] == ["driver-canary"], findings
    assert str(findings[0]["msg"]).startswith(
        "DaemonSet/gpu-system/gpu-example-kubelet-plugin changes the driver's pod template, but no "
        "already-applied canary runs it"
    )

    canary_first = copy_example(tmp_path, "canary-first")
    bump(canary_first, CANARY)
    assert check(canary_first, kubeconfig) == (0, [])


def test_live_driver_base_keeps_covered_copies_as_written() -> None:
    head = load_paths([EXAMPLE / "10-driver", EXAMPLE / "40-workloads"]).manifests
    plugin = next(m for m in head if m.ref.name == "gpu-example-kubelet-plugin")
    live_body = json.loads(json.dumps(plugin.body))
    live_body["status"] = {"numberReady": 1}
    live_body["spec"]["revisionHistoryLimit"] = 10
    changed = json.loads(json.dumps(live_body))
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "old:1"
    trainer = next(m for m in head if m.ref.name == "trainer")

    def live(*bodies: dict[str, object]) -> list[Manifest]:
        return [Manifest(body=b, ref=ref_of(b), path="", line=0) for b in bodies]

    assert live_driver_base(head, live(live_body, trainer.body)) == [plugin]  # covered: as written
    base = live_driver_base(head, live(changed))
    assert [m.body for m in base] == [changed] and (base[0].path, base[0].line) == (plugin.path, plugin.line)
