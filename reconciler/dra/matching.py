"""Which devices a DeviceClass and a request's selectors select (pure), cached for many pods.

The class's selectors, then the request's, on each device (:mod:`reconciler.dra.selectors` evaluates
them): a device matches, does not, cannot be judged ("unknown"), or makes a selector fail at run time.
:class:`SelectorMatcher` holds the devices and classes and remembers every answer; the allocator's
:class:`reconciler.dra.allocator.Inventory` is one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from reconciler.dra.devices import Device, DeviceKey, normalise_requests, selector_exprs
from reconciler.dra.selectors import Match, SelectorError, evaluate_selectors, unknown_reason
from reconciler.model.readers import as_dict, as_list

__all__ = ["Matching", "SelectorMatcher"]


@dataclass
class Matching:
    """The devices a request's selectors select, in order, with the ones they fail on among them."""

    devices: list[Device]  # matching or failing, in inventory order
    errors: dict[DeviceKey, SelectorError]
    unknown: bool  # some device could not be judged

    @property
    def matched(self) -> list[Device]:
        return [d for d in self.devices if d.key not in self.errors] if self.errors else self.devices


class SelectorMatcher:
    """Devices and DeviceClasses, with every selector answer remembered."""

    def __init__(
        self,
        devices: list[Device],
        classes: Iterable[Mapping[str, Any]] | Mapping[str, Mapping[str, Any]],
    ) -> None:
        self.devices = devices
        if isinstance(classes, Mapping):
            self.classes: dict[str, Mapping[str, Any]] = {str(k): v for k, v in classes.items()}
        else:
            self.classes = {str(as_dict(c.get("metadata")).get("name", "")): c for c in classes}
        self._match_cache: dict[tuple[str, tuple[str, ...], DeviceKey], Match] = {}
        self._matching_cache: dict[tuple[str, tuple[str, ...], int], tuple[list[Device], Matching]] = {}

    def class_selectors(self, class_name: str) -> list[str] | None:
        cls = self.classes.get(class_name)
        if cls is None:
            return None
        return selector_exprs(as_dict(cls.get("spec")).get("selectors"))

    def device_match(self, device: Device, class_name: str, selectors: Sequence[str]) -> Match:
        """The class's selectors, then the request's, on one device (cached)."""
        key = (class_name, tuple(selectors), device.key)
        if key in self._match_cache:
            return self._match_cache[key]
        class_exprs = self.class_selectors(class_name) or []
        result = evaluate_selectors(class_name, class_exprs, selectors, device.context)
        self._match_cache[key] = result
        return result

    def matching(
        self, class_name: str, selectors: Sequence[str], devices: Iterable[Device]
    ) -> tuple[list[Device], bool]:
        """Devices matching a class and request selectors; and whether any answer was not a plain yes/no
        (unknown, or a selector failing at run time: see ``matching_detail``)."""
        m = self.matching_detail(class_name, selectors, devices)
        return list(m.matched), m.unknown or bool(m.errors)

    def matching_detail(
        self, class_name: str, selectors: Sequence[str], devices: Iterable[Device]
    ) -> Matching:
        """Devices matching a class and request selectors, and those they fail on, in order."""
        if isinstance(devices, list):
            # Node device lists are cached and long-lived; the entry keeps its list alive, so the id
            # cannot be reused by another list while the entry exists.
            key = (class_name, tuple(selectors), id(devices))
            hit = self._matching_cache.get(key)
            if hit is None or hit[0] is not devices:
                hit = (devices, self._matching(class_name, selectors, devices))
                self._matching_cache[key] = hit
            return hit[1]  # shared: callers build new lists, never change this one
        return self._matching(class_name, selectors, devices)

    def _matching(self, class_name: str, selectors: Sequence[str], devices: Iterable[Device]) -> Matching:
        out = Matching([], {}, False)
        for d in devices:
            r = self.device_match(d, class_name, selectors)
            if r is True:
                out.devices.append(d)
            elif isinstance(r, SelectorError):
                out.devices.append(d)
                out.errors[d.key] = r
            elif r is None:
                out.unknown = True
        return out

    def unknown_reason(self, class_name: str, selectors: Sequence[str], devices: Iterable[Device]) -> str:
        """Why the model cannot tell whether some device matches (the first such device)."""
        class_exprs = self.class_selectors(class_name) or []
        for d in devices:
            if self.device_match(d, class_name, selectors) is None:
                return unknown_reason(class_name, class_exprs, selectors, d.context, d.label)
        return "a CEL selector could not be evaluated"

    def missing_class(self, spec: Mapping[str, Any]) -> tuple[str, str] | None:
        """(request, class) of the first request naming a DeviceClass that does not exist."""
        for req in normalise_requests(spec):
            name = str(req.get("name", ""))
            if "exactly" in req:
                cls = str(as_dict(req.get("exactly")).get("deviceClassName", ""))
                if cls not in self.classes:
                    return name, cls
            else:
                for sub in as_list(req.get("firstAvailable")):
                    cls = str(as_dict(sub).get("deviceClassName", ""))
                    if cls not in self.classes:
                        return f"{name}/{as_dict(sub).get('name', '')}", cls
        return None
