"""Role behaviour: the three react modes, state selection, observing, errors."""

from __future__ import annotations

import pytest

from actions import Action, UserRequirement
from memory import Message
from rolecast.errors import ActionFailed, ScriptExhausted, UsageError
from rolecast.testing import FunctionLLM, ScriptedLLM
from roles import STATE_TEMPLATE, Role, RoleReactMode


class Recorder(Action):
    """An action that answers with its name and counts its runs."""

    runs: int = 0

    async def run(self, *args, **kwargs):
        self.runs += 1
        return f"{self.name} done"


class Boom(Action):
    async def run(self, *args, **kwargs):
        raise ZeroDivisionError("division by zero")


def many_actions(n: int) -> list[Action]:
    return [Recorder(name=f"A{i}") for i in range(n)]


async def test_react_mode_uses_the_state_template_with_the_role_prefix():
    llm = ScriptedLLM(["1", "-1"])
    role = Role(
        name="Alice",
        profile="Coder",
        goal="write code",
        constraints="be brief",
        llm=llm,
        actions=many_actions(3),
        react_mode="react",
        max_react_loop=5,
    )
    await role.run("add two numbers")
    prompt = llm.calls[0].prompt
    assert prompt.startswith(
        "You are a Coder, named Alice, your goal is write code. the constraint is be brief. "
    )
    assert "Just answer a number between 0-2" in prompt
    assert "0. A0\n1. A1\n2. A2" in prompt
    assert "Your previous stage: -1" in prompt
    assert "user: add two numbers" in prompt
    assert STATE_TEMPLATE.splitlines()[0] in prompt
    assert [a.runs for a in role.actions] == [0, 1, 0]
    # the second prompt shows the state chosen before
    assert "Your previous stage: 1" in llm.calls[1].prompt
    llm.assert_complete()


async def test_minus_one_ends_the_loop_without_calling_act():
    llm = ScriptedLLM(["-1"])
    acted = []

    class Watcher(Role):
        async def _act(self):
            acted.append(self.rc.todo)
            return await super()._act()

    role = Watcher(llm=llm, actions=many_actions(2), max_react_loop=3)
    assert await role.run("hello") is None
    assert acted == []
    assert role.rc.todo is None and role.rc.state == -1
    llm.assert_complete()


async def test_state_ten_is_selectable_and_not_read_as_one():
    llm = ScriptedLLM(["10"])
    role = Role(llm=llm, actions=many_actions(12))
    rsp = await role.run("go")
    assert rsp is not None and rsp.content == "A10 done"
    assert role.actions[10].runs == 1 and role.actions[1].runs == 0


@pytest.mark.parametrize("answer", ["stage 1 or 2", "I choose 1", "1.5", "", "3", "-2"])
async def test_an_invalid_answer_is_logged_and_ends_the_loop(answer):
    llm = ScriptedLLM([answer])
    role = Role(llm=llm, actions=many_actions(3), max_react_loop=4)
    assert await role.run("go") is None
    assert all(a.runs == 0 for a in role.actions)
    llm.assert_complete()


async def test_one_action_means_state_zero_without_asking_the_model():
    llm = ScriptedLLM([])  # any model call would raise ScriptExhausted
    role = Role(llm=llm, actions=[Recorder(name="Only")])
    rsp = await role.run("go")
    assert rsp is not None and rsp.content == "Only done"


async def test_max_react_loop_bounds_the_loop():
    llm = ScriptedLLM(["0", "1", "0"])
    role = Role(llm=llm, actions=many_actions(2), max_react_loop=3)
    await role.run("go")
    assert [a.runs for a in role.actions] == [2, 1]
    llm.assert_complete()


async def test_by_order_runs_each_action_once_in_order_without_choosing():
    order: list[str] = []

    class Step(Action):
        async def run(self, *args, **kwargs):
            order.append(self.name)
            return self.name

    llm = ScriptedLLM([])
    role = Role(
        llm=llm, actions=[Step(name="write"), Step(name="run"), Step(name="report")], react_mode="by_order"
    )
    rsp = await role.run("go")
    assert order == ["write", "run", "report"]
    assert rsp is not None and rsp.content == "report"
    # the next turn starts from the first action again
    await role.run("again")
    assert order[3:] == ["write", "run", "report"]


async def test_by_order_set_before_the_actions_still_covers_all_of_them():
    role = Role(llm=ScriptedLLM([]))
    role._set_react_mode("by_order")
    role.set_actions(many_actions(3))
    await role.run("go")
    assert [a.runs for a in role.actions] == [1, 1, 1]


def test_unknown_react_mode_is_a_usage_error():
    with pytest.raises(UsageError, match="react_mode"):
        Role()._set_react_mode("sometimes")


async def test_results_are_messages_in_memory_with_cause_by_and_sender():
    role = Role(name="Alice", profile="Coder", llm=ScriptedLLM([]), actions=[Recorder(name="Write")])
    rsp = await role.run("go")
    assert rsp is not None
    assert rsp.cause_by == f"{__name__}.Recorder"
    assert rsp.sent_from == "Alice" and rsp.role == "Coder"
    assert role.get_memories()[-1] == rsp
    assert role.get_memories(k=1) == [rsp]


