"""Agents that cost little (issue 38): what a role that has not spoken yet holds, and that sharing it
changes nothing a user can see."""

from __future__ import annotations

from footprints import built_bytes_per_agent

from actions import Action
from environment import Environment
from memory import Message
from rolecast.testing import FunctionLLM
from roles import Role
from roles.action_list import raw_action, raw_actions


class Greet(Action):
    name: str = "Greet"

    async def run(self, history: list[Message]) -> str:
        return await self._aask(f"greet, as {self.owner.name}")


class Count(Action):
    """Keeps per-role state on the action, MetaGPT-style: ``self.calls`` grows with each run."""

    name: str = "Count"
    calls: int = 0

    async def run(self, history: list[Message]) -> str:
        self.calls += 1
        return f"{self.owner.name} ran {self.calls} time(s)"


class Notes(Action):
    """A mutable default: each role must have its own list."""

    name: str = "Notes"
    notes: list[str] = []

    async def run(self, history: list[Message]) -> str:
        self.notes.append(history[-1].content)
        return ",".join(self.notes)


def echo_system() -> FunctionLLM:
    # answers with the system prompt it was given: which identity the action spoke with
    return FunctionLLM(lambda messages: str(messages[0]["content"]), model="echo")


def test_two_roles_given_the_same_action_class_hold_one_action_but_each_speaks_as_itself():
    alice = Role(name="Alice", profile="Greeter", actions=[Greet], llm=echo_system())
    bob = Role(name="Bob", profile="Greeter", actions=[Greet], llm=echo_system())
    [held_a], [held_b] = list(raw_actions(alice.actions)), list(raw_actions(bob.actions))
    assert held_a is held_b is Greet.shared()
    assert alice.states == bob.states == ["0. Greet"]

    env = Environment()
    env.add_roles([alice, bob])
    env.publish_message(Message("hello"))
    import asyncio

    asyncio.run(env.run())
    said = {m.sent_from: m.content for m in env.history.get() if m.sent_from in ("Alice", "Bob")}
    assert "named Alice" in said["Alice"] and "named Bob" in said["Bob"]
    assert raw_action(alice.actions, 0) is Greet.shared()  # nothing changed it: still shared


def test_reading_a_roles_actions_hands_out_its_own_with_its_owner_and_prompt():
    alice = Role(name="Alice", profile="Greeter", actions=[Greet])
    bob = Role(name="Bob", profile="Greeter", actions=[Greet])
    mine, theirs = alice.actions[0], bob.actions[0]
    assert mine is not theirs and mine is not Greet.shared()
    assert mine.owner is alice and theirs.owner is bob
    assert "named Alice" in mine.prefix and "named Bob" in theirs.prefix
    assert alice.actions[0] is mine  # kept: the same object every time
    mine.desc = "mine alone"
    assert theirs.desc == "" and Greet.shared().desc == ""


async def test_state_a_role_keeps_on_its_action_stays_its_own():
    alice = Role(name="Alice", actions=[Count])
    bob = Role(name="Bob", actions=[Count])
    assert raw_action(alice.actions, 0) is raw_action(bob.actions, 0)
    await alice.run("go")
    await alice.run("again")
    await bob.run("go")
    assert alice.actions[0].calls == 2 and bob.actions[0].calls == 1
    assert Count.shared().calls == 0  # the shared one was never changed
    assert [m.content for m in alice.get_memories() if m.sent_from == "Alice"] == [
        "Alice ran 1 time(s)", "Alice ran 2 time(s)"]


async def test_state_set_on_rc_todo_in_an_act_override_stays_the_roles_own():
    class Tagger(Role):
        async def _act(self) -> Message:
            self.rc.todo.desc = f"tagged by {self.name}"  # MetaGPT's Engineer sets its todo's context so
            return await super()._act()

    one, two = Tagger(name="One", actions=[Count]), Tagger(name="Two", actions=[Count])
    await one.run("go")
    assert one.actions[0].desc == "tagged by One" and two.actions[0].desc == ""
    assert Count.shared().desc == ""


