"""The web dashboard: targets, a target's history, a commit's report and the device map, as HTML.

Pure page rendering from plain data (`html.py` escapes every value, one template function per page), the
routing and the safety headers (`app.py`), and the edges that read the cluster and Git (`gather.py`,
`reports.py`). `dra-gitops ui` serves it with `server.py`; `dra-gitops run` serves the same pages at `/`
of its HTTP port.
"""
