"""The docs say what the code does: their examples run, their links resolve, their tables are complete."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.loop.config.targetfile import load_targets
from reconciler.outcome import EXIT_CODES, Outcome, requested_rollback_exit_code

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "examples" / "ci" / "README.md"]
EXAMPLE_POLICIES = ROOT / "examples" / "policies"


def _code_blocks(path: Path, language: str) -> list[tuple[int, str]]:
    text = path.read_text()
    blocks = []
    for match in re.finditer(rf"^```{language}\n(.*?)^```", text, re.S | re.M):
        blocks.append((text[: match.start()].count("\n") + 2, match.group(1)))
    return blocks


@pytest.mark.parametrize("doc", [d for d in DOCS if d.exists()], ids=lambda p: p.name)
def test_relative_links_resolve(doc: Path) -> None:
    for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", doc.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (doc.parent / target).exists(), f"{doc.relative_to(ROOT)}: broken link {target}"


def test_targets_examples_in_the_docs_load() -> None:
    found = 0
    for doc in DOCS:
        if not doc.exists():
            continue
        for line, block in _code_blocks(doc, "yaml"):
            if re.search(r"^targets:", block, re.M):
                targets = load_targets(block, f"{doc.name}:{line}")
                assert targets, f"{doc.name}:{line}"
                found += 1
    assert found >= 1
    deployed = ROOT / "deploy" / "base" / "config" / "targets.yaml"
    assert [t.name for t in load_targets(deployed.read_text(), str(deployed))] == ["gpu-cluster"]


def test_example_policy_tests_pass() -> None:
    result = CliRunner().invoke(cli, ["policy", "test", str(EXAMPLE_POLICIES)])
    assert result.exit_code == 0, result.output
    assert "5 passed, 0 failed" in result.output


def test_example_policy_passes_the_example_and_denies_a_big_request(tmp_path: Path) -> None:
    runner = CliRunner()
    example = ROOT / "manifests-example"
    ok = runner.invoke(cli, ["check", str(example), "--policy", str(EXAMPLE_POLICIES), "-q"])
    assert ok.exit_code == 0, ok.output
    repo = tmp_path / "repo"
    shutil.copytree(example, repo)
    template = repo / "30-claims" / "single-gpu-template.yaml"
    template.write_text(template.read_text().replace("count: 1", "count: 8"))
    denied = runner.invoke(cli, ["check", str(repo), "--policy", str(EXAMPLE_POLICIES), "-q"])
    assert denied.exit_code == 1, denied.output
    assert (
        "single-gpu-template.yaml:2  max-devices-per-request  ResourceClaimTemplate/ml-team/single-gpu: "
        in denied.output
    )
    assert "asks for 8 devices; at most 4 per request" in denied.output


def test_architecture_names_only_modules_that_exist() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text().replace("tests/test_docs.py", "")
    package = ROOT / "reconciler"
    known = {p.name for p in package.rglob("*.py")}
    names = set(re.findall(r"[\w/]+\.py", text))
    assert len(names) > 40
    for name in sorted(names):
        if "/" in name:
            assert (package / name).is_file(), f"docs/architecture.md names {name}, which does not exist"
        else:
            assert name in known, f"docs/architecture.md names {name}, which does not exist"


def test_readme_command_table_lists_every_command() -> None:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    listed = set(re.findall(r"^\| `([a-z]+)", table, re.M))
    assert listed == set(cli.commands), sorted(set(cli.commands) ^ listed)


def test_the_tests_read_nothing_beside_the_repository() -> None:
    """A bare clone runs its tests: test data lives under tests/ (only the optional run of the contract
    suite beside the repository, which skips when it is absent, looks there)."""
    beside = re.compile(r'parents\[[3-9]\]|\.parent\s*/\s*"shared"')
    optional = {ROOT / "tests" / "sim" / "test_shared_contract.py"}
    readers = [
        f"{path.relative_to(ROOT)}:{number}"
        for folder in ("tests", "benchmarks")
        for path in sorted((ROOT / folder).rglob("*.py"))
        if path not in optional
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if beside.search(line)
    ]
    assert readers == []


def _readme_codes(row_start: str) -> set[int]:
    """The exit codes the README's table row starting with `row_start` lists (its last cell)."""
    text = (ROOT / "README.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith(row_start)]
    assert len(rows) == 1, row_start
    return {int(code) for code in re.findall(r"\b\d\b", rows[0].rstrip("|").rsplit("|", 1)[-1])}


def test_the_readme_exit_codes_are_those_of_the_outcomes() -> None:
    meanings = {int(code) for code in re.findall(r"^\| (\d) \| ", (ROOT / "README.md").read_text(), re.M)}
    assert set(EXIT_CODES.values()) <= meanings
    delivered = (
        Outcome.APPLIED,
        Outcome.DENIED,
        Outcome.DRY_RUN_FAILED,
        Outcome.APPLY_FAILED,
        Outcome.VERIFY_FAILED,
    )
    assert {o.exit_code for o in delivered} <= _readme_codes("| `apply` |")
    assert set(EXIT_CODES.values()) <= _readme_codes("| `run` |")  # --once: the worst pass's
    attempted = (
        *delivered,
        Outcome.UNVERIFIED,
        Outcome.INTERRUPTED,
        Outcome.ROLLED_BACK,
        Outcome.ROLLBACK_FAILED,
    )
    assert {o.exit_code for o in attempted} <= _readme_codes("| `status` |")
    requested = {requested_rollback_exit_code(o) for o in (Outcome.ROLLED_BACK, Outcome.ROLLBACK_FAILED)}
    assert requested <= _readme_codes("| `rollback")
