"""The clusters a dashboard reads: the controller's (`ui`: --kubeconfig's) and each distinct cluster the
targets name (`kubeconfig`, `context` in the `run --config` file), where those targets' states and devices
live. Each is read with bounded requests, so a cluster that does not answer costs its own targets' rows
and its own device map a few seconds, never the other targets' pages; and once it has cost that, its
pages say why at once for a while instead of waiting again.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from reconciler.cluster.client import ClusterClient
from reconciler.errors import EnvironmentProblem
from reconciler.loop.config.targets import ClusterRef, Target

# One request of a page to a cluster: given up on after this, tried once more.
READ_TIMEOUT = 10.0
# A cluster whose reading failed only after waiting out its deadline is not asked again for this long.
RETRY_AFTER = 30.0
HOME = "home"  # the device map's ?cluster= of the controller's own cluster
T = TypeVar("T")


@dataclass
class Place:
    """A cluster the pages read: `key` chooses its device map (`/devices?cluster=<key>`)."""

    key: str
    label: str
    client: ClusterClient
    targets: list[str] = field(default_factory=list)
    own: bool = False  # a cluster a target names (not the controller's)
    where: str = ""  # its kubeconfig and context (`ClusterRef.describe`)
    timeout: float = READ_TIMEOUT
    # Why it did not answer, and until when (monotonic) that is said again without asking.
    down: tuple[float, str] = (0.0, "")

    def read(self, what: Callable[[ClusterClient], T]) -> T:
        """`what` read through this cluster's client. A cluster that answered nothing until its deadline
        is not asked again for RETRY_AFTER seconds (each page would wait as long): its reason is raised
        at once. A quick failure (refused) costs nothing and is asked again every time."""
        until, why = self.down
        if time.monotonic() < until:
            raise EnvironmentProblem(f"{why} (asked again in {until - time.monotonic():.0f} s)")
        started = time.monotonic()
        try:
            return what(self.client)
        except EnvironmentProblem as exc:
            if time.monotonic() - started >= self.timeout:
                self.down = (time.monotonic() + RETRY_AFTER, str(exc))
            raise


def home_place(client: ClusterClient, label: str, timeout: float = READ_TIMEOUT) -> Place:
    return Place(HOME, label, client.bounded(timeout=timeout, retries=1), timeout=timeout)


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
            client = client_of(target).bounded(timeout=home.timeout, retries=1)
            place = own[ref] = Place("", "", client, own=True, where=ref.describe(), timeout=home.timeout)
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
