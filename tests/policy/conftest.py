"""The OPA server for the OPA-engine tests: a real one when `DRA_GITOPS_OPA_URL` names it, else the stand-in.

The stand-in (`opa_standin.py`) loads bundles as OPA does and serves OPA's REST API on 127.0.0.1 with
regorus evaluation; the engine talks to it over real HTTP either way. `opa_url` serves the bundle of the
bundled pack (what `dra-gitops policy bundle` writes, what deploy/overlays/opa loads); `opa_server` lets a
test load other bundles, as the bundle plugin activates a new download. A real server is started by the
person running the tests with the bundled pack's bundle; tests that need another bundle skip there.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opa_standin import StandInServer, serve_opa_standin
from opa_support import bundle_of


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
