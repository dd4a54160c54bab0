"""Chart releases (`charts:` of the repository config) rendered by Helm's own engine (helm-python-sdk): the
example chart's main and canary releases, the driver-canary rule over them, values files and schema, and
every error pointing at a file of the repository."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import GitRemote

from reconciler.cli import cli
from reconciler.delivery.desired import desired_from_trees, load_directories, load_git_revisions
from reconciler.errors import DraGitopsError, EnvironmentProblem, ManifestError, UserError
from reconciler.model.loader import DEFAULT_LIMITS
from reconciler.source import git as git_source
from reconciler.source.treecopy import decode_tree, encode_tree

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "helm"
MAIN, CANARY = (
    "DaemonSet/gpu-system/gpu-driver-kubelet-plugin",
    "DaemonSet/gpu-system/gpu-driver-canary-kubelet-plugin",
)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    shutil.copytree(EXAMPLE, root)
    monkeypatch.chdir(root)
    return root


@pytest.fixture
def remote(tmp_path: Path) -> GitRemote:
    remote = GitRemote(tmp_path / "git")
    shutil.copytree(EXAMPLE, remote.work, dirs_exist_ok=True)
    return remote


def objects(root: Path) -> dict[str, object]:
    return {str(m.ref): m for m in load_directories([root], DEFAULT_LIMITS).manifests.manifests}


def set_values(root: Path, file: str, values: dict[str, object]) -> None:
    (root / file).write_text(yaml.safe_dump(values))


def config(root: Path) -> dict[str, object]:
    return dict(yaml.safe_load((root / "dra-gitops.yaml").read_text()))


def check_revisions(remote: GitRemote, base: str, head: str) -> tuple[int, str]:
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-q"]
    )
    return result.exit_code, result.output


# ---- the example's two releases ----------------------------------------------------------------------------


def test_the_main_and_canary_releases_render_into_the_release_namespace_paired(repo: Path) -> None:
    found = objects(repo)
    main, canary = found[MAIN], found[CANARY]
    assert main.path == canary.path == "charts/gpu-driver/templates/kubelet-plugin.yaml"  # type: ignore[attr-defined]
    assert main.rendered_by == "release gpu-driver (charts/gpu-driver; values/main.yaml)"  # type: ignore[attr-defined]
    assert main.where.startswith("release gpu-driver (charts/gpu-driver; values/main.yaml) from charts/")  # type: ignore[attr-defined]
    # The canary release's plugin is the canary of the main one (name without the release-name prefix).
    assert canary.annotations["dra-gitops.io/canary-for"] == "gpu-driver-kubelet-plugin"  # type: ignore[attr-defined]
    assert "dra-gitops.io/canary-for" not in main.annotations  # type: ignore[attr-defined]
    terms = canary.body["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]  # type: ignore[attr-defined]
    [expression] = terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ]
    assert (expression["key"], expression["operator"]) == ("dra-gitops.io/canary", "In")
    # `helm test` hooks are left out; the chart's files are read by Helm, never as manifests.
    assert not any(ref.startswith("Pod/") for ref in found)
    desired = load_directories([repo], DEFAULT_LIMITS)
    assert not [s for s in desired.skipped if s.path.startswith(("charts/", "values/"))]


def test_value_files_merge_in_order_then_the_inline_values(repo: Path) -> None:
    set_values(repo, "values/extra.yaml", {"image": {"tag": "v0.3.1"}})
    data = config(repo)
    data["charts"][0]["valueFiles"] = ["values/main.yaml", "values/extra.yaml"]  # type: ignore[index]
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(data))
    image = objects(repo)[MAIN].body["spec"]["template"]["spec"]["containers"][0]["image"]  # type: ignore[attr-defined]
    assert image == "registry.example.com/gpu-example-driver:v0.3.1"
    data["charts"][0]["values"] = {"image": {"tag": "v0.3.2"}}  # type: ignore[index]
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(data))
    image = objects(repo)[MAIN].body["spec"]["template"]["spec"]["containers"][0]["image"]  # type: ignore[attr-defined]
    assert image.endswith(":v0.3.2")


def test_the_example_passes_check(repo: Path) -> None:
    result = CliRunner().invoke(cli, ["check", str(repo), "-q"])
    assert result.exit_code == 0, result.output
    assert "12 objects" in result.output


# ---- the driver canary with charts --------------------------------------------------------------------------


def test_a_main_release_upgrade_without_its_canary_is_denied_then_the_canary_and_the_promotion_pass(
    remote: GitRemote,
) -> None:
    base = remote.commit_and_push("driver v0.3.0 from the chart")
    set_values(remote.work, "values/main.yaml", {"canaryNodes": "exclude", "image": {"tag": "v0.4.0"}})
    straight = remote.commit_and_push("main release straight to v0.4.0")
    code, output = check_revisions(remote, base, straight)
    assert code == 1, output
    assert (
        "FAIL release gpu-driver (charts/gpu-driver; values/main.yaml) from charts/gpu-driver/templates/kubelet-plugin.yaml:"
        in output
    )
    assert "driver-canary" in output and "gpu-driver-canary-kubelet-plugin" in output

    remote.git("reset", "--quiet", "--hard", base)
    set_values(remote.work, "values/canary.yaml", {"canaryNodes": "only", "image": {"tag": "v0.4.0"}})
    canary = remote.commit("canary release to v0.4.0")
    remote.push("--force")
    assert check_revisions(remote, base, canary)[0] == 0
    set_values(remote.work, "values/main.yaml", {"canaryNodes": "exclude", "image": {"tag": "v0.4.0"}})
    promoted = remote.commit_and_push("promote v0.4.0 to the main release")
    code, output = check_revisions(remote, canary, promoted)
    assert code == 0, output


def test_a_values_only_change_shows_the_objects_it_changes(remote: GitRemote) -> None:
    base = remote.commit_and_push("base")
    set_values(remote.work, "values/canary.yaml", {"canaryNodes": "only", "image": {"tag": "v0.4.0"}})
    head = remote.commit_and_push("canary v0.4.0")
    result = CliRunner().invoke(
        cli, ["check", "--repo", str(remote.work), "--base", base, "--head", head, "-q", "-o", "json"]
    )
    assert json.loads(result.stdout)["summary"]["changes"] == {"create": 0, "update": 1, "delete": 0}
    states = load_git_revisions(remote.work, [base, head], "", DEFAULT_LIMITS)
    changed = [
        str(m.ref)
        for m in states[1].manifests.manifests
        if m.body != next(b.body for b in states[0].manifests.manifests if b.ref == m.ref)
    ]
    assert changed == [CANARY]


def test_a_kept_copy_of_a_chart_revision_renders_without_its_commit(remote: GitRemote) -> None:
    sha = remote.commit_and_push("charts")
    tree = git_source.read_tree(git_source.open_repo(remote.work), sha, "", DEFAULT_LIMITS)
    copy = decode_tree(encode_tree(tree), "ConfigMap/dra-gitops/x")
    shutil.rmtree(remote.work / ".git")
    [state] = desired_from_trees([copy], "", DEFAULT_LIMITS)
    assert {MAIN, CANARY} <= {str(m.ref) for m in state.manifests.manifests}


# ---- bad input ----------------------------------------------------------------------------------------------


def test_values_against_the_schema_are_refused_at_the_values_file(repo: Path) -> None:
    set_values(repo, "values/main.yaml", {"canaryNodes": "sometimes"})
    with pytest.raises(ManifestError) as error:
        objects(repo)
    assert error.value.where == "values/main.yaml"
    assert "values.schema.json" in str(error.value) and "canaryNodes" in str(error.value)


def test_a_template_error_names_the_template_file_and_line(repo: Path) -> None:
    (repo / "charts/gpu-driver/templates/broken.yaml").write_text(
        "# line 1\nname: {{ .Values.nope.deeper }}\n"
    )
    with pytest.raises(ManifestError) as error:
        objects(repo)
    assert error.value.where == "charts/gpu-driver/templates/broken.yaml:2"
    assert "template error" in str(error.value) and "nope" in str(error.value)
    result = CliRunner().invoke(cli, ["check", str(repo), "-q"])
    assert result.exit_code == 1 and "charts/gpu-driver/templates/broken.yaml:2" in result.output


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"valueFiles": ["values/missing.yaml"]}, "values file values/missing.yaml does not exist"),
        ({"chart": "../outside"}, "chart ../outside is outside the repository"),
        ({"chart": "charts/nope"}, "chart charts/nope does not exist"),
        ({"canaryFor": "nobody"}, "canaryFor 'nobody' is not a release of `charts`"),
        ({"releaseName": "Not_A_Name"}, "is not a valid release name"),
        ({"colour": "blue"}, "unknown key `charts[1].colour`"),
    ],
)
def test_a_bad_release_entry_is_refused_naming_the_config(
    repo: Path, change: dict[str, object], message: str
) -> None:
    data = config(repo)
    data["charts"][1].update(change)  # type: ignore[index]
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as error:
        objects(repo)
    assert message in str(error.value)
    assert "dra-gitops.yaml" in (error.value.where or "")


def test_without_the_helm_extra_a_chart_is_a_clear_error(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "helm_python", None)  # as if helm-python-sdk were not installed
    with pytest.raises(EnvironmentProblem, match=r"pip install 'dra-gitops\[helm\]'"):
        objects(repo)


def test_a_canary_release_without_a_matching_main_workload_is_refused(repo: Path) -> None:
    data = config(repo)
    data["charts"].append(  # type: ignore[attr-defined]
        {
            "releaseName": "other",
            "chart": "charts/gpu-driver",
            "namespace": "other-system",
            "canaryFor": "gpu-driver",
        }
    )
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(
        DraGitopsError, match="is the canary of release gpu-driver, but none of its driver workloads"
    ):
        objects(repo)


def test_a_release_renders_once_per_content_of_its_inputs(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import helm_python

    calls: list[str] = []
    real = helm_python.Chart.load

    def counted(path: object) -> object:  # Helm loads the chart once per render
        calls.append(str(path))
        return real(path)  # type: ignore[arg-type]

    monkeypatch.setattr(helm_python.Chart, "load", counted)
    objects(repo)
    objects(repo)
    assert len(calls) == 2  # once for each release
    set_values(repo, "values/canary.yaml", {"canaryNodes": "only", "image": {"tag": "v0.4.0"}})
    found = objects(repo)
    assert len(calls) == 3  # the canary release's values changed: it alone renders again
    assert found[CANARY].body["spec"]["template"]["spec"]["containers"][0]["image"].endswith(":v0.4.0")  # type: ignore[attr-defined]


def test_a_chart_kept_as_a_tgz_in_the_repository_renders_the_same(repo: Path) -> None:
    import helm_python

    archive = Path(helm_python.package(repo / "charts/gpu-driver", destination=repo / "charts"))
    assert archive.name == "gpu-driver-0.3.0.tgz"
    expected = {ref: m.body for ref, m in objects(repo).items()}  # type: ignore[attr-defined]
    shutil.rmtree(repo / "charts/gpu-driver")
    data = config(repo)
    for release in data["charts"]:  # type: ignore[attr-defined]
        release["chart"] = "charts/gpu-driver-0.3.0.tgz"
    (repo / "dra-gitops.yaml").write_text(yaml.safe_dump(data))
    found = objects(repo)
    assert {ref: m.body for ref, m in found.items()} == expected  # type: ignore[attr-defined]
    main = found[MAIN]
    assert main.path == "charts/gpu-driver-0.3.0.tgz"  # type: ignore[attr-defined]  # a real file
    assert main.rendered_by.endswith(", templates/kubelet-plugin.yaml")  # type: ignore[attr-defined]
