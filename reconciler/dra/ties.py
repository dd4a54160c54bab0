"""Every placement the scheduler's ties allow, and what is certain across them (pure).

When several nodes score equal best for a pod (:mod:`reconciler.dra.scoring`), kube-scheduler takes
whichever its score heap yields first: unpredictable from outside. The pods are placed in queue order
along every such choice, one node per class of interchangeable nodes (:mod:`reconciler.dra.nodeclasses`),
each class as likely as its share of the tied nodes; placements that hold the same devices and pods on
equal nodes are merged (their likelihoods added). Most pods have one best node, or tie only between
equal nodes, or every pod takes one device of one kind wherever it goes
(:mod:`reconciler.dra.interchangeable`): then there is one placement and nothing to search. Past a budget of placements the rest
is sampled instead: seeded random tie-breaks, reproducible, the sample size reported.

Per pod the verdict is ``fits`` (in every placement), ``does-not-fit`` (in none) or ``at-risk`` (in
some: with the share, and the earlier pods whose choice of node decides it); ``unknown`` or ``error``
when the model cannot decide, or a selector fails, in any placement.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from reconciler.dra.interchangeable import ties_cannot_matter
from reconciler.dra.nodeclasses import pod_texts
from reconciler.dra.placement import Placement, queue_order
from reconciler.dra.podinfo import PodInfo, PodResult

__all__ = ["BUDGET", "SAMPLES", "Exploration", "PodVerdict", "explore"]

BUDGET = 256  # distinct placements followed exactly at once; past it, sampling
ATTEMPTS = 20_000  # pod placements the exact search may make in all
SAMPLES = 32  # sampled placements (fewer when there are many pods left: SAMPLE_ATTEMPTS)
SAMPLE_ATTEMPTS = 4_000


@dataclass
class PodVerdict:
    pod: PodInfo
    verdict: str = "fits"  # fits | does-not-fit | at-risk | unknown | error
    fits: Fraction = Fraction(0)  # the share of the placements in which it fits
    outcomes: dict[str, Fraction] = field(default_factory=dict)  # outcome -> share
    fit: PodResult | None = None  # one placement where it fits
    miss: PodResult | None = None  # one where it does not (or is unknown, or fails with an error)
    deciders: list[str] = field(default_factory=list)  # earlier pods whose node decides it
    searched: bool = False  # judged in more than one placement
    samples: int = 0  # its share comes from this many sampled placements (0: exact)
    nodes: set[str] = field(default_factory=set)  # every node it may be bound to
    placements: int = 0  # the placements it was judged in (distinct ones, or samples)

    @property
    def result(self) -> PodResult:
        """The placement to report: where it fits when it always does, else one where it does not."""
        chosen = self.fit if self.verdict == "fits" else (self.miss or self.fit)
        assert chosen is not None
        return chosen


@dataclass
class Exploration:
    verdicts: list[PodVerdict]  # in queue order
    mode: str = "exact"  # exact | sampled
    placements: int = 1  # distinct placements (exact) or samples
    cut: bool = False  # the budget cut the exact search
    pending: tuple[int, int] = (0, 0)  # the fewest and most counted pods left pending
    seed: int = 0
    budget: int = BUDGET

    @property
    def searched(self) -> int:
        return sum(1 for v in self.verdicts if v.searched)

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "placements": self.placements,
            "cut_by_budget": self.cut,
            "budget": self.budget,
            "seed": self.seed,
            "pods_searched": self.searched,
        }


@dataclass
class _State:
    placement: Placement
    weight: Fraction
    history: frozenset[int]  # the pods (queue positions) whose tie was a real choice on the way
    pending: int = 0


class _Tally:
    """The outcomes of each pod over the placements, weighted."""

    def __init__(self, pods: list[PodInfo]) -> None:
        self.verdicts = [PodVerdict(p) for p in pods]
        self.states = [0] * len(pods)
        self.history: list[set[int]] = [set() for _ in pods]

    def add(self, i: int, result: PodResult, weight: Fraction, history: frozenset[int]) -> None:
        v = self.verdicts[i]
        outcome = result.outcome
        v.outcomes[outcome] = v.outcomes.get(outcome, Fraction(0)) + weight
        if result.node is not None:
            v.nodes.update(n for c in result.ties for n in c)
        if outcome == "fits":
            v.fits += weight
            v.fit = v.fit or result
        else:
            v.miss = v.miss or result
        self.states[i] += 1
        self.history[i] |= history

    def finish(self, pods: list[PodInfo], total: Fraction) -> list[PodVerdict]:
        for i, v in enumerate(self.verdicts):
            v.fits /= total
            v.outcomes = {k: w / total for k, w in v.outcomes.items()}
            v.searched = self.states[i] > 1
            v.placements = self.states[i]
            kinds = set(v.outcomes)
            if "error" in kinds:
                v.verdict = "error"
            elif "unknown" in kinds:
                v.verdict = "unknown"
            elif kinds == {"fits"}:
                v.verdict = "fits"
            elif "fits" in kinds:
                v.verdict = "at-risk"
                v.deciders = [pods[j].label for j in sorted(self.history[i]) if j < i]
            else:
                v.verdict = "does-not-fit"
        return self.verdicts


def _branches(state: _State, result: PodResult, i: int, free: bool) -> list[_State]:
    """The state after the pod, one per class of tied nodes (the state itself when there is no choice,
    or when ``free``: no choice can change whether a pod fits)."""
    if result.node is None or len(result.ties) <= 1 or free:
        state.placement.commit(result)
        return [state]
    total = sum(len(c) for c in result.ties)
    out = []
    for n, members in enumerate(result.ties):
        placement = state.placement if n == len(result.ties) - 1 else state.placement.clone()
        placement.commit(placement.on_node(result, members[0]))
        out.append(_State(placement, state.weight * len(members) / total, state.history | {i}, state.pending))
    return out


def explore(
    placement: Placement,
    pods: Iterable[PodInfo],
    *,
    counted: Callable[[PodInfo], bool] = lambda _: True,
    budget: int = BUDGET,
    samples: int = SAMPLES,
    seed: int = 0,
) -> Exploration:
    """Place ``pods`` along every tie the scheduler may break either way (``placement`` is used up).

    ``counted``: the pods the pending range counts (the change's, not those waiting already).
    """
    ordered = queue_order(pods)
    placement.classes.focus(pod_texts(ordered))
    users = Counter(key for pod in ordered for key in {pc.key for pc in pod.claims})
    placement.shared_claims = {key for key, n in users.items() if n > 1}
    free = ties_cannot_matter(placement, ordered)
    tally = _Tally(ordered)
    states = [_State(placement, Fraction(1), frozenset())]
    attempts = 0
    for i, pod in enumerate(ordered):
        merged: dict[Any, _State] = {}
        children: list[_State] = []
        for state in states:
            result = state.placement.attempt(pod)
            attempts += 1
            tally.add(i, result, state.weight, state.history)
            if result.node is None and counted(pod):
                state.pending += 1
            children.extend(_branches(state, result, i, free))
        if len(children) == len(states):
            states = children  # no choice anywhere: nothing new to merge
            continue
        for child in children:
            key = (child.placement.state_key(), child.pending)
            seen = merged.get(key)
            if seen is None:
                merged[key] = child
            else:
                seen.weight += child.weight
                seen.history |= child.history
        states = list(merged.values())
        if len(states) > budget or attempts + len(states) * (len(ordered) - i - 1) > ATTEMPTS:
            found = _sample(ordered, i + 1, states, tally, counted, samples, seed)
            found.budget = budget
            return found
    pending = [s.pending for s in states]
    return Exploration(
        tally.finish(ordered, Fraction(1)),
        placements=len(states),
        pending=(min(pending), max(pending)),
        seed=seed,
        budget=budget,
    )


def _sample(
    ordered: list[PodInfo],
    start: int,
    states: list[_State],
    tally: _Tally,
    counted: Callable[[PodInfo], bool],
    samples: int,
    seed: int,
) -> Exploration:
    """From the placements followed so far, random tie-breaks for the pods from ``start`` on."""
    rng = random.Random(seed)
    left = len(ordered) - start
    runs = max(1, min(samples, SAMPLE_ATTEMPTS // max(1, left)))
    weights = [float(s.weight) for s in states]
    pending = []
    share = Fraction(1, runs)
    for _ in range(runs):
        state = rng.choices(states, weights)[0]
        placement = state.placement.clone()
        placement.choose = rng.choice
        count = state.pending
        history = set(state.history)
        for i in range(start, len(ordered)):
            result = placement.attempt(ordered[i])
            tally.add(i, result, share, frozenset(history))
            placement.commit(result)
            if len(result.ties) > 1:
                history.add(i)
            if result.node is None and counted(ordered[i]):
                count += 1
        pending.append(count)
    for v in tally.verdicts[start:]:
        v.samples = runs
        v.placements = runs
    return Exploration(
        tally.finish(ordered, Fraction(1)),
        mode="sampled",
        placements=runs,
        cut=True,
        pending=(min(pending), max(pending)),
        seed=seed,
    )
