"""The HTTP face: every endpoint (webhooks, probes, `/metrics`, the dashboard) as a WSGI application
(Werkzeug) on waitress, with one set of security headers on every answer, errors included."""
