"""Each test renders afresh (what an earlier test rendered from the same inputs is not reused); the pass
harness's cluster for the loop tests."""

from collections.abc import Iterator

import pytest
from pass_support import client, cluster

from reconciler.render.helm import clear_release_cache
from reconciler.render.kustomize import clear_render_cache

__all__ = ["client", "cluster"]  # the pass harness's simulated cluster, for the loop tests here


@pytest.fixture(autouse=True)
def fresh_render_cache() -> Iterator[None]:
    clear_render_cache()
    clear_release_cache()
    yield
    clear_render_cache()
    clear_release_cache()
