"""Policy input document, engines and reports."""
