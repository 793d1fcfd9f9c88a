"""The code of MetaGPT's in-depth guide "Agent Communication" (geekan/MetaGPT-docs,
src/en/guide/in_depth_guides/agent_communication.md) with its imports changed.

The page shows fragments; what it leaves out is filled in here, each marked FILLED: the imports,
``split_10_subtask``, the bodies the page writes as ``...`` (each asks the model), the end of
Agent D's review loop (the page: "steps 2-4 need to happen 3-4 times"; D approves its third
compilation and sends the approval to no one), and ``main`` around the page's closing lines.
The page's ``class AgentAAction(Aciton)`` is spelled ``Action``.
"""

from typing import List  # FILLED

from actions import Action, UserRequirement  # FILLED
from environment import Environment  # FILLED
from memory import Message  # FILLED
from rolecast.const import MESSAGE_ROUTE_TO_NONE  # FILLED
from rolecast.context import Context  # FILLED
from roles import Role  # FILLED


def split_10_subtask(requirement: str) -> List[str]:  # FILLED
    return [f"{requirement}: subtask {i}" for i in range(1, 11)]


class AgentAAction(Action):
    async def run(self, with_messages:List[Message]=None, **kwargs) -> List[str]:
        subtasks: List[str] = split_10_subtask(with_messages[0].content)
        return subtasks


class AgentA(Role):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # Initialize actions specific to the Architect role
        self.set_actions([AgentAAction]) # Since the agent has only one action, there's no need to modify the `Role._think` function.

        # Subscribe to messages
        self._watch({UserRequirement}) # `UserRequirement` is the default value for the `cause_by` attribute in `Message`.

    async def _act(self) -> Message:
        subtasks = await self.rc.todo.run(self.rc.history)
        for i in subtasks:
           self.rc.env.publish_message(Message(content=i, cause_by=AgentAAction)) # Send 10 messages of this type; Agent B subscribes to this type of message
        return Message(content="dummy message", send_to=MESSAGE_ROUTE_TO_NONE) # Since the messages have been sent, returning an empty message is sufficient.


class AgentBAction(Action):
        async def run(self, with_messages:List[Message]=None, **kwargs) -> Message:
            news = "\n".join(m.content for m in with_messages[-10:])  # FILLED
            return Message(content=await self._aask(f"Do these subtasks:\n{news}"), cause_by=AgentBAction)  # FILLED

class AgentB(Role):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # Initialize actions specific to the Architect role
        self.set_actions([AgentBAction]) # Since the agent only has one type of action, there is no need to modify the `Role._think` function.

        # Subscribe to messages
        self._watch({AgentAAction, AgentDAction})


class AgentCAction(Action):
        async def run(self, with_messages:List[Message]=None, **kwargs) -> Message:
            work = with_messages[-1].content  # FILLED
            return Message(content=await self._aask(f"Compile this work:\n{work}"), cause_by=AgentCAction)  # FILLED

class AgentC(Role):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # Initialize actions specific to the Architect role
        self.set_actions([AgentCAction]) # Since the agent only has one type of action, there is no need to modify the `Role._think` function.

        # Subscribe to messages
        self._watch({AgentBAction})


class AgentDAction(Action):
        async def run(self, with_messages:List[Message]=None, **kwargs) -> Message:
            compiled = [m for m in with_messages if m.cause_by.endswith("AgentCAction")]  # FILLED
            if len(compiled) >= 3:  # FILLED
                return Message(content="approved", cause_by=AgentDAction, send_to=MESSAGE_ROUTE_TO_NONE)  # FILLED
            feedback = await self._aask(f"Review this compilation:\n{compiled[-1].content}")  # FILLED
            return Message(content=feedback, cause_by=AgentDAction)  # FILLED

class AgentD(Role):
    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        # Initialize actions specific to the Architect role
        self.set_actions([AgentDAction]) # Since the agent only has one type of action, there is no need to modify the `Role._think` function.

        # Subscribe to messages
        self._watch({AgentCAction})


async def main():  # FILLED
    context = Context() # Load config2.yaml
    env = Environment(context=context)
    env.add_roles([AgentA(), AgentB(), AgentC(), AgentD()])
    env.publish_message(Message(content='New user requirements', send_to=AgentA)) # Send the user's message to Agent A to start the process.
    while not env.is_idle: # `env.is_idle` becomes True only when all agents have no new messages to process.
        await env.run()
    return env  # FILLED
