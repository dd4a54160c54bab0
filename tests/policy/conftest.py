"""The OPA server for the OPA-engine tests: a real one when `DRA_GITOPS_OPA_URL` names it, else the stand-in.

The stand-in (`opa_standin.py`) serves OPA's REST API on 127.0.0.1 with OPA's policy-store semantics and
regorus evaluation; the opa-python-client path runs over real HTTP either way. One server lives for a whole
test, so a test can make several runs against it, as the in-cluster sidecar outlives every check.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from opa_standin import serve_opa_standin


@pytest.fixture
def opa_url() -> Iterator[str]:
    real = os.environ.get("DRA_GITOPS_OPA_URL")
    if real:
        yield real
        return
    with serve_opa_standin() as url:
        yield url
