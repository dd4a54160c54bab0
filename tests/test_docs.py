"""The docs say what the code does: their examples run, their links resolve, their tables are complete."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import click
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


def _verbs() -> dict[str, click.Command]:
    """Every command a user runs, by its words: `check`, `policy test`, `sim serve`, ..."""
    found: dict[str, click.Command] = {}
    for name, command in cli.commands.items():
        if isinstance(command, click.Group):
            found.update({f"{name} {sub}": c for sub, c in command.commands.items()})
        else:
            found[name] = command
    return found


def _command_rows() -> dict[str, set[int]]:
    """{verb: exit codes} of the README's command table; a row belongs to the longest verb it starts with."""
    text = (ROOT / "README.md").read_text()
    table = text.split("## Commands", 1)[1].split("\n## ", 1)[0]
    verbs = sorted(_verbs(), key=len, reverse=True)
    rows: dict[str, set[int]] = {}
    for line in table.splitlines():
        cell = re.match(r"^\| `([^`]+)`", line)
        if not cell:
            continue
        verb = next(v for v in verbs if cell.group(1) == v or cell.group(1).startswith(v + " "))
        assert verb not in rows, f"two README rows for {verb}"
        rows[verb] = {
            int(code) for code in re.findall(r"\b\d\b", line.rstrip().rstrip("|").rsplit("|", 1)[-1])
        }
    return rows


def test_the_readme_exit_code_table_lists_every_verbs_codes() -> None:
    rows = _command_rows()
    verbs = _verbs()
    assert set(rows) == set(verbs), sorted(set(rows) ^ set(verbs))
    documented = {int(code) for code in re.findall(r"^\| (\d) \| ", (ROOT / "README.md").read_text(), re.M)}
    for verb, command in verbs.items():
        assert rows[verb] <= documented, verb
        # Every verb refuses a usage mistake with 2.
        result = CliRunner().invoke(cli, [*verb.split(), "--no-such-option"])
        assert result.exit_code == 2, (verb, result.output)
        assert 2 in rows[verb], f"README: {verb} exits 2 on a usage error"
        # A verb that can talk to an OPA server exits 4 when it fails (tests/policy/test_opa_errors.py).
        if any(param.name == "opa_url" for param in command.params):
            assert 4 in rows[verb], f"README: {verb} takes --opa-url and exits 4 when the server fails"
    assert rows["policy test"] == {0, 1, 2, 4}  # passed; failed or an OPA difference; usage; OPA failed
    assert rows["policy bundle"] == {0, 1, 2}  # written; a policy or key that cannot be bundled; usage


def test_policy_test_and_bundle_exit_with_the_documented_codes(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(cli, ["policy", "test", str(EXAMPLE_POLICIES)]).exit_code == 0
    (tmp_path / "t_test.rego").write_text("package dra.t_test\n\ntest_fails if 1 == 2\n")
    assert runner.invoke(cli, ["policy", "test", str(tmp_path)]).exit_code == 1
    assert runner.invoke(cli, ["policy", "test", "--opa-url", "ftp://x:1"]).exit_code == 2
    assert runner.invoke(cli, ["policy", "test", "--opa-url", "http://127.0.0.1:9", "-q"]).exit_code == 4
    out = tmp_path / "bundle.tar.gz"
    assert runner.invoke(cli, ["policy", "bundle", "-o", str(out), "-q"]).exit_code == 0 and out.exists()
    (tmp_path / "lib.rego").write_text("package lib\n\nx := 1\n")
    refused = runner.invoke(cli, ["policy", "bundle", "-o", str(out), "--policy-dir", str(tmp_path)])
    assert refused.exit_code == 1 and "outside the bundle root" in refused.output
    assert runner.invoke(cli, ["policy", "bundle"]).exit_code == 2  # -o is required
