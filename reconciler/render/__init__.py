"""Rendering what a repository keeps as kustomizations (and, later, charts) into plain objects, by the
tools' own engines: `kustomize_scan.py` reads a kustomization's graph and refuses what must not run (remote
bases, files outside the repository); `kustomize.py` runs `kubectl kustomize` on it and says where each
rendered object came from."""
