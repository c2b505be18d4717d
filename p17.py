import asyncio, sys, gc, warnings
warnings.simplefilter("always")
from tinyagents import Agent, Runtime
from tinyagents.testkit import ScriptedModel
async def m(store, enters, exits):
    rt = Runtime(store=store)
    await asyncio.gather(*[rt.__aenter__() for _ in range(enters)])
    print("enters", enters, "exits", exits, "store db", rt.store._db is not None)
    await asyncio.gather(*[rt.__aexit__(None, None, None) for _ in range(exits)])
    print(" closed; db", rt.store._db)
for e, x in [(1,1),(1,2),(2,1),(2,2)]:
    asyncio.run(m("sqlite:////tmp/wF/p17.db", e, x)); gc.collect()
