"""Comparing a manifest with its live object, which the server has defaulted and canonicalised (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from reconciler.model.dra_drivers import CONFIG_KINDS, config_content_digest, is_driver_workload
from reconciler.model.objects import Manifest

__all__ = ["covers", "live_driver_base"]


def covers(live: Any, desired: Any) -> bool:
    """Every value `desired` sets is set to the same value in `live` (extra live fields are defaults).

    A number the manifest writes where the server keeps a string (a quantity, an IntOrString) matches
    its canonical text: `cpu: 4` is "4" live.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return not desired
        for key, value in desired.items():
            if key not in live:
                if value in (None, {}, [], ""):
                    continue  # an empty value the server drops
                return False
            if not covers(live[key], value):
                return False
        return True
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return not desired and not live
        return all(covers(a, b) for a, b in zip(live, desired, strict=True))
    if isinstance(desired, bool) or isinstance(live, bool):
        return live is desired  # True == 1 in Python; not in Kubernetes
    if isinstance(desired, int | float) and isinstance(live, str):
        return str(desired) == live
    return bool(live == desired)


def live_driver_base(
    head: Sequence[Manifest], live: Sequence[Manifest], configs: Sequence[Manifest] = ()
) -> list[Manifest]:
    """What the cluster runs of the head's driver workloads, as a base when the check has no revision.

    A driver workload whose live copy covers the manifest is in the base as the manifest itself (no
    change); one that differs is in the base as its live copy (an update, so `driver-canary` judges it:
    its digests leave server defaults out). The same for the ConfigMaps and Secrets the live driver
    workloads read (`configs`: their content as a digest only): the same content is no change, other
    content an update, so a config-only driver change is judged too. Other kinds stay out: without a
    revision they are judged as created, as before.
    """
    by_ref = {m.ref: m for m in live}
    config_by_ref = {m.ref: m for m in configs if m.ref.group == "" and m.kind in CONFIG_KINDS}
    base: list[Manifest] = []
    for manifest in head:
        config = config_by_ref.get(manifest.ref)
        if config is not None:
            same = config_content_digest(config.body) == config_content_digest(manifest.body)
            base.append(manifest if same else _at(config.body, manifest))
            continue
        current = by_ref.get(manifest.ref)
        if current is None or not is_driver_workload(manifest.body):
            continue
        base.append(manifest if covers(current.body, manifest.body) else _at(current.body, manifest))
    return base


def _at(body: dict[str, Any], manifest: Manifest) -> Manifest:
    """The live `body` standing in the base where the manifest is written."""
    return Manifest(body=body, ref=manifest.ref, path=manifest.path, line=manifest.line)
