"""A real operator server for the tests here: uvicorn on a free loopback port, in the test's
event loop (so it shares the runtime), and an httpx client. ``conftest.py`` makes ``served``
a fixture.

    async def test_x(served: Served) -> None:
        run = await served.start_run("acme")
        r = await served.client.get(f"/api/agents/runs/{run.run_id}", headers=served.as_("alice"))
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tinyagents import Agent, RunHandle, RunLimits, Runtime
from tinyagents.graph import StateGraph
from tinyagents.server import Auth, Control, bind, create_app, serving
from tinyagents.store.checkpoint import MemoryCheckpointer
from tinyagents.testkit import FunctionModel, reply, tool_call

BASE = "/api/agents"
#: ``think_s`` of a run that only has to exist: it stays in its first model call, running.
IDLE_S = 3600.0


def step(n: int) -> str:
    """One step of a task that never ends by itself."""
    return f"step {n}"


def busy_agent(name: str = "busy", *, think_s: float = 0.01) -> Agent:
    """An agent that keeps calling ``step`` (passing a boundary every ``think_s``) until it is
    steered with a message holding ``finish``."""

    async def think(request: Any) -> Any:
        await asyncio.sleep(think_s)
        steered = [m.content for m in request.messages if "steering" in m.metadata]
        if any("finish" in text for text in steered):
            return reply("finished")
        return tool_call("step", n=len(request.messages))

    return Agent(
        name,
        FunctionModel(think, name=f"{name}-model"),
        tools=[step],
        limits=RunLimits(max_model_calls=100_000, max_tool_calls=100_000),
    )


@dataclass(slots=True)
class Served:
    url: str
    client: httpx.AsyncClient
    runtime: Runtime
    control: Control
    auth: Auth
    tokens: dict[str, str] = field(default_factory=dict)

    def mint(self, name: str, *, tenant: str, rights: str, user: str | None = None) -> str:
        token = self.auth.mint(user=user or name, tenant=tenant, rights=rights.split(","))
        self.tokens[name] = token
        return token

    def as_(self, name_or_token: str) -> dict[str, str]:
        token = self.tokens.get(name_or_token, name_or_token)
        return {"Authorization": f"Bearer {token}"}

    async def start_run(
        self,
        tenant: str,
        *,
        parent: RunHandle | None = None,
        name: str = "busy",
        think_s: float = 0.01,
    ) -> RunHandle:
        """A ``busy_agent`` run of ``tenant``. Each of its steps costs more than the last (its
        model is handed the whole history), and it steps in the loop that serves and asks:
        a test that only needs a run to exist gives a long ``think_s`` (``IDLE_S``), so
        that the longer it takes (a loaded machine) is not the more work it has to do."""
        kwargs: dict[str, Any] = {"tenant_id": tenant}
        if parent is not None:
            kwargs["parent"] = parent
        return await self.runtime.start(busy_agent(name, think_s=think_s), "work", **kwargs)

    async def start_question(
        self, graph: StateGraph[Any], inputs: Any, *, thread_id: str, as_: str = "alice"
    ) -> tuple[RunHandle, dict[str, Any]]:
        """Run ``graph`` (compiled on a ``MemoryCheckpointer``) for ``as_``'s tenant (acme)
        until it asks its one question; the run and that pending interrupt as the API shows
        it to ``as_``."""
        run = await self.runtime.start_graph(
            graph.compile(checkpointer=MemoryCheckpointer()),
            inputs,
            thread_id=thread_id,
            tenant_id="acme",
        )

        async def asked() -> Any:
            r = await self.client.get(f"{BASE}/runs/{run.run_id}", headers=self.as_(as_))
            return r.json().get("interrupts")

        (pending,) = await eventually(asked)
        return run, pending


async def served_app(tmp_path: Path) -> AsyncIterator[Served]:
    """A runtime on a SQLite file, served over real HTTP with Biscuit auth; tokens ``alice``
    (acme, observe+control), ``olga`` (acme, observe), ``bob`` (globex, observe+control) and
    ``root`` (globex, iam:admin)."""
    async for s in _serve(tmp_path, store=f"sqlite:///{tmp_path / 'runs.db'}"):
        yield s


async def _serve(tmp_path: Path, *, store: str | None) -> AsyncIterator[Served]:
    auth = Auth(Auth.generate_key())
    async with Runtime(store=store) as runtime:
        # a command for a run not listed is looked for again this long before its 404 (short
        # here: each unknown run's command waits it; test_api_just_started covers the wait)
        control = Control(runtime, listing_wait_s=0.2)
        app = create_app(control, auth=auth)
        sock = bind("127.0.0.1", 0)
        async with serving(app, sock):
            host, port = sock.getsockname()[:2]
            url = f"http://{host}:{port}"
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                s = Served(url, client, runtime, control, auth)
                s.mint("alice", tenant="acme", rights="agent:observe,agent:control")
                s.mint("olga", tenant="acme", rights="agent:observe")
                s.mint("bob", tenant="globex", rights="agent:observe,agent:control")
                s.mint("root", tenant="globex", rights="iam:admin")
                try:
                    yield s
                finally:
                    for handle in runtime.runs.handles():
                        if handle.task is not None and not handle.task.done():
                            handle.task.cancel()
        control.close()


async def eventually(check: Callable[[], Any], *, timeout_s: float = 60.0) -> Any:
    """Poll ``check`` (sync or async) until it returns something truthy; fail after
    ``timeout_s`` (a bound on waiting, not a timed assertion)."""
    async with asyncio.timeout(timeout_s):
        while True:
            value = check()
            if asyncio.iscoroutine(value):
                value = await value
            if value:
                return value
            await asyncio.sleep(0.02)
