"""Is what was applied ready, judged on the right pods, and does a driver DaemonSet run anywhere (pure).

`health.py` (kstatus-style readiness of one live object), `rollout.py` (the pods of a workload's current
template), `canary.py` (a driver DaemonSet that runs on no node) with `nodefit.py` (the daemon
controller's node predicate, and why no node fits).
"""

from reconciler.cluster.readiness.canary import (
    idle_canary_reason,
    idle_driver_reason,
    idle_main_driver_reason,
    node_selector,
    template_changed,
)
from reconciler.cluster.readiness.health import Health, health_of, pod_failure
from reconciler.cluster.readiness.nodefit import fitting_nodes, no_node
from reconciler.cluster.readiness.rollout import RolloutContext, current_pods, rollout_context, selects

__all__ = [
    "Health",
    "RolloutContext",
    "current_pods",
    "fitting_nodes",
    "health_of",
    "idle_canary_reason",
    "idle_driver_reason",
    "idle_main_driver_reason",
    "no_node",
    "node_selector",
    "pod_failure",
    "rollout_context",
    "selects",
    "template_changed",
]
