"""A config mistake never passes silently: the published JSON Schema is the one enforced, a check that loads
no object while files were skipped fails in every format, and every format says where a rendered object came
from (`renderedBy`)."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner
from lookalikes import chart_config, chart_named_after_itself, plugin_driver_files, write

from reconciler.cli import cli
from reconciler.model.repoconfig import SCHEMA, schema_text

REPO = Path(__file__).resolve().parents[2]


def test_the_published_schema_is_the_enforced_one_and_accepts_the_examples() -> None:
    assert (REPO / "docs/repo-config.schema.json").read_text() == schema_text()
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    for config in [
        REPO / "manifests-example/dra-gitops.yaml",
        REPO / "examples/helm/dra-gitops.yaml",
    ]:
        jsonschema.validate(yaml.safe_load(config.read_text()), SCHEMA)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"path": ["a"]}, SCHEMA)


@pytest.mark.parametrize(
    ("text", "error"),
    [
        (
            "charts:\n  - releaseName: a\n    chart: c\n    namespace: n\n    canaryfor: b\n",
            ":5: unknown key `charts[0].canaryfor`; did you mean `canaryFor`?",
        ),
        (
            "drivers:\n  - name: d\n    allowNoNode: true\n",
            ":3: unknown key `drivers[0].allowNoNode`; did you mean `allowNoNodes`?",
        ),
        (
            "kind: List\nitems: []\nconfig:\n  exclud: [a]\n",
            ":4: unknown key `exclud`; did you mean `exclude`?",
        ),
        (
            "drivers:\n  - name: d\n    workloads: [{kind: Job, name: x}]\n",
            ":3: `drivers[0].workloads[0].kind` must be one of",
        ),
    ],
)
def test_each_mistake_names_its_line_and_the_closest_key(tmp_path: Path, text: str, error: str) -> None:
    write(
        tmp_path,
        {"dra-gitops.yaml": text, "a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
    )
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "-q"])
    assert result.exit_code == 1
    assert f"dra-gitops.yaml{error}" in result.stderr, result.stderr


@pytest.mark.parametrize("output", ["text", "json", "sarif", "github"])
def test_a_check_that_loads_nothing_while_files_were_skipped_fails(tmp_path: Path, output: str) -> None:
    # An `exclude` meant for one folder that leaves out every manifest.
    write(tmp_path, {"dra-gitops.yaml": "exclude: ['*']\n", **plugin_driver_files()})
    result = CliRunner().invoke(cli, ["check", str(tmp_path), "-q", "-o", output])
    assert result.exit_code == 1, result.output
    assert "nothing was checked: 0 objects loaded while 3 manifest file(s) were skipped" in result.stdout
    assert "matches the `exclude` of" in result.stdout


def test_findings_on_rendered_objects_carry_rendered_by(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path, chart_named_after_itself())
    write(tmp_path, {"dra-gitops.yaml": chart_config(main={"canaryNodes": "any"}, canary={})})
    monkeypatch.chdir(tmp_path)
    by = "release gpu (charts/gpu-lookalike)"
    report = json.loads(CliRunner().invoke(cli, ["check", ".", "-q", "-o", "json"]).stdout)
    assert {f.get("renderedBy") for f in report["findings"] if f["rule"] == "driver-canary"} == {by}
    sarif = json.loads(CliRunner().invoke(cli, ["check", ".", "-q", "-o", "sarif"]).stdout)
    results = [r for r in sarif["runs"][0]["results"] if r["ruleId"] == "driver-canary"]
    assert results and all(r["properties"]["renderedBy"] == by for r in results)
    github = CliRunner().invoke(cli, ["check", ".", "-q", "-o", "github"]).stdout
    assert f"(rendered by {by})" in github
