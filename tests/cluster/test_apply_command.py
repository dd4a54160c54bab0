"""`dra-gitops apply`, `plan` and `inventory` against the simulated cluster (real HTTP, official client)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from reconciler.cli import cli
from reconciler.cluster.client import ClusterClient
from reconciler.sim.controlplane import install
from reconciler.sim.server import SimCluster

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "manifests-example"


@pytest.fixture
def sim(tmp_path: Path) -> Iterator[tuple[SimCluster, Path]]:
    """Two nodes with two gpu.example.com devices each; the first is a canary node. Driver not yet deployed."""
    with SimCluster() as cluster:
        plane = install(
            cluster,
            nodes=2,
            devices_per_node=2,
            node_labels=[{"dra-gitops.io/canary": "true"}, {}],
        )
        try:
            yield cluster, cluster.write_kubeconfig(tmp_path / "kubeconfig")
        finally:
            plane.stop()


def run(*args: str) -> Result:
    result = CliRunner().invoke(cli, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result


def copy_example(tmp_path: Path, name: str = "repo") -> Path:
    target = tmp_path / name
    shutil.copytree(EXAMPLE, target)
    return target


def store_snapshot(cluster: SimCluster) -> dict[str, Any]:
    """Every object the test's change could write, keyed by kind, name and resourceVersion."""
    with ClusterClient.for_url(cluster.url) as client:
        seen = {}
        for group, kind in [
            ("", "Namespace"),
            ("apps", "DaemonSet"),
            ("apps", "Deployment"),
            ("resource.k8s.io", "DeviceClass"),
            ("resource.k8s.io", "ResourceClaimTemplate"),
            ("resource.k8s.io", "ResourceClaim"),
        ]:
            for item in client.list_kind(group, kind):
                meta = item["metadata"]
                seen[(kind, meta.get("namespace"), meta["name"])] = meta["resourceVersion"]
        return seen


