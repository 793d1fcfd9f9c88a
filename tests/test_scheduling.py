"""The round scheduler runs only the roles that received something they can react to."""

from __future__ import annotations

from actions import Action, UserRequirement
from environment import Environment
from memory import Message
from rolecast.errors import ActionFailed
from rolecast.testing import ScriptedLLM
from roles import Role


class Listen(Action):
    async def run(self, history):
        return f"heard {history[-1].content}"


class Shout(Action):
    async def run(self, history):
        return "shout"


TURNS: list[str] = []  # the roles' turns, in the order they were taken


class Counted(Role):
    async def run(self, with_message=None):
        TURNS.append(self.name)
        return await super().run(with_message)


def counted(name: str, watch, order: list[str]) -> Counted:
    order.clear()
    return Counted(name=name, actions=[Listen()], watch=watch, llm=ScriptedLLM([]))


async def test_only_roles_that_can_react_take_a_turn():
    order = TURNS
    env = Environment()
    roles = [counted(f"R{i}", [Shout], order) for i in range(30)]
    env.add_roles(roles)
    env.publish_message(Message("for R7", cause_by=UserRequirement, send_to="R7"))
    env.publish_message(Message("nobody watches this", cause_by=UserRequirement))
    await env.run()
    assert order == ["R7"]
    assert roles[7].get_memories()[-1].content == "heard for R7"
    await env.run(k=3)
    assert order == ["R7"]  # nobody watches R7's answer (a Listen broadcast): no more turns
    assert env.is_idle and all(r.is_idle for r in roles)
    # the broadcasts nobody could react to were not kept in any inbox
    assert all(len(r.rc.msg_buffer) == 0 for r in roles)


async def test_ready_roles_run_in_the_roles_order_whatever_the_delivery_order():
    order = TURNS
    env = Environment()
    env.add_roles(counted(f"R{i}", [Shout], order) for i in range(5))
    for name in ("R4", "R1", "R3"):
        env.publish_message(Message(f"for {name}", cause_by=UserRequirement, send_to=name))
    await env.run()
    assert order == ["R1", "R3", "R4"]


async def test_a_message_a_role_cannot_react_to_is_counted_not_kept():
    role = Role(name="Bob", actions=[Listen()], watch=[Shout], llm=ScriptedLLM([]))
    role.put_message(Message("unwatched", cause_by=UserRequirement))
    role.put_message(Message("own", cause_by=Shout, sent_from="Bob"))
    assert len(role.rc.msg_buffer) == 0  # counted (the role is not idle, as in MetaGPT), not kept
    assert not role.is_idle
    assert await role.run() is None and role.is_idle
    role.put_message(Message("watched", cause_by=Shout))
    assert len(role.rc.msg_buffer) == 1 and not role.is_idle


async def test_a_role_with_its_own_observe_still_receives_everything():
    class Curious(Role):
        seen: list[str] = []

        async def _observe(self) -> int:
            self.seen.extend(m.content for m in self.rc.msg_buffer.pop_all())
            return 0

    env = Environment()
    curious = Curious(name="Cu", actions=[Listen()], watch=[Shout], llm=ScriptedLLM([]))
    env.add_role(curious)
    env.publish_message(Message("not watched", cause_by=UserRequirement))
    await env.run()
    assert curious.seen == ["not watched"]


async def test_observe_all_messages_still_remembers_what_it_does_not_react_to():
    env = Environment()
    archivist = Role(name="Ar", actions=[Listen()], watch=[Shout], llm=ScriptedLLM([]),
                     observe_all_msg_from_buffer=True)
    env.add_role(archivist)
    env.publish_message(Message("not watched", cause_by=UserRequirement))
    await env.run()
    assert [m.content for m in archivist.get_memories()] == ["not watched"]


async def test_a_turn_failing_before_it_reads_its_inbox_is_run_again_next_round():
    class Flaky(Role):
        failures: int = 1

        async def _observe(self) -> int:
            if self.failures:
                self.failures -= 1
                raise RuntimeError("not yet")
            return await super()._observe()

    env = Environment(on_error="continue")
    flaky = Flaky(name="Fl", actions=[Listen()], llm=ScriptedLLM([]))
    env.add_role(flaky)
    env.publish_message(Message("go", cause_by=UserRequirement))
    await env.run()
    assert isinstance(env.errors[0], ActionFailed)
    assert not env.is_idle  # the message still waits
    await env.run()
    assert [m.content for m in flaky.get_memories()] == ["go", "heard go"]


async def test_a_role_hired_with_messages_in_its_inbox_is_run():
    role = Role(name="Late", actions=[Listen()], llm=ScriptedLLM([]))
    role.put_message(Message("waiting", cause_by=UserRequirement))
    env = Environment()
    env.add_role(role)
    assert not env.is_idle
    await env.run()
    assert role.get_memories()[-1].content == "heard waiting"


def test_an_inbox_shipped_to_another_process_leaves_its_environment_behind():
    import pickle

    from environment import Environment
    from memory import Message
    from roles import Role

    env = Environment()
    role = Role(name="A")
    env.add_role(role)
    role.put_message(Message(content="hi", send_to={"A"}))
    copy = pickle.loads(pickle.dumps(role.rc.msg_buffer))
    assert [m.content for m in copy.pop_all()] == ["hi"]
    assert copy._listener is None


async def test_a_message_pushed_past_the_delivery_check_is_still_checked_when_read():
    """put_message screens what it delivers; a message pushed straight into the inbox
    (MetaGPT scripts do) is checked when the role reads it, so the role never reacts to it."""
    role = Role(name="Solo", actions=[Listen()], watch=[Shout], llm=ScriptedLLM([]))
    role.put_message(Message(content="for someone else", cause_by=Listen))  # screened: ignored
    assert role.rc.msg_buffer.screened
    role.rc.msg_buffer.push(Message(content="not watched", cause_by=Listen))  # not screened
    role.rc.msg_buffer.push(Message(content="watched", cause_by=Shout))
    assert not role.rc.msg_buffer.screened
    assert await role._observe() == 1
    assert [m.content for m in role.rc.news] == ["watched"]
    assert role.rc.msg_buffer.screened  # read: the empty inbox is screened again


async def test_a_run_with_no_store_still_tells_its_subscribers_every_call_and_message():
    """A log nobody reads skips describing events; one subscriber makes it describe them all."""
    from environment import Team

    class Ask(Action):
        async def run(self, history):
            return await self._aask(history[-1].content)

    team = Team(store=None, llm=ScriptedLLM(["first answer"]))
    team.hire([Role(name="A", actions=[Ask()], watch=[UserRequirement])])
    assert team.run_log.idle
    events = []
    team.run_log.subscribe(events.append)
    assert not team.run_log.idle
    await team.run(n_round=2, idea="go")
    calls = [e for e in events if e.kind == "llm_call"]
    assert len(calls) == 1 and calls[0].data["fingerprint"] and calls[0].role == "A"
    assert [e.data["message"]["content"] for e in events if e.kind == "message"] == ["go", "first answer"]
