"""Device templates for ``sim serve --device-template``: what the simulated drivers' devices publish.

A YAML mapping from driver name to its devices' look, so vendor-style DeviceClasses (NVIDIA's
``device.attributes["gpu.nvidia.com"].type == "gpu"``, Intel's ``productName``) can be exercised::

    gpu.nvidia.com:
      devicesPerNode: 4          # optional (default: --devices-per-node)
      devicePrefix: gpu          # optional: device names gpu-0, gpu-1, ...
      attributes:                # replace the default model attribute; index, uuid, driverVersion stay
        type: gpu                # a string, an int or a bool, or typed: {version: 12.4.0}
        productName: NVIDIA H100 80GB HBM3
      capacity:                  # replace the default memory: 80Gi
        memory: 80Gi
        compute: 8

Every driver of the template is served, besides those named with ``--driver``. Errors name the file
and the entry (``template.yaml: gpu.nvidia.com.attributes.type: ...``).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from reconciler.dra import cel
from reconciler.dra.quantity import parse_quantity
from reconciler.errors import UserError

__all__ = ["TemplateError", "load_device_template", "parse_device_template"]

_KEYS = {"devicesPerNode", "devicePrefix", "attributes", "capacity"}
_TYPED = {"string", "int", "bool", "version"}


class TemplateError(UserError):
    """A template that cannot be used, bad input to ``--device-template``; messages start with file and entry."""


def _attribute(where: str, value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"bool": value}
    if isinstance(value, int):
        return {"int": value}
    if isinstance(value, str):
        return {"string": value}
    if isinstance(value, Mapping) and len(value) == 1 and set(value) <= _TYPED:
        ((kind, raw),) = value.items()
        if kind == "version":
            try:
                cel.parse_semver(str(raw))
            except ValueError as exc:
                raise TemplateError(f"{where}: {exc}") from exc
            return {"version": str(raw)}
        return dict(value)
    raise TemplateError(
        f"{where}: an attribute is a string, an int, a bool or one of {{{', '.join(sorted(_TYPED))}: ...}}"
    )


def _capacity(where: str, value: Any) -> dict[str, Any]:
    raw = value.get("value") if isinstance(value, Mapping) else value
    try:
        if raw is None or isinstance(raw, bool):
            raise ValueError(raw)
        parse_quantity(raw)
    except (ValueError, TypeError) as exc:
        raise TemplateError(f"{where}: not a quantity: {raw!r}") from exc
    return {**dict(value), "value": str(raw)} if isinstance(value, Mapping) else {"value": str(raw)}


def parse_device_template(data: Any, source: str) -> list[dict[str, Any]]:
    """The template as DriverConfig keyword dicts (``reconciler.sim.controlplane.DriverConfig``)."""
    if not isinstance(data, Mapping) or not data:
        raise TemplateError(f"{source}: a device template maps driver names to their devices")
    out = []
    for driver, body in data.items():
        where = f"{source}: {driver}"
        if not isinstance(body, Mapping):
            raise TemplateError(f"{where}: expected a mapping with {', '.join(sorted(_KEYS))}")
        unknown = sorted(set(body) - _KEYS)
        if unknown:
            raise TemplateError(
                f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_KEYS))})"
            )
        config: dict[str, Any] = {"name": str(driver)}
        if "devicesPerNode" in body:
            count = body["devicesPerNode"]
            if not isinstance(count, int) or isinstance(count, bool) or count < 0:
                raise TemplateError(f"{where}.devicesPerNode: a count of devices, not {count!r}")
            config["devices_per_node"] = count
        if "devicePrefix" in body:
            config["device_prefix"] = str(body["devicePrefix"])
        for key, convert in (("attributes", _attribute), ("capacity", _capacity)):
            if key in body:
                entries = body[key] or {}
                if not isinstance(entries, Mapping):
                    raise TemplateError(f"{where}.{key}: expected a mapping of names to values")
                config[key] = {str(n): convert(f"{where}.{key}.{n}", v) for n, v in entries.items()}
        out.append(config)
    return out


def load_device_template(path: Path) -> list[dict[str, Any]]:
    """Read and check a template file."""
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise TemplateError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        raise TemplateError(f"{where}: not YAML: {getattr(exc, 'problem', None) or exc}") from exc
    return parse_device_template(data, str(path))