def test_apply_example_prints_every_claim_with_device_and_node(sim: tuple[SimCluster, Path]) -> None:
    _, kubeconfig = sim
    result = run("apply", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
    assert result.exit_code == 0, result.output
    claim_lines = [
        line for line in result.stdout.splitlines() if line.startswith("Pod ") and " claim " in line
    ]
    # Two trainer replicas with generated claims, and the notebook sharing the static claim.
    assert len(claim_lines) == 3, result.stdout
    for line in claim_lines:
        assert "device gpu.example.com/sim-node-" in line and " node sim-node-" in line
        assert line.endswith("reserved  ready")
    assert "outcome: applied" in result.stdout

    # A second apply of the same revision changes nothing and writes nothing.
    again = run("apply", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    report = json.loads(again.stdout)
    assert again.exit_code == 0 and report["outcome"] == "applied"
    assert report["writes"] == 0
    assert all(stage["applied"] == 0 for stage in report["stages"])

    # plan --exit-code: nothing pending now (0), pending after a change (3).
    assert run("plan", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "--exit-code", "-q").exit_code == 0


def test_inventory_lists_driver_class_slices_and_allocations(sim: tuple[SimCluster, Path]) -> None:
    _, kubeconfig = sim
    assert run("apply", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "-q").exit_code == 0
    result = run("inventory", "--kubeconfig", str(kubeconfig), "-o", "json")
    assert result.exit_code == 0, result.output
    inventory = json.loads(result.stdout)
    assert inventory["resource_api"]["served"] == ["v1"]
    driver = inventory["drivers"]["gpu.example.com"] if isinstance(inventory["drivers"], dict) else None
    assert driver is not None, inventory["drivers"]
    assert driver["devices"] == 4 and driver["allocated"] == 3
    assert [c["name"] for c in inventory["classes"]] == ["gpu.example.com"]
    assert len(inventory["slices"]) == 2
    assert any(p["ready"] for p in inventory["driver_pods"])


def test_exhaustion_fails_fast_with_a_diagnosis(sim: tuple[SimCluster, Path], tmp_path: Path) -> None:
    _, kubeconfig = sim
    repo = copy_example(tmp_path)
    trainer = repo / "40-workloads" / "trainer.yaml"
    trainer.write_text(trainer.read_text().replace("replicas: 2", "replicas: 4"))
    started = time.monotonic()
    result = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "--grace", "2", "-q", "-o", "json")
    elapsed = time.monotonic() - started
    assert result.exit_code == 1
    assert elapsed < 90
    report = json.loads(result.stdout)
    assert report["outcome"] == "verify-failed"
    exhaustion = [d for d in report["diagnoses"] if d["mode"] == "exhaustion"]
    assert exhaustion, report["diagnoses"]
    numbers = exhaustion[0]["numbers"]
    assert numbers["needed"] == 1 and numbers["free"] == 0 and numbers["total"] == 4


def test_an_invalid_value_is_rejected_by_the_dry_run_before_anything_is_written(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    template = repo / "30-claims" / "single-gpu-template.yaml"
    text = template.read_text()
    assert "allocationMode: ExactCount" in text
    # The schema has no enum for it: only the API server's validation says no.
    template.write_text(text.replace("allocationMode: ExactCount", "allocationMode: Sometimes", 1))
    before = store_snapshot(cluster)
    result = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["outcome"] == "dry-run-failed"
    errors = [r for r in report["dry_run"] if r["error"]]
    assert [r["ref"] for r in errors] == ["ResourceClaimTemplate/ml-team/single-gpu"]
    assert "allocationMode" in errors[0]["error"]
    assert report["stages"] == [] and report["writes"] == 0
    assert store_snapshot(cluster) == before


def test_unknown_field_is_denied_offline_before_anything_is_written(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    template = repo / "30-claims" / "single-gpu-template.yaml"
    text = template.read_text()
    assert "      requests:" in text
    template.write_text(text.replace("      requests:", "      foo: 1\n      requests:", 1))
    before = store_snapshot(cluster)
    result = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["outcome"] == "denied"
    [finding] = [f for f in report["findings"] if f["rule"] == "schema"]
    assert finding["ref"] == "ResourceClaimTemplate/ml-team/single-gpu"
    assert "spec.spec.devices.foo: unknown field" in finding["msg"]
    assert report["writes"] == 0
    assert store_snapshot(cluster) == before


def test_policy_denial_stops_before_the_cluster_is_touched(
    sim: tuple[SimCluster, Path], tmp_path: Path
) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    template = repo / "30-claims" / "single-gpu-template.yaml"
    template.write_text(
        template.read_text().replace("deviceClassName: gpu.example.com", "deviceClassName: nope")
    )
    before = store_snapshot(cluster)
    result = run("apply", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    assert report["outcome"] == "denied"
    assert "class-before-template" in {f["rule"] for f in report["findings"] if f["severity"] == "deny"}
    assert store_snapshot(cluster) == before


def test_plan_shows_diffs_and_exit_code_3(sim: tuple[SimCluster, Path]) -> None:
    _, kubeconfig = sim
    result = run("plan", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "--exit-code", "-q")
    assert result.exit_code == 3, result.output
    assert "stage 3 claims: 2 create" in result.stdout
    assert "deferred" in result.stdout or "create" in result.stdout


def test_unreachable_cluster_exits_4(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    with SimCluster() as cluster:
        cluster.write_kubeconfig(kubeconfig)
    # The server is gone now: every request is refused.
    result = run("inventory", "--kubeconfig", str(kubeconfig))
    assert result.exit_code == 4
    assert "cannot reach the API server" in result.stderr


def git(repo: Path, *args: str) -> str:
    import subprocess

    done = subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_all(repo: Path, message: str) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def set_image(path: Path, version: str) -> None:
    text = path.read_text()
    path.write_text(text.replace("gpu-example-driver:v0.3.0", f"gpu-example-driver:{version}"))


def test_driver_upgrade_from_git_needs_the_canary_first(sim: tuple[SimCluster, Path], tmp_path: Path) -> None:
    cluster, kubeconfig = sim
    repo = copy_example(tmp_path)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "ci@example.com")
    git(repo, "config", "user.name", "CI")
    base = commit_all(repo, "v0.3.0 everywhere")

    def apply(rev: str, base_rev: str | None) -> tuple[int, dict[str, Any]]:
        args = [
            "apply",
            "--repo",
            str(repo),
            "--rev",
            rev,
            "--kubeconfig",
            str(kubeconfig),
            "-q",
            "-o",
            "json",
        ]
        result = run(*args, *(["--base", base_rev] if base_rev else []))
        return result.exit_code, json.loads(result.stdout)

    assert apply(base, None)[0] == 0

    # The main driver straight to v0.4.0: denied before the cluster is touched.
    set_image(repo / "10-driver" / "kubelet-plugin.yaml", "v0.4.0")
    direct = commit_all(repo, "driver v0.4.0 without canary")
    before = store_snapshot(cluster)
    code, report = apply(direct, base)
    assert code == 1 and report["outcome"] == "denied"
    assert {f["rule"] for f in report["findings"] if f["severity"] == "deny"} == {"driver-canary"}
    assert store_snapshot(cluster) == before

    # The GitOps way: canary first (applied and verified), then the promotion passes.
    git(repo, "reset", "-q", "--hard", base)
    set_image(repo / "10-driver" / "kubelet-plugin-canary.yaml", "v0.4.0")
    canary = commit_all(repo, "canary v0.4.0")
    code, report = apply(canary, base)
    assert (code, report["outcome"]) == (0, "applied"), report
    set_image(repo / "10-driver" / "kubelet-plugin.yaml", "v0.4.0")
    promotion = commit_all(repo, "promote v0.4.0")
    code, report = apply(promotion, canary)
    assert (code, report["outcome"]) == (0, "applied"), report
    with ClusterClient.for_url(cluster.url) as client:
        [main] = [
            d
            for d in client.list_kind("apps", "DaemonSet", "gpu-system")
            if d["metadata"]["name"].endswith("plugin")
        ]
    assert main["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v0.4.0")


# ---- one set of numbers ----------------------------------------------------------------------------------


def plan_lines(text: str) -> list[str]:
    return [
        line.removeprefix("dra-gitops: ").removeprefix("plan: ")
        for line in text.splitlines()
        if line.removeprefix("dra-gitops: ").startswith("plan: ")
    ]


@pytest.mark.parametrize("output", ["text", "json"])
def test_progress_text_and_json_counts_agree(
    sim: tuple[SimCluster, Path], tmp_path: Path, output: str
) -> None:
    """First apply, then a re-apply with one changed object: stderr, stdout (text or JSON) say the same."""
    _, kubeconfig = sim
    repo = copy_example(tmp_path)
    objects = 12  # the example's objects; the ApplySet parent (and its namespace) are counted apart
    gpu_class = repo / "20-classes" / "gpu-class.yaml"

    def apply() -> tuple[str, dict[str, Any] | None, str]:
        result = CliRunner().invoke(
            cli, ["apply", str(repo), "--kubeconfig", str(kubeconfig), "-o", output, "--stage-timeout", "60"]
        )
        assert result.exit_code == 0, result.output
        (progress,) = plan_lines(result.stderr)
        report = json.loads(result.stdout) if output == "json" else None
        return progress, report, result.stdout

    expected = [
        (
            f"{objects} to create, 0 to update, 0 to delete, 0 unchanged",
            {"create": objects, "update": 0, "unchanged": 0},
        ),
        (
            f"0 to create, 1 to update, 0 to delete, {objects - 1} unchanged",
            {"create": 0, "update": 1, "unchanged": objects - 1},
        ),
    ]
    for round_, (line, numbers) in enumerate(expected):
        if round_ == 1:
            gpu_class.write_text(
                gpu_class.read_text().replace(
                    "  name: gpu.example.com\n", "  name: gpu.example.com\n  labels: {tier: gpu}\n", 1
                )
            )
        progress, report, stdout = apply()
        assert progress == f"{line} (server-side dry-run)"
        if report is not None:
            assert report["plan"] == line
            assert {k: report["counts"][k] for k in numbers} == numbers and report["counts"]["delete"] == 0
            applied = sum(stage["applied"] for stage in report["stages"])
            bookkeeping = report["bookkeeping"]
        else:
            assert plan_lines(stdout) == [f"{line} (server-side dry-run)"]
            applied = sum(
                int(line_.split(": ", 1)[1].split(" applied")[0])
                for line_ in stdout.splitlines()
                if line_.startswith("stage ")
            )
            (kept,) = [line_ for line_ in stdout.splitlines() if line_.startswith("bookkeeping")]
            bookkeeping = dict(part.rsplit(" ", 1) for part in kept.split(": ", 1)[1].split(", "))
        assert applied == numbers["create"] + numbers["update"]
        parent = [ref for ref in bookkeeping if ref.startswith("ConfigMap/dra-gitops/")]
        assert len(parent) == 1, bookkeeping
        # Before its first write, the re-apply removes the digest the first one recorded (cluster/apply/noop.py).
        assert bookkeeping[parent[0]] == ("create" if round_ == 0 else "update")
