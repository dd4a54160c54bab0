"""Manifest files the load passes over are named, with a reason, from a directory and from Git alike."""

from __future__ import annotations

import json
import os
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.delivery.desired import load_directories, load_git_revisions
from reconciler.model.loader import DEFAULT_LIMITS, SkippedFile, load_paths, skip_reason
from reconciler.sim.server import SimCluster


def cm(name: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: default\n"


CONFIG = "apiVersion: v1\nkind: List\nitems: []\nconfig:\n  paths: [apps, extra/one.yaml]\n"

TREE = {
    "dra-gitops.yaml": CONFIG,
    "apps/a.yaml": cm("a"),
    "apps/.draft.yaml": cm("draft"),  # hidden file inside a selected path
    "apps/sub/dra-gitops.yaml": "apiVersion: v1\nkind: List\nitems: []\n",  # only the root one is config
    "apps/notes.txt": "not a manifest name",
    "extra/one.yaml": cm("one"),
    "extra/two.yaml": cm("two"),  # a sibling of a selected file
    "zz-stray.yaml": cm("stray"),
    ".staging/b.yaml": cm("b"),  # hidden directory outside the selected paths
    ".github/workflows/ci.yml": "on: push\njobs: {}\n",  # manifest-named, but no Kubernetes object
    "package.json": '{"name": "x"}',
    "README.md": "apiVersion kind",
}

OUTSIDE = "outside the `paths` of {root}/dra-gitops.yaml"
EXPECTED = [
    (".staging/b.yaml", "in hidden directory .staging"),
    ("apps/.draft.yaml", "hidden file"),
    ("apps/sub/dra-gitops.yaml", "named dra-gitops.yaml, read as the repository config only at the root"),
    ("extra/two.yaml", OUTSIDE),
    ("zz-stray.yaml", OUTSIDE),
]


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return root


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def commit_tree(root: Path) -> str:
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "ci@example.com")
    git(root, "config", "user.name", "CI")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "tree")
    return git(root, "rev-parse", "HEAD")


def expected(shown_root: str, config_root: str) -> list[SkippedFile]:
    prefix = f"{shown_root}/" if shown_root else ""
    return [SkippedFile(prefix + path, reason.format(root=config_root)) for path, reason in EXPECTED]


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return write_tree(tmp_path / "repo", TREE)


# --- the rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("relative", "reason"),
    [
        ("a.yaml", None),
        ("dir/a.json", None),
        ("dra-gitops.yaml", ""),
        (".dra-gitops.yaml", ""),
        (".hidden.yaml", "hidden file"),
        ("d/.e/f/a.yml", "in hidden directory .e"),
        ("d/.dra-gitops.yaml", "hidden file"),
        ("d/dra-gitops.yaml", "named dra-gitops.yaml, read as the repository config only at the root"),
    ],
)
def test_skip_reason(relative: str, reason: str | None) -> None:
    assert skip_reason(relative) == reason


# --- directories on disk -----------------------------------------------------------------------------


def test_directory_with_config_names_every_skipped_manifest(tree: Path) -> None:
    desired = load_directories([Path("repo")], DEFAULT_LIMITS)
    assert [m.ref.name for m in desired.manifests.manifests] == ["a", "one"]
    assert desired.skipped == expected("repo", "repo")
    assert desired.skipped is desired.manifests.skipped  # one list, carried by the load result


def test_version_control_directories_and_non_manifests_are_not_reported(tree: Path) -> None:
    write_tree(tree, {".git/refs/x.yaml": cm("x")})
    paths = {s.path for s in load_directories([Path("repo")], DEFAULT_LIMITS).skipped}
    assert not {p for p in paths if ".git/" in p or "ci.yml" in p or "package.json" in p}


def test_directory_without_config_reports_hidden_manifests_only(tree: Path) -> None:
    (tree / "dra-gitops.yaml").unlink()
    (tree / "package.json").unlink()  # without `paths` it would be loaded, and refused, as kubectl would
    desired = load_directories([Path("repo")], DEFAULT_LIMITS)
    assert {m.ref.name for m in desired.manifests.manifests} == {"a", "one", "two", "stray"}
    assert [(s.path, s.reason) for s in desired.skipped] == [
        ("repo/.staging/b.yaml", "in hidden directory .staging"),
        ("repo/apps/.draft.yaml", "hidden file"),
        ("repo/apps/sub/dra-gitops.yaml", EXPECTED[2][1]),
    ]


