"""A check holds the cyclic garbage collector off while it loads and judges (its objects are no garbage),
and gives it back afterwards, also when the check fails; a caller that had it off keeps it off."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

import reconciler.delivery.check as check
from reconciler.delivery.check import CheckOptions, check_paths, collection_paused
from reconciler.errors import ManifestError

CLASS = "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {name: gpu}\n"


def test_the_collector_is_off_during_a_check_and_on_after_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "class.yaml").write_text(CLASS)
    seen: list[bool] = []
    real = check.run_check

    def watched(*args, **kwargs):  # type: ignore[no-untyped-def]
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    monkeypatch.setattr(check, "run_check", watched)
    assert gc.isenabled()
    run = check_paths([tmp_path], CheckOptions())
    assert run.result.objects_checked == 1 and seen == [False] and gc.isenabled()
    (tmp_path / "bad.yaml").write_text("kind: [\n")
    with pytest.raises(ManifestError):
        check_paths([tmp_path], CheckOptions())
    assert gc.isenabled()


def test_a_caller_that_turned_the_collector_off_keeps_it_off() -> None:
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
