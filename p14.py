import asyncio, operator
from typing import Annotated, TypedDict
from tinyagents import Runtime
from tinyagents.graph import StateGraph, START, END, Command
from tinyagents.store.checkpoint import MemoryCheckpointer, SqliteCheckpointer
class S(TypedDict):
    x: int
    log: Annotated[list, operator.add]
def a(s): return {"x": s["x"]+1, "log": ["a"]}
async def atry(label, coro):
    try: r = await coro; print(label, 'OK', repr(r)[:220])
    except Exception as e: print(label, 'RAISED', type(e).__module__, type(e).__name__, str(e)[:250])
async def m(cp):
    g = StateGraph(S).add_node("a", a).add_edge(START, "a").add_edge("a", END).compile(checkpointer=cp)
    async with Runtime() as rt:
        await g.run({"x": 1, "log": []}, thread_id="t1", runtime=rt)
        await g.run({"x": 100, "log": []}, thread_id="t2", runtime=rt)
        c1 = (await g.history("t1"))[-1].checkpoint_id
        await atry("run t2 with t1's checkpoint", g.run(None, thread_id="t2", runtime=rt, checkpoint_id=c1))
        await atry("get_state t2 with t1's cp", g.get_state("t2", c1))
        await atry("update t2 at t1's cp", g.update_state("t2", {"x": 5}, checkpoint_id=c1))
        await atry("fork t2 from t1's cp", g.fork("t2", c1))
        await atry("history t2 before t1's cp", g.history("t2", before=c1))
        await atry("recursion 10**100", g.run({"x": 1}, thread_id="t3", runtime=rt, recursion_limit=10**100))
        await atry("max_concurrency 10**100", g.run({"x": 1}, thread_id="t4", runtime=rt, max_concurrency=10**100))
        await atry("interrupt_before str unknown", g.run({"x": 1}, thread_id="t5", runtime=rt, interrupt_before="zz"))
        await atry("interrupt_before *", g.run({"x": 1}, thread_id="t6", runtime=rt, interrupt_before="*"))
        await atry("thread none", g.run({"x": 1}, runtime=rt))
        await atry("checkpoint w/o thread", g.run({"x": 1}, runtime=rt, checkpoint_id=c1))
async def main():
    await m(MemoryCheckpointer())
    async with SqliteCheckpointer("/tmp/wF/p14.db") as cp: await m(cp)
asyncio.run(main())
