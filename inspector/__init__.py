"""The operator's inspector (issue #30): a page that shows what the model saw, and why.

`pages` answers the page, its static files and its tenants list for both servers:
`make run`'s gateway (`local/http_gateway.py`) and `python -m inspector`, which
serves the same page on loopback against a deployed stack (`server`).
"""
