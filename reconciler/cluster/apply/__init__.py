"""From a plan to the server: server-side dry-run, staged apply, and what is already as delivered.

`changeset.py` (per-object results, diffs, the work items behind them), `dryrun.py` (`dry_run`: nothing is
written), `render.py` (a dry-run as text, JSON, Markdown), `staged.py` (`apply_plan`: stage by stage, with
`stagewait.py` waiting for each), `drift.py` (steady state: one LIST per kind compared in memory) and
`noop.py` (a delivery of the tree last delivered, found unchanged without a dry-run).
"""

from reconciler.cluster.apply.changeset import (
    ApplyResult,
    DryRunResult,
    ObjectResult,
    StageResult,
    strip_server_fields,
)
from reconciler.cluster.apply.drift import DriftReport, Fingerprints, scan_drift
from reconciler.cluster.apply.dryrun import dry_run
from reconciler.cluster.apply.noop import desired_digest, unchanged_since_delivery
from reconciler.cluster.apply.render import dry_run_json, render_dry_run, render_dry_run_markdown, render_plan
from reconciler.cluster.apply.staged import apply_plan
from reconciler.cluster.apply.stagewait import FailFast

__all__ = [
    "ApplyResult",
    "DriftReport",
    "DryRunResult",
    "FailFast",
    "Fingerprints",
    "ObjectResult",
    "StageResult",
    "apply_plan",
    "desired_digest",
    "dry_run",
    "dry_run_json",
    "render_dry_run",
    "render_dry_run_markdown",
    "render_plan",
    "scan_drift",
    "strip_server_fields",
    "unchanged_since_delivery",
]