def test_config_selecting_the_root_itself_skips_nothing_outside(tree: Path) -> None:
    (tree / "dra-gitops.yaml").write_text("paths: ['.']\n")
    (tree / "package.json").unlink()
    skipped = load_directories([Path("repo")], DEFAULT_LIMITS).skipped
    assert [s.reason for s in skipped] == ["in hidden directory .staging", "hidden file", EXPECTED[2][1]]


def test_a_link_into_a_selected_directory_is_not_outside(tree: Path) -> None:
    os.symlink("apps", tree / "apps-link")
    skipped = load_directories([Path("repo")], DEFAULT_LIMITS).skipped
    assert not [s for s in skipped if s.path.startswith("repo/apps-link")]


def test_links_leaving_the_repository_inside_hidden_directories_are_not_followed(tree: Path) -> None:
    outside = write_tree(tree.parent / "elsewhere", {"x.yaml": cm("x")})
    os.symlink(outside, tree / ".venv")
    os.symlink(outside / "x.yaml", tree / ".staging" / "link.yaml")
    skipped = load_directories([Path("repo")], DEFAULT_LIMITS).skipped
    assert [s.path for s in skipped] == [s.path for s in expected("repo", "repo")]


def test_links_outside_the_selected_paths_are_not_followed(tree: Path) -> None:
    # Loading never reads there, so a link leaving the repository or a loop must not fail the check.
    outside = write_tree(tree.parent / "elsewhere", {"x.yaml": cm("x")})
    os.symlink(outside, tree / "vendor")
    os.symlink("loop", tree / "loop")
    desired = load_directories([Path("repo")], DEFAULT_LIMITS)
    assert [m.ref.name for m in desired.manifests.manifests] == ["a", "one"]
    assert desired.skipped == expected("repo", "repo")


def test_a_file_given_directly_skips_nothing(tree: Path) -> None:
    assert load_paths([Path("repo/zz-stray.yaml")]).skipped == []


# --- Git trees ---------------------------------------------------------------------------------------


def test_git_revision_names_the_same_skipped_manifests(tree: Path) -> None:
    sha = commit_tree(tree)
    (desired,) = load_git_revisions(tree, [sha], "", DEFAULT_LIMITS)
    assert [m.ref.name for m in desired.manifests.manifests] == ["a", "one"]
    expected_git = [SkippedFile(path, reason.replace("{root}/", "")) for path, reason in EXPECTED]
    assert desired.skipped == expected_git


