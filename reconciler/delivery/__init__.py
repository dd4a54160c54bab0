"""The one-shot delivery of a revision: its desired state, the policy check, dry-run, staged apply, verify.

`dra-gitops check`, `plan`, `apply` and `watch` run these once; the reconcile loop (`loop/`) runs them
for every pass.
"""
