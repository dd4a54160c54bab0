"""dra-gitops: a GitOps reconciler and policy checker for Kubernetes Dynamic Resource Allocation."""

__version__ = "0.1.0"
