"""Diagnosis (`dra-gitops diagnose`, and every failed verification): symptom -> failure mode -> recovery.

`collect.py` reads a `Snapshot` (`types.py`) from the cluster, `classify.py` turns it into `Diagnosis`
values (pure: the per-claim modes in `claim_modes.py`, the selector-error mode in `selector.py`, on the
shared base of `scope.py` and the evidence helpers of `evidence.py`), `render.py` prints them.
"""

from reconciler.cluster.diagnose.classify import classify
from reconciler.cluster.diagnose.collect import collect_snapshot, diagnose
from reconciler.cluster.diagnose.evidence import event_line, events_for, pod_claim_refs
from reconciler.cluster.diagnose.render import render_diagnoses
from reconciler.cluster.diagnose.selector import selector_failure_in
from reconciler.cluster.diagnose.types import FAILED_PREPARE, FAILED_SCHEDULING, MODES, Diagnosis, Snapshot

__all__ = [
    "Diagnosis",
    "FAILED_PREPARE",
    "FAILED_SCHEDULING",
    "MODES",
    "Snapshot",
    "classify",
    "collect_snapshot",
    "diagnose",
    "event_line",
    "events_for",
    "pod_claim_refs",
    "render_diagnoses",
    "selector_failure_in",
]
