"""Each test renders afresh: what an earlier test rendered from the same inputs is not reused."""

from collections.abc import Iterator

import pytest

from reconciler.render.kustomize import clear_render_cache


@pytest.fixture(autouse=True)
def fresh_render_cache() -> Iterator[None]:
    clear_render_cache()
    yield
    clear_render_cache()
