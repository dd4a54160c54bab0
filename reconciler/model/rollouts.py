"""How a workload controller rolls out a new pod template: the surge and unavailability budget (pure).

Shared by the simulated Deployment controller and the capacity prediction, so both count the same pods.
"""

from __future__ import annotations

import math
from typing import Any

from reconciler.model.compare import covers

__all__ = ["deployment_budget", "int_or_percent", "rollout_surge", "template_changed"]


def int_or_percent(value: Any, total: int, round_up: bool) -> int:
    """An IntOrString of a rolling update (`1`, `"25%"`) as a pod count of `total`."""
    if value is None:
        return 0
    if isinstance(value, str) and value.endswith("%"):
        frac = int(value[:-1]) * total / 100
        return math.ceil(frac) if round_up else math.floor(frac)
    return int(value)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _replicas(body: dict[str, Any]) -> int:
    """spec.replicas, 1 when unset (the API's default)."""
    replicas = _mapping(body.get("spec")).get("replicas")
    return replicas if isinstance(replicas, int) else 1


def deployment_budget(body: dict[str, Any]) -> tuple[int, int] | None:
    """(maxSurge, maxUnavailable) of a RollingUpdate Deployment as pod counts; None for Recreate.

    As the Deployment controller resolves them: percentages of spec.replicas, surge rounded up,
    unavailability rounded down (25% each by default), and never both 0 (then one may be unavailable).
    """
    spec = _mapping(body.get("spec"))
    strategy = _mapping(spec.get("strategy"))
    if strategy.get("type") == "Recreate":
        return None
    desired = _replicas(body)
    rolling = _mapping(strategy.get("rollingUpdate"))
    surge = int_or_percent(rolling.get("maxSurge", "25%"), desired, True)
    unavailable = int_or_percent(rolling.get("maxUnavailable", "25%"), desired, False)
    if surge == 0 and unavailable == 0:
        unavailable = 1
    return surge, unavailable


def _template(body: dict[str, Any] | None) -> Any:
    return _mapping((body or {}).get("spec")).get("template")


def template_changed(new: dict[str, Any], old: dict[str, Any] | None, live: dict[str, Any] | None) -> bool:
    """Whether applying `new` gives the workload a new pod template (so its controller rolls pods).

    Against the previous revision as written when there is one; else against the live object, where
    only the fields `new` sets count (the server fills in defaults). A removed field is seen only in
    the first case.
    """
    if old is not None:
        return _template(new) != _template(old)
    if live is None:
        return False
    return not covers(_template(live), _template(new))


def rollout_surge(
    new: dict[str, Any], old: dict[str, Any] | None, live: dict[str, Any] | None
) -> tuple[int, str] | None:
    """New-template pods a Deployment's rollout runs while every old pod keeps its devices, and why.

    With maxUnavailable 0 the controller deletes an old pod only once a new one is available, so the
    first pods of the new template need devices of their own: when none of them can get them, the
    rollout stalls. With maxUnavailable above 0 (or Recreate) old pods go first and free their devices:
    None. None too when the template does not change or the workload is no Deployment.
    """
    if new.get("kind") != "Deployment" or live is None or not template_changed(new, old, live):
        return None
    budget = deployment_budget(new)
    if budget is None:
        return None
    surge, unavailable = budget
    if unavailable > 0 or surge == 0:
        return None
    desired, before = _replicas(new), _replicas(live)
    pods = min(desired, desired + surge - before)
    if pods <= 0:
        return None
    why = (
        f"rolling update to a new pod template with maxUnavailable 0 and maxSurge {surge}: the {before} "
        "old pod(s) keep their devices until new ones are available; give the rollout room "
        "(maxSurge: 0 with maxUnavailable: 1, or strategy Recreate) or free devices"
    )
    return pods, why
