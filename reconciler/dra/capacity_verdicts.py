"""The words of the tie-aware capacity verdicts (pure): shares, the Pending range, what removes a risk."""

from __future__ import annotations

from typing import Any

from reconciler.dra.allocator import CANNOT_ALLOCATE
from reconciler.dra.ties import Exploration, PodVerdict

__all__ = ["at_risk_advice", "fraction_text", "pending_range"]


def fraction_text(verdict: PodVerdict) -> str:
    """``fits in 5 of 8 equally likely placements`` (or ``of 32 sampled placements``)."""
    share = verdict.fits
    if verdict.samples:
        hits = round(share * verdict.samples)
        return f"fits in {hits} of {verdict.samples} sampled placements"
    return f"fits in {share.numerator} of {share.denominator} equally likely placements"


def pending_range(exploration: Exploration, of: int) -> dict[str, Any]:
    """The fewest and most pods of the change that may stay Pending, and the summary line."""
    low, high = exploration.pending
    if of == 0:
        summary = ""
    elif high == 0:
        summary = f"all {of} pods get a node" if of != 1 else "the pod gets a node"
    elif low == high:
        summary = f"{low} of {of} pods stay Pending"
    else:
        summary = f"{low}\u2013{high} of {of} pods may stay Pending"
    if exploration.mode == "sampled":
        summary += f" (in {exploration.placements} sampled placements)"
    return {"min": low, "max": high, "of": of, "summary": summary}


def _names(items: list[str], limit: int = 3) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def at_risk_advice(verdict: PodVerdict) -> str:
    """What removes the risk: the nodes that decide it, and the earlier pods whose choice of node does."""
    miss = verdict.miss
    short = [r.node for r in (miss.rejections if miss is not None else []) if r.reason == CANNOT_ALLOCATE]
    where = f" on {_names(short)}" if short else ""
    deciders = (
        f"where the scheduler puts {_names(verdict.deciders)} decides it (equal scores); "
        if verdict.deciders
        else ""
    )
    return (
        f"{deciders}one more matching device{where}, fewer devices per claim, a matchAttribute, or a "
        "nodeSelector that keeps the earlier pods off the node this one needs removes the risk"
    )
