"""A request's selectors against one device, as the structured allocator evaluates them (pure).

The DeviceClass's selectors first, then the request's own, each in order, stopping at the first false.
A CEL run-time error stops the evaluation too: it becomes a :class:`SelectorError` that names the class
(or the claim), the selector's index, its expression and the missing key, in kube-scheduler's words
(``class big-gpu.example.com: selector #0: CEL runtime error: no such key: productName``), and it fails
the pod's scheduling. What the model cannot decide (an unsupported function) is "unknown" (None), never
an error: a selector before the error that is unknown makes the error unknown too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.dra import cel
from reconciler.errors import UserError

__all__ = ["Match", "SelectorError", "SelectorFailure", "evaluate_selectors", "unknown_reason"]


@dataclass(frozen=True)
class SelectorError:
    """A selector that fails at run time on a device."""

    class_name: str | None  # the DeviceClass whose selector it is; None: the request's own selector
    index: int  # position in the class's (or the request's) selector list
    expression: str
    error: str  # cel-go's words: "no such key: productName"
    key: str | None  # the missing key, when that is the error

    def owner(self, claim: str) -> str:
        return f"class {self.class_name}" if self.class_name is not None else f"claim {claim}"

    def message(self, claim: str) -> str:
        """kube-scheduler's error (after ``running "DynamicResources" filter plugin: ``)."""
        return f"{self.owner(claim)}: selector #{self.index}: CEL runtime error: {self.error}"

    @property
    def guard(self) -> str | None:
        """The test that makes the selector portable: ``"productName" in device.attributes["d"]``."""
        if self.key is None:
            return None
        key = re.escape(self.key)
        pattern = (
            r"""\b(attributes|capacity)\s*\[\s*(['"])([^'"]*)\2\s*\]\s*"""
            rf"""(?:\.\s*{key}\b|\[\s*(['"]){key}\4\s*\])"""
        )
        m = re.search(pattern, self.expression)
        if m is None:
            return None
        return f'"{self.key}" in device.{m.group(1)}["{m.group(3)}"]'

    @property
    def guarded(self) -> str | None:
        """The expression with its guard in front."""
        guard = self.guard
        return None if guard is None else f"{guard} && ({self.expression})"


Match = bool | SelectorError | None  # None: unknown


class SelectorFailure(UserError):
    """Raised by the search when it reaches a device whose selectors fail: allocation stops there.

    The allocator turns it into the claim's failure (a class's or a request's CEL selector is wrong).
    """

    def __init__(self, error: SelectorError, device: tuple[str, str, str], claim_index: int) -> None:
        super().__init__(error.error)
        self.error = error
        self.device = device
        self.claim_index = claim_index


def evaluate_selectors(
    class_name: str,
    class_selectors: Sequence[str],
    request_selectors: Sequence[str],
    device: Mapping[str, Any] | None,
) -> Match:
    """True when every selector holds, False at the first that does not, or the first run-time error."""
    if device is None:
        return None  # the device's attributes could not be read
    unknown = False
    for owner, exprs in ((class_name, class_selectors), (None, request_selectors)):
        for index, expr in enumerate(exprs):
            result = cel.evaluate_detail(expr, device)
            if result is True:
                continue
            if result is False:
                return False
            if result.runtime:
                # after an unknown selector (it might have been false) the error might not be reached
                return None if unknown else SelectorError(owner, index, expr, result.message, result.key)
            unknown = True
    return None if unknown else True


def unknown_reason(
    class_name: str,
    class_selectors: Sequence[str],
    request_selectors: Sequence[str],
    device: Mapping[str, Any] | None,
    label: str,
) -> str:
    """Why the selectors cannot be judged on this device (for a device that evaluates to unknown)."""
    if device is None:
        return f"device {label}: its attributes or capacities cannot be read"
    for owner, exprs in ((f"class {class_name}: ", class_selectors), ("", request_selectors)):
        for index, expr in enumerate(exprs):
            result = cel.evaluate_detail(expr, device)
            if isinstance(result, cel.CelFailure):
                return f"{owner}selector #{index} ({expr}) {result.message} (device {label})"
    return "a CEL selector could not be evaluated"
