"""`dra-gitops plan -o text|json|markdown` against the simulated cluster: the same numbers in each format."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from test_apply_command import EXAMPLE, copy_example, run, sim  # noqa: F401  (fixture)

from reconciler.cluster.apply import (
    DryRunResult,
    ObjectResult,
    dry_run_json,
    render_dry_run_markdown,
    render_plan,
)
from reconciler.model.loader import SkippedFile
from reconciler.sim.server import SimCluster


def apply_example(kubeconfig: Path) -> None:
    done = run("apply", str(EXAMPLE), "--kubeconfig", str(kubeconfig), "-q", "--stage-timeout", "60")
    assert done.exit_code == 0, done.output


def test_json_counts_agree_with_text_and_exit_code(sim: tuple[SimCluster, Path], tmp_path: Path) -> None:  # noqa: F811
    _, kubeconfig = sim
    apply_example(kubeconfig)
    repo = copy_example(tmp_path)
    trainer = repo / "40-workloads" / "trainer.yaml"
    trainer.write_text(trainer.read_text().replace("replicas: 2", "replicas: 3"))

    text = run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--exit-code")
    as_json = run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q", "--exit-code", "-o", "json")
    assert text.exit_code == as_json.exit_code == 3, text.output + as_json.output

    doc = json.loads(as_json.stdout)
    assert doc["ok"] is True and doc["changes_pending"] is True
    assert doc["counts"] == {"create": 0, "update": 1, "delete": 0, "unchanged": 11, "deferred": 0}
    assert doc["summary"] == "0 to create, 1 to update, 0 to delete, 11 unchanged"
    assert "dry-run ok: 0 create, 1 update, 0 delete, 11 unchanged" in text.stdout
    changed = [o for o in doc["objects"] if o["op"] != "unchanged"]
    assert [(o["ref"], o["op"], o["stage"]) for o in changed] == [
        ("Deployment/ml-team/trainer", "update", "4 workloads")
    ]
    assert changed[0]["path"].endswith("40-workloads/trainer.yaml") and changed[0]["line"] == 2
    assert "-  replicas: 2\n+  replicas: 3" in changed[0]["diff"]
    assert sum(s["unchanged"] for s in doc["stages"]) == 11
    assert doc["revision"] is None and doc["skipped"] == []

    quiet = run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json", "--no-diff")
    assert quiet.exit_code == 0
    assert all(o["diff"] == "" for o in json.loads(quiet.stdout)["objects"])


def test_markdown_for_a_pull_request(sim: tuple[SimCluster, Path], tmp_path: Path) -> None:  # noqa: F811
    _, kubeconfig = sim
    repo = copy_example(tmp_path)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qm", "x"],
        check=True,
    )
    sha = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True
    ).stdout.strip()
    done = run("plan", "--repo", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "markdown")
    assert done.exit_code == 0, done.output
    md = done.stdout
    assert md.startswith(f"## dra-gitops plan of {sha[:12]}\n")
    assert "**dry-run ok** — 12 to create, 0 to update, 0 to delete, 0 unchanged." in md
    assert "| **total** | 12 | 0 | 0 | 0 | 7 |" in md  # 7 objects wait for their new namespaces
    assert "- **deferred** `Deployment/ml-team/trainer` (`40-workloads/trainer.yaml:2`)" in md
    assert "<details><summary>diff</summary>" in md and "  ```diff" in md


def test_rejected_object_is_a_table_row_and_exit_1(sim: tuple[SimCluster, Path], tmp_path: Path) -> None:  # noqa: F811
    _, kubeconfig = sim
    apply_example(kubeconfig)
    repo = copy_example(tmp_path)
    claim = repo / "30-claims" / "single-gpu-template.yaml"
    claim.write_text(claim.read_text().replace("deviceClassName:", "deviceClassNam:"))
    done = run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "markdown")
    assert done.exit_code == 1, done.output
    assert "**dry-run failed: 1 object(s) rejected**" in done.stdout
    assert "### Rejected by the server" in done.stdout
    row = next(
        line
        for line in done.stdout.splitlines()
        if line.startswith("| `ResourceClaimTemplate/ml-team/single-gpu`")
    )
    assert "single-gpu-template.yaml:" in row
    as_json = json.loads(run("plan", str(repo), "--kubeconfig", str(kubeconfig), "-q", "-o", "json").stdout)
    rejected = [o for o in as_json["objects"] if o["error"]]
    assert [o["ref"] for o in rejected] == ["ResourceClaimTemplate/ml-team/single-gpu"]
    assert rejected[0]["op"] is None and as_json["ok"] is False


# ---- pure rendering ------------------------------------------------------------------------------------


def _result(*objects: ObjectResult) -> DryRunResult:
    summary: dict[str, dict[str, int]] = {}
    for o in objects:
        counts = summary.setdefault(
            o.label, {"create": 0, "update": 0, "delete": 0, "unchanged": 0, "deferred": 0}
        )
        if not o.error:
            counts[o.op] += 1
    return DryRunResult(list(objects), summary, ok=not any(o.error for o in objects))


def test_markdown_fence_outlasts_backticks_in_the_diff() -> None:
    obj = ObjectResult("ConfigMap/default/doc", "update", "doc.yaml", 1, stage=0)
    obj.diff = "--- live\n+++ desired\n-  text: plain\n+  text: |\n+    ```sh\n+    run\n+    ```\n"
    md = render_dry_run_markdown(_result(obj))
    assert "  ````diff" in md and md.count("  ````") == 2


def test_no_changes_says_so() -> None:
    obj = ObjectResult("Namespace//ml", "unchanged", "ns.yaml", 1, stage=0)
    md = render_dry_run_markdown(_result(obj))
    assert "No changes: the cluster already matches." in md
    assert dry_run_json(_result(obj))["changes_pending"] is False


def test_skipped_files_in_every_format() -> None:
    obj = ObjectResult("Namespace//ml", "create", "ns.yaml", 1, stage=0)
    skipped = [SkippedFile("zz-stray.yaml", "outside the `paths` of dra-gitops.yaml")]
    assert "SKIP zz-stray.yaml" in render_plan(_result(obj), "text", skipped=skipped)
    assert json.loads(render_plan(_result(obj), "json", skipped=skipped))["skipped"] == [
        {"path": "zz-stray.yaml", "reason": "outside the `paths` of dra-gitops.yaml"}
    ]
    md = render_plan(_result(obj), "markdown", skipped=skipped)
    assert (
        "### Skipped (not checked, not applied)\n\n- `zz-stray.yaml`: outside the \\`paths\\` of dra-gitops.yaml"
        in md
    )
    with pytest.raises(ValueError, match="unknown plan format"):
        render_plan(_result(obj), "sarif")
