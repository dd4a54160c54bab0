"""`dra-gitops demo`: the reconciler's whole story on an embedded cluster and a throw-away Git repository."""
