"""Environment inventory (`dra-gitops inventory`): what a cluster offers for Dynamic Resource Allocation.

`collect.py` reads the cluster once and builds the `Inventory` (`types.py`); `render.py` prints it (pure).
"""

from reconciler.cluster.inventory.collect import build_inventory, collect_inventory
from reconciler.cluster.inventory.render import render_inventory
from reconciler.cluster.inventory.types import Inventory

__all__ = [
    "Inventory",
    "build_inventory",
    "collect_inventory",
    "render_inventory",
]