async def test_an_act_override_that_forgets_memory_still_gets_remembered_once():
    class Forgetful(Role):
        async def _act(self):
            return Message(content="x", role=self.profile, cause_by=type(self.rc.todo))

    class Careful(Role):
        async def _act(self):
            msg = Message(content="y", role=self.profile, cause_by=type(self.rc.todo))
            self.rc.memory.add(msg)
            return msg

    for cls in (Forgetful, Careful):
        role = cls(llm=ScriptedLLM([]), actions=[Recorder()])
        rsp = await role.run("go")
        assert role.rc.memory.get_by_action(Recorder) == [rsp]


async def test_the_metagpt_init_style_works():
    class SimpleWriteCode(Action):
        PROMPT_TEMPLATE: str = "Write a python function that can {instruction}."
        name: str = "SimpleWriteCode"

        async def run(self, instruction: str):
            return await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction))

    class SimpleCoder(Role):
        name: str = "Alice"
        profile: str = "SimpleCoder"

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._watch([UserRequirement])
            self.set_actions([SimpleWriteCode])

        async def _act(self) -> Message:
            todo = self.rc.todo
            msg = self.get_memories(k=1)[0]
            code_text = await todo.run(msg.content)
            msg = Message(content=code_text, role=self.profile, cause_by=type(todo))
            self.rc.memory.add(msg)
            return msg

    llm = FunctionLLM(lambda messages: "def add(a, b): return a + b")
    coder = SimpleCoder(llm=llm)
    rsp = await coder.run("add two numbers")
    assert rsp is not None and rsp.content == "def add(a, b): return a + b"
    assert llm.calls[0].prompt == "Write a python function that can add two numbers."
    # the role's identity is the action's system prompt
    assert llm.calls[0].messages[0] == {
        "role": "system",
        "content": "You are a SimpleCoder, named Alice. ",
    }


async def test_a_role_ignores_messages_it_does_not_watch_and_its_own():
    class Other(Action):
        pass

    role = Role(name="Bob", llm=ScriptedLLM([]), actions=[Recorder()])
    role.put_message(Message("not watched", cause_by=Other))
    role.put_message(Message("mine", cause_by=UserRequirement, sent_from="Bob"))
    assert await role.run() is None
    assert role.get_memories() == []
    assert role.is_idle


async def test_a_message_addressed_by_name_is_observed_even_if_not_watched():
    class Other(Action):
        pass

    role = Role(name="Bob", llm=ScriptedLLM([]), actions=[Recorder()])
    role.put_message(Message("for you", cause_by=Other, send_to="Bob"))
    rsp = await role.run()
    assert rsp is not None and rsp.content == "Recorder done"


async def test_a_raising_action_becomes_action_failed_and_keeps_the_news():
    role = Role(name="Eve", llm=ScriptedLLM([]), actions=[Boom()])
    with pytest.raises(ActionFailed) as info:
        await role.run("divide")
    err = info.value
    assert err.role == "Eve" and err.action == "Boom"
    assert isinstance(err.__cause__, ZeroDivisionError)
    # nothing is lost: the news goes back to the inbox, to be read again at the next turn
    assert role.get_memories() == []
    assert [m.content for m in role.rc.msg_buffer.pop_all()] == ["divide"]
    assert role.rc.todo is None and role.is_idle


async def test_model_errors_pass_through_with_their_own_type():
    role = Role(llm=ScriptedLLM([]), actions=many_actions(2))
    with pytest.raises(ScriptExhausted):
        await role.run("go")


async def test_recovered_role_resumes_its_state_without_asking():
    llm = ScriptedLLM([])
    role = Role(llm=llm, actions=many_actions(3))
    role.recovered = True
    role.rc.state = 2
    rsp = await role.run("go")
    assert rsp is not None and rsp.content == "A2 done"


def test_react_mode_values():
    assert RoleReactMode.values() == ["react", "by_order", "plan_and_act"]


async def test_a_pydantic_result_becomes_instruct_content():
    from pydantic import BaseModel

    class Verdict(BaseModel):
        ok: bool

    class Answer(BaseModel):
        text: str

        def __str__(self) -> str:
            return self.text

    class Judge(Action):
        async def run(self, *args, **kwargs):
            return Verdict(ok=True)

    class Reply(Action):
        async def run(self, *args, **kwargs):
            return Answer(text="55")

    judged = await Role(llm=ScriptedLLM([]), actions=[Judge()]).run("go")
    assert judged is not None and judged.content == '{"ok":true}'
    assert judged.instruct_content == Verdict(ok=True)
    replied = await Role(llm=ScriptedLLM([]), actions=[Reply()]).run("go")
    assert replied is not None and replied.content == "55"
    assert isinstance(replied.instruct_content, Answer)
