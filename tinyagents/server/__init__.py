"""The operator surface: the HTTP API (FastAPI, imported lazily), its auth and the web console.

Nothing here imports FastAPI or uvicorn at module level: ``import tinyagents`` stays fast and
works without the ``server`` extra.
"""
