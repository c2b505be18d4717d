import asyncio
from tinyagents import Agent, RunLimits
from tinyagents.runtime import Runtime
from tinyagents.testkit import ScriptedModel, reply

async def test_child_of_finished():
    async with Runtime(testing=True) as rt:
        h = await rt.start(Agent("p", model=ScriptedModel(["p"])), "go", limits=RunLimits(max_model_calls=1))
        print((await h.result()).status)
        try:
            c = await rt.start(Agent("c", model=ScriptedModel(["c"])), "go", parent=h)
            r = await c.result()
            print("child of finished parent:", r.status, r.error, c.info.limits)
        except Exception as e:
            print("refused:", type(e).__name__, e)
