"""Environment inventory (`dra-gitops inventory`): what a cluster offers for Dynamic Resource Allocation.

`collect.py` reads the cluster once and builds the `Inventory`; `render.py` prints it (pure).
"""

from reconciler.cluster.inventory.collect import (
    Inventory,
    build_inventory,
    collect_inventory,
)
from reconciler.cluster.inventory.render import render_inventory

__all__ = [
    "Inventory",
    "build_inventory",
    "collect_inventory",
    "render_inventory",
]
