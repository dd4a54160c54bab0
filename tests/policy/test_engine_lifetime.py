"""regorus engines are unsendable: each is dropped by reference counting in the thread that made it.

An engine left in a frame of an exception's traceback lives in a reference cycle once something keeps the
exception (a frame that catches it and raises another `from` it, a controller keeping its last error); the
cyclic collector then frees it on whichever thread collects, a server's or a pass's, and PyO3 leaks it with
`RuntimeError: regoruspy::Engine is unsendable, but is being dropped on another thread`. These tests make
the failures happen with the collector held off, then ask it which cyclic garbage still holds an engine.
"""

from __future__ import annotations

import gc
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import regorus
from click.testing import CliRunner

from reconciler.cli import cli
from reconciler.errors import PolicyError
from reconciler.policy.engine import EmbeddedEngine, PolicySet, load_policy_set
from reconciler.policy.rego_ast import parse_module

TAINT_RULE = """apiVersion: resource.k8s.io/v1beta2
kind: DeviceTaintRule
metadata: {name: gpu-maintenance}
spec:
  taint: {key: example.com/maintenance, effect: NoSchedule}
"""


def _where(holder: Any) -> str:
    if isinstance(holder, types.FrameType):
        return f"frame {holder.f_code.co_name} ({holder.f_code.co_filename}:{holder.f_lineno})"
    return type(holder).__qualname__


@contextmanager
def engines_left_in_cycles() -> Iterator[list[str]]:
    """What the block leaves in cyclic garbage holding a regorus engine (an engine is not tracked by the
    collector itself: its holders are)."""
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    found: list[str] = []
    try:
        yield found
    finally:
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.collect()
            garbage = list(gc.garbage)
            gc.garbage.clear()
        finally:
            gc.set_debug(0)
            if was_enabled:
                gc.enable()
        found += [
            _where(o) for o in garbage if any(isinstance(r, regorus.Engine) for r in gc.get_referents(o))
        ]
        del garbage


def kept_error(call: Callable[[], object]) -> None:
    """Run `call`, which must raise, and leave its error in a reference cycle (this frame ↔ the error's
    traceback), as `raise ... from exc` or a kept last error does."""
    try:
        call()
    except Exception as exc:  # noqa: BLE001 - whatever the call raises is kept
        error = exc  # the frame holds the error, whose traceback holds the frame
    assert error.__traceback__ is not None


def test_a_check_refused_after_its_engine_was_made_leaves_no_engine_in_a_cycle(tmp_path: Path) -> None:
    """The policy engine is made before the input is judged; a release written as a number is refused
    after that, and the CLI turns the error into exit 1 (`raise ... from`)."""
    (tmp_path / "rule.yaml").write_text(TAINT_RULE)
    (tmp_path / "dra-gitops.yaml").write_text("params:\n  kubernetes_version: 1.30\n")
    with engines_left_in_cycles() as found:
        result = CliRunner().invoke(cli, ["check", str(tmp_path), "-q"])
        assert result.exit_code == 1
        assert "1.3 is not a Kubernetes release" in result.stderr
        del result
    assert found == []


def failing_policy_set(tmp_path: Path) -> PolicySet:
    rule = tmp_path / "policies" / "divide"
    rule.mkdir(parents=True)
    (rule / "divide.rego").write_text(
        'package dra.divide\n\ndeny contains msg if {\n\tcount(input.objects) / 0 > 1\n\tmsg := "x"\n}\n'
    )
    return load_policy_set([tmp_path / "policies"], include_bundled=False)


def test_an_evaluation_that_fails_leaves_no_engine_in_a_cycle(tmp_path: Path) -> None:
    policy_set = failing_policy_set(tmp_path)
    engine = EmbeddedEngine(policy_set)
    with pytest.raises(PolicyError):  # the failure is real, not a scenario that cannot fail
        engine.evaluate({"objects": []})
    with engines_left_in_cycles() as found:
        kept_error(lambda: engine.evaluate({"objects": []}))
    assert found == []
    engine.close()
    with pytest.raises(PolicyError, match="closed"):
        engine.evaluate({"objects": []})


def test_a_module_that_does_not_parse_leaves_no_engine_in_a_cycle() -> None:
    with engines_left_in_cycles() as found:
        kept_error(lambda: parse_module("broken.rego", "package dra.broken\n\ndeny contains msg if {\n"))
    assert found == []