def test_git_subdirectory_paths_are_shown_from_the_repository_root(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    write_tree(root / "deploy", TREE)
    write_tree(root, {"other/x.yaml": cm("x")})  # outside --path: not the checked tree at all
    sha = commit_tree(root)
    (desired,) = load_git_revisions(root, [sha], "deploy", DEFAULT_LIMITS)
    assert desired.skipped == [
        SkippedFile(f"deploy/{path}", reason.format(root="deploy")) for path, reason in EXPECTED
    ]


# --- the check command, every format, both sources ---------------------------------------------------


def check(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["check", "-q", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.stdout


@pytest.fixture(params=["disk", "git"])
def source(request: pytest.FixtureRequest, tree: Path) -> tuple[list[str], str]:
    """Arguments that check `tree` from disk or from Git, and how zz-stray.yaml is shown."""
    if request.param == "disk":
        return ["repo"], "repo/zz-stray.yaml"
    base = commit_tree(tree)
    write_tree(tree, {"apps/c.yaml": cm("c")})
    git(tree, "add", "-A")
    git(tree, "commit", "-q", "-m", "c")
    return ["--repo", str(tree), "--base", base, "--head", "HEAD"], "zz-stray.yaml"


def test_check_text_and_json_name_the_stray_file(source: tuple[list[str], str]) -> None:
    args, stray = source
    code, text = check(*args)
    assert code == 0
    assert f"  SKIP {stray}  outside the `paths` of " in text
    assert "(5 skipped)" in text
    code, out = check(*args, "-o", "json")
    doc = json.loads(out)
    assert doc["summary"]["skipped"] == 5
    assert stray in {s["path"] for s in doc["skipped"]}


def test_check_markdown_sarif_junit_github_name_the_stray_file(source: tuple[list[str], str]) -> None:
    args, stray = source
    assert f"| `{stray}` | outside the \\`paths\\` of " in check(*args, "-o", "markdown")[1]
    run = json.loads(check(*args, "-o", "sarif")[1])["runs"][0]
    notes = run["invocations"][0]["toolExecutionNotifications"]
    assert stray in {n["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for n in notes}
    suite = ET.fromstring(check(*args, "-o", "junit")[1]).find("testsuite[@name='skipped-files']")
    assert suite is not None and stray in {case.get("name") for case in suite.findall("testcase")}
    assert f"::notice file={stray},title=manifest file skipped::" in check(*args, "-o", "github")[1]


# --- plan and apply ----------------------------------------------------------------------------------


def test_plan_and_apply_name_the_stray_file(sim_cluster: SimCluster, tmp_path: Path) -> None:
    root = write_tree(
        tmp_path / "small",
        {
            "dra-gitops.yaml": "paths: [apps]\n",
            "apps/a.yaml": cm("a"),
            "zz-stray.yaml": cm("stray"),
        },
    )
    kubeconfig = str(sim_cluster.write_kubeconfig(tmp_path / "kubeconfig"))
    runner = CliRunner()
    applied = runner.invoke(cli, ["apply", str(root), "--kubeconfig", kubeconfig, "-q", "-o", "json"])
    assert applied.exit_code == 0, applied.output
    report = json.loads(applied.stdout)
    assert report["outcome"] == "applied"
    reason = f"outside the `paths` of {root}/dra-gitops.yaml"
    assert report["skipped"] == [{"path": f"{root}/zz-stray.yaml", "reason": reason}]

    again = runner.invoke(cli, ["apply", str(root), "--kubeconfig", kubeconfig, "-q"])
    assert again.exit_code == 0, again.output
    assert f"  SKIP {root}/zz-stray.yaml  {reason}\n" in again.stdout
    assert "(1 skipped)" in again.stdout

    plan = runner.invoke(cli, ["plan", str(root), "--kubeconfig", kubeconfig, "-q"])
    assert plan.exit_code == 0, plan.output
    assert plan.stdout.endswith(
        f"skipped (not checked, not applied):\n  SKIP {root}/zz-stray.yaml  {reason}\n"
    )


# --- `exclude` in the repository config ---------------------------------------------------------------

EXCLUDE_TREE = {
    "dra-gitops.yaml": "paths: [apps]\nexclude: ['apps/drafts', '*.local.yaml']\n",
    "apps/a.yaml": cm("a"),
    "apps/drafts/wip.yaml": cm("wip"),
    "apps/sub/b.local.yaml": cm("b-local"),
    "apps/sub/b.yaml": cm("b"),
}
EXCLUDED = [
    ("apps/drafts/wip.yaml", "matches the `exclude` of {root}dra-gitops.yaml"),
    ("apps/sub/b.local.yaml", "matches the `exclude` of {root}dra-gitops.yaml"),
]


def test_exclude_leaves_files_out_and_names_them_from_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path / "repo", EXCLUDE_TREE)
    desired = load_directories([Path("repo")], DEFAULT_LIMITS)
    assert sorted(m.ref.name for m in desired.manifests.manifests) == ["a", "b"]
    assert desired.skipped == [SkippedFile(f"repo/{p}", r.format(root="repo/")) for p, r in EXCLUDED]


def test_exclude_without_paths_applies_to_the_whole_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    write_tree(tmp_path / "repo", {**EXCLUDE_TREE, "dra-gitops.yaml": "exclude: ['apps/drafts/']\n"})
    desired = load_directories([Path("repo")], DEFAULT_LIMITS)
    assert sorted(m.ref.name for m in desired.manifests.manifests) == ["a", "b", "b-local"]
    assert [s.path for s in desired.skipped] == ["repo/apps/drafts/wip.yaml"]


def test_exclude_from_git(tmp_path: Path) -> None:
    root = write_tree(tmp_path / "repo", EXCLUDE_TREE)
    sha = commit_tree(root)
    (desired,) = load_git_revisions(root, [sha], "", DEFAULT_LIMITS)
    assert sorted(m.ref.name for m in desired.manifests.manifests) == ["a", "b"]
    assert desired.skipped == [SkippedFile(p, r.format(root="")) for p, r in EXCLUDED]
