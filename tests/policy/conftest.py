"""The OPA server for the OPA-engine tests: a real one when `DRA_GITOPS_OPA_URL` names it, else the stand-in.

The stand-in (`opa_standin.py`) loads bundles as OPA does and serves OPA's REST API on 127.0.0.1 with
regorus evaluation; the engine talks to it over real HTTP either way. `opa_url` serves the bundle of the
bundled pack (what `dra-gitops policy bundle` writes, what deploy/overlays/opa loads); `opa_server` lets a
test load other bundles, as the bundle plugin activates a new download. A real server is started by the
person running the tests with the bundled pack's bundle; tests that need another bundle skip there.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from opa_standin import StandInServer, serve_opa_standin

from reconciler.policy.bundle import build_bundle, tar_gz
from reconciler.policy.engine import load_policy_set


def bundle_of(*policy_dirs: Path) -> bytes:
    """The bundle `dra-gitops policy bundle --policy-dir ...` writes for these directories."""
    return tar_gz(build_bundle(load_policy_set(list(policy_dirs))))


@pytest.fixture
def opa_server() -> Iterator[StandInServer]:
    if os.environ.get("DRA_GITOPS_OPA_URL"):
        pytest.skip("loads bundles of its own: runs on the stand-in only")
    with serve_opa_standin(bundle_of()) as server:
        yield server


@pytest.fixture
def opa_url() -> Iterator[str]:
    real = os.environ.get("DRA_GITOPS_OPA_URL")
    if real:
        yield real
        return
    with serve_opa_standin(bundle_of()) as server:
        yield server.url


@functools.cache
def bundled_test_count() -> int:
    """How many `test_*` rules the bundled pack has (the OPA runs must find every one)."""
    from reconciler.policy.engine import bundled_policy_dir
    from reconciler.policy.testing import run_policy_tests

    return len(run_policy_tests([bundled_policy_dir()]).results)
