import asyncio
from tinyagents import Agent, SubAgent, SubAgentTool, SteeringCommand, SteeringTarget, SteeringActor, SteeringKind
from tinyagents.runtime import Runtime
from tinyagents.testkit import ScriptedModel, FunctionModel, reply, tool_call, Gate
import tinyagents.testkit as tk
print([n for n in dir(tk) if not n.startswith("_")])

async def test_models():
    async with Runtime(testing=True) as rt:
        gate = asyncio.Event(); go = asyncio.Event()
        seen = []
        async def child_fn(req):
            seen.append(req.model)
            return "c"
        child = Agent("child", model=FunctionModel(child_fn), models=["big", "small"])
        calls = 0
        async def parent_fn(req):
            nonlocal calls
            calls += 1
            if calls == 1:
                gate.set(); await go.wait()
                return tool_call("child", input="x")
            return "p"
        parent = Agent("parent", model=FunctionModel(parent_fn), models=["big", "small"], tools=[SubAgentTool(SubAgent(child))])
        h = await rt.start(parent, "go")
        await gate.wait()
        r = await rt.submit(SteeringCommand(target=SteeringTarget.agent_run(h.run_id), actor=SteeringActor.test(), kind=SteeringKind.CONSTRAIN_MODEL, payload={"models": ["small"]}))
        print("constrain", r.status, r.reason)
        go.set()
        res = await h.result()
        print(res.status, h.info.models, seen)
        for info in rt.runs.list():
            print(info.run_id, info.agent_id, info.models)

async def test_authority():
    async with Runtime(testing=True) as rt:
        go = asyncio.Event()
        async def slow(req):
            await go.wait(); return "x"
        root = await rt.start(Agent("root", model=FunctionModel(slow)), "go")
        a = await rt.start(Agent("a", model=FunctionModel(slow)), "go", parent=root)
        b = await rt.start(Agent("b", model=FunctionModel(slow)), "go", parent=root)
        a1 = await rt.start(Agent("a1", model=FunctionModel(slow)), "go", parent=a)
        def cmd(actor_run, agent_id, target):
            return SteeringCommand(target=SteeringTarget.agent_run(target.run_id), actor=SteeringActor.parent_agent(actor_run, agent_id), kind=SteeringKind.ADD_INSTRUCTION, payload={"text": "hi"})
        for label, c in [
            ("real parent", cmd(root.run_id, "root", a)),
            ("parent run, wrong agent_id", cmd(root.run_id, "impostor", a)),
            ("sibling", cmd(b.run_id, "b", a)),
            ("sibling w/ parent's agent id", cmd(b.run_id, "root", a)),
            ("grandchild as parent of a", cmd(a1.run_id, "a1", a)),
            ("grandchild claims root agent", cmd(a1.run_id, "root", a)),
            ("grandparent", cmd(root.run_id, "root", a1)),
            ("self", cmd(a.run_id, "a", a)),
            ("unknown run", cmd("r-nope", "root", a)),
        ]:
            r = await rt.submit(c)
            print(label, "->", r.status, r.reason)
        go.set()
