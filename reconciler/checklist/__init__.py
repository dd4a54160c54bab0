"""`dra-gitops checklist`: the operational checklist of a DRA deployment, filled from live data.

`facts.py` (values), `items.py` (the pure judge), `render.py` (Markdown, JSON, text) and `gather.py`
(the cluster edge that reads the facts).
"""
