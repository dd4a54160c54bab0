"""The clusters a dashboard reads: the controller's (`ui`: --kubeconfig's) and each distinct cluster the
targets name (`kubeconfig`, `context` in the `run --config` file), where those targets' states and devices
live. Each is read with bounded requests, so a cluster that does not answer costs its own targets' rows
and its own device map a few seconds, never the other targets' pages.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from reconciler.cluster.client import ClusterClient
from reconciler.loop.targets import ClusterRef, Target

# One request of a page to a cluster: given up on after this, tried once more.
READ_TIMEOUT = 10.0
HOME = "home"  # the device map's ?cluster= of the controller's own cluster


@dataclass
class Place:
    """A cluster the pages read: `key` chooses its device map (`/devices?cluster=<key>`)."""

    key: str
    label: str
    client: ClusterClient
    targets: list[str] = field(default_factory=list)
    own: bool = False  # a cluster a target names (not the controller's)
    where: str = ""  # its kubeconfig and context (`ClusterRef.describe`)


def home_place(client: ClusterClient, label: str) -> Place:
    return Place(HOME, label, client.bounded(timeout=READ_TIMEOUT, retries=1))


def target_places(
    home: Place, targets: Sequence[Target], client_of: Callable[[Target], ClusterClient]
) -> tuple[list[Place], dict[str, Place]]:
    """Every distinct cluster (the home one first) and each target's; a target cluster's key is the names
    of the targets in it (`production`, or `eu,us` when two share it), its label adds where it is."""
    own: dict[ClusterRef, Place] = {}
    of: dict[str, Place] = {}
    for target in targets:
        ref = target.cluster
        if ref is None:
            home.targets.append(target.name)
            of[target.name] = home
            continue
        place = own.get(ref)
        if place is None:
            client = client_of(target).bounded(timeout=READ_TIMEOUT, retries=1)
            place = own[ref] = Place("", "", client, own=True, where=ref.describe())
        place.targets.append(target.name)
        of[target.name] = place
    taken = {HOME}
    for place in own.values():
        key = ",".join(place.targets)
        while key in taken:  # a target called "home"
            key += "-cluster"
        taken.add(key)
        place.key = key
        place.label = f"{', '.join(place.targets)} ({place.where})"
    return [home, *own.values()], of