async def test_an_action_class_with_a_mutable_default_gives_each_role_its_own():
    assert Notes.shared() is None
    alice, bob = Role(name="Alice", actions=[Notes]), Role(name="Bob", actions=[Notes])
    assert raw_action(alice.actions, 0) is not raw_action(bob.actions, 0)
    await alice.run("a1")
    await bob.run("b1")
    assert alice.actions[0].notes == ["a1"] and bob.actions[0].notes == ["b1"]


def test_an_instance_given_to_a_role_is_its_own_as_before():
    given = Greet(desc="given")
    role = Role(name="R", actions=[given])
    assert raw_action(role.actions, 0) is given and given.owner is role


def test_roles_of_a_class_share_their_watch_list_and_fields_set_until_one_changes_it():
    a, b = Role(name="A", actions=[Greet], watch=[Greet]), Role(name="B", actions=[Greet], watch=[Greet])
    assert a.rc.watched is b.rc.watched
    assert a.__pydantic_fields_set__ is b.__pydantic_fields_set__
    a.rc.watch.add("elsewhere.Shout")  # changed in place: A's alone
    assert "elsewhere.Shout" in a.rc.watch and "elsewhere.Shout" not in b.rc.watch
    a.goal = "win"
    assert "goal" in a.model_fields_set and "goal" not in b.model_fields_set
    assert a.model_dump(exclude_unset=True).get("goal") == "win" and "goal" not in b.model_dump(exclude_unset=True)
    a.note = "an extra attribute"  # (extra="allow"): A's own
    assert a.note == "an extra attribute" and not hasattr(b, "note")


def test_the_environment_wires_each_role_with_its_own_bound_method_not_a_closure_per_role():
    env = Environment()
    roles = [Role(name=f"r{i}", actions=[Greet]) for i in range(3)]
    env.add_roles(roles)
    listeners = {id(r.rc.msg_buffer._listener) for r in roles}
    assert len(listeners) == 1 and roles[0].rc.msg_buffer._owner is roles[0]
    env.publish_message(Message("hi", send_to={"r1"}))
    assert [r.name for r in env._take_ready()] == ["r1"]


def test_a_simulation_agent_costs_little_to_build():
    """Loose bound (tracemalloc, 2,000 agents): 6.2 KB an agent before issue 38, about 2.5 KB after."""
    per_agent = built_bytes_per_agent()
    assert per_agent < 4000, f"{per_agent:.0f} bytes an agent"


def test_a_pickled_role_keeps_its_shared_action_and_leaves_the_environment_behind():
    import pickle

    env = Environment()
    role = Role(name="Alice", profile="Greeter", actions=[Greet])
    env.add_role(role)
    role.rc.env = None  # (as the Ray runtime ships a role: without its environment)
    role.set_context(None)
    copy = pickle.loads(pickle.dumps(role))
    assert raw_action(copy.actions, 0).is_shared and copy.rc._listener is None
    assert copy.actions[0].owner is copy and "named Alice" in copy.actions[0].prefix
    assert copy.rc.watched == role.rc.watched


def test_a_dump_of_a_role_records_its_action_as_it_runs_it_and_leaves_it_shared():
    role = Role(name="Alice", profile="Greeter", actions=[Greet])
    dumped = role.model_dump()
    assert [a["name"] for a in dumped["actions"]] == ["Greet"] and "named Alice" in dumped["actions"][0]["prefix"]
    assert raw_action(role.actions, 0) is Greet.shared()
    restored = Role.model_validate(dumped)
    assert restored.actions[0].name == "Greet" and restored.actions[0].owner is restored


def test_an_extra_attribute_set_on_one_action_or_role_is_never_seen_on_another():
    """pydantic adds an extra attribute's name to the model's fields-set, which models share: a name set on
    one action (``self.calls = ...`` in an action without the field) once showed up in every other action's
    ``model_fields_set``, and copying such an action failed reading an attribute it never had."""

    class Plain(Action):
        name: str = "Plain"

    first, second = Plain(), Greet()
    first.calls = [1]
    assert "calls" in first.model_fields_set and "calls" not in second.model_fields_set
    copy = type(second)(**{k: getattr(second, k) for k in second.model_fields_set})
    assert copy.name == "Greet"
    alice, bob = Role(name="Alice"), Role(name="Bob")
    alice.mood = "tired"
    assert "mood" in alice.model_fields_set and "mood" not in bob.model_fields_set
