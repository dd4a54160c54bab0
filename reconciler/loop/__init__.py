"""The long-running reconciler: `dra-gitops run` and what only it uses.

`controller.py` runs a worker per target under Leases, with the HTTP endpoints (`httpserver.py`,
`metrics.py`); `reconcile.py` is one pass of one target (its values in `reconcile_types.py`), reading
revisions through `revisions.py`, recording in `state.py` (its typed records in `records.py`, built by
`evidence.py`, shown by `statusview.py`); `targets.py` is what a target is, from flags or a config file.
"""
