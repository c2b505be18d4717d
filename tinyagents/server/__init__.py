"""The operator surface: the HTTP API (FastAPI, imported lazily), its auth and the web console.

    from tinyagents.server import Auth, Control, create_app

    control = Control(runtime)                       # what operators see and do
    auth = Auth.from_key_file("runs.db.server-key")  # Biscuit tokens signed with this key
    app = create_app(control, auth=auth)             # /api/agents/... and the console at /

Nothing here imports FastAPI, uvicorn or biscuit_auth at module level: ``import tinyagents``
stays fast and works without the ``server`` extra.
"""

from tinyagents.server.app import BASE, OperatorApi, create_app
from tinyagents.server.auth import (
    ADMIN_RIGHT,
    CONTROL_RIGHT,
    OBSERVE_RIGHT,
    RIGHTS,
    Auth,
    Principal,
    RunFacts,
)
from tinyagents.server.control import Control
from tinyagents.server.serve import ServeOptions, bind, serve, serving

__all__ = [
    "ADMIN_RIGHT",
    "BASE",
    "CONTROL_RIGHT",
    "OBSERVE_RIGHT",
    "RIGHTS",
    "Auth",
    "Control",
    "OperatorApi",
    "Principal",
    "RunFacts",
    "ServeOptions",
    "bind",
    "create_app",
    "serve",
    "serving",
]
