"""Bundles for the OPA tests (a module of its own: `conftest` is a name every test folder has)."""

from __future__ import annotations

import functools
from pathlib import Path

from reconciler.policy.bundle import build_bundle, tar_gz
from reconciler.policy.engine import bundled_policy_dir, load_policy_set
from reconciler.policy.testing import run_policy_tests


def bundle_of(*policy_dirs: Path) -> bytes:
    """The bundle `dra-gitops policy bundle --policy-dir ...` writes for these directories."""
    return tar_gz(build_bundle(load_policy_set(list(policy_dirs))))


@functools.cache
def bundled_test_count() -> int:
    """How many `test_*` rules the bundled pack has (the OPA runs must find every one)."""
    return len(run_policy_tests([bundled_policy_dir()]).results)
