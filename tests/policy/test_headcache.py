"""The policy set's package and rule heads are read by regorus's parser once per content of its modules and
kept in the user's cache directory; a changed, broken or unreadable module or cache is never trusted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import reconciler.policy.engine as engine
from reconciler.errors import PolicyError
from reconciler.policy.engine import PolicySet, load_policy_set

REPO = Path(__file__).resolve().parents[2]
RULE = """# METADATA
# title: Limits
# custom:
#   id: limits
#   severity: deny
package dra.limits

deny contains v if {
	some obj in input.objects
	obj.kind == "Pod"
	v := {"msg": "no pods", "ref": obj._dra.ref}
}
"""


def heads(policy_set: PolicySet) -> list[tuple[str, str, tuple]]:
    return [(m.source_id, m.package, m.rules) for m in [*policy_set.modules, *policy_set.tests]]


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("DRA_GITOPS_CACHE_DIR", str(directory))
    return directory


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The modules regorus's parser is asked about."""
    asked: list[str] = []
    real = engine.parse_module

    def counted(path: str, text: str):  # type: ignore[no-untyped-def]
        asked.append(path)
        return real(path, text)

    monkeypatch.setattr(engine, "parse_module", counted)
    return asked


def policy_dir(tmp_path: Path, text: str = RULE) -> Path:
    directory = tmp_path / "policies" / "limits"
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "limits.rego").write_text(text)
    return tmp_path / "policies"


def test_a_second_load_reads_the_heads_from_the_cache(cache: Path, parses: list[str], tmp_path: Path) -> None:
    user = policy_dir(tmp_path)
    first = load_policy_set([user])
    assert len(parses) == 1 and parses[0].endswith("limits/limits.rego")  # the bundled pack's ship
    assert list(cache.glob("rego-heads-*.json"))
    parses.clear()
    second = load_policy_set([user])
    assert parses == []
    assert heads(second) == heads(first)
    assert second.rules == first.rules and second.rule_of_package == first.rule_of_package
    assert ("dra", "limits") in engine.rule_packages(second)


def test_a_changed_module_is_parsed_again(cache: Path, parses: list[str], tmp_path: Path) -> None:
    user = policy_dir(tmp_path)
    load_policy_set([user])
    parses.clear()
    policy_dir(tmp_path, RULE.replace('obj.kind == "Pod"', 'obj.kind == "Job"\n\tobj.kind != ""'))
    load_policy_set([user])
    assert len(parses) == 1 and parses[0].endswith("limits/limits.rego"), parses  # the others are kept


def test_a_broken_module_is_refused_at_its_place_even_after_a_good_one_was_kept(
    cache: Path, tmp_path: Path
) -> None:
    user = policy_dir(tmp_path)
    load_policy_set([user])
    policy_dir(tmp_path, RULE.replace("deny contains v if {", "deny contains v if {{"))
    with pytest.raises(PolicyError) as caught:
        load_policy_set([user])
    assert "limits.rego:" in str(caught.value)


def test_an_unreadable_or_unwritable_cache_only_costs_time(
    cache: Path, parses: list[str], tmp_path: Path
) -> None:
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("a file where the directory would go")
    user = policy_dir(tmp_path)
    first = load_policy_set([user])
    assert parses and cache.is_file()
    cache.unlink()
    load_policy_set([user])
    [kept] = cache.glob("rego-heads-*.json")
    kept.write_text("{not json")
    parses.clear()
    assert heads(load_policy_set([user])) == heads(first)
    assert parses  # read again from the modules


def test_the_bundled_packs_heads_ship_with_the_package(cache: Path, parses: list[str]) -> None:
    """A first check on a machine (a CI job's fresh container) parses no bundled module and writes nothing."""
    policy_set = load_policy_set([])
    assert parses == [] and not cache.exists()
    assert len(policy_set.modules) >= 10 and policy_set.tests
    assert ("dra", "capacity") in engine.rule_packages(policy_set)


def test_the_shipped_heads_are_what_the_parser_says() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "tools" / "bundled_heads.py"), "--check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
