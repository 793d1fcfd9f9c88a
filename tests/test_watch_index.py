"""The bus hands a broadcast only to the roles that watch its cause (a watcher index); every other
role counts it as ignored, as if it had received and dropped it. What a user observes is the same
as when every role is handed every broadcast: these tests compare with such a bus."""

from __future__ import annotations

import pickle
import random

from actions import Action, UserRequirement
from environment import Environment
from memory import MESSAGE_ROUTE_TO_ALL, Message
from rolecast.testing import ScriptedLLM
from roles import Role
from roles.role_context import RoleContext


class Listen(Action):
    async def run(self, history):
        return f"heard {history[-1].content}"


class Shout(Action):
    async def run(self, history):
        return "shout"


class Whisper(Action):
    async def run(self, history):
        return "whisper"


class EveryRoleChecks(Environment):
    """The bus before the index: every broadcast goes through every role's ``put_message``."""

    def _deliver(self, message: Message) -> None:
        self.history.add(message)
        for role in self.roles.values():
            if role.name != message.sent_from and (
                MESSAGE_ROUTE_TO_ALL in message.send_to or not role.addresses.isdisjoint(message.send_to)
            ):
                role.put_message(message)


def listener(name: str, watch, **kw) -> Role:
    return Role(name=name, actions=[Listen()], watch=watch, llm=ScriptedLLM([]), **kw)


async def test_a_broadcast_is_handed_only_to_its_watchers_and_the_others_are_busy_until_the_next_round():
    env = Environment()
    watcher, other = listener("W", [Shout]), listener("O", [Whisper])
    env.add_roles([watcher, other])
    env.publish_message(Message("hey", cause_by=Shout))
    assert len(watcher.rc.msg_buffer) == 1 and len(other.rc.msg_buffer) == 0
    assert not other.is_idle and not other.rc.msg_buffer.empty()  # it "received" the broadcast, as in MetaGPT
    assert not env.is_idle
    await env.run()
    assert [m.content for m in watcher.get_memories()] == ["hey", "heard hey"]
    assert not other.is_idle  # W's answer (a Listen broadcast): nobody watches it
    assert other.get_memories() == [] and len(other.rc.msg_buffer) == 0
    await env.run()  # the next round drops it
    assert env.is_idle and other.is_idle and watcher.is_idle


async def test_a_role_is_busy_until_it_reads_even_outside_the_scheduler():
    env = Environment()
    other = listener("O", [Whisper])
    env.add_role(other)
    env.publish_message(Message("not for O", cause_by=Shout))
    assert not other.is_idle
    assert await other.run() is None  # it reads and drops the broadcast
    assert other.is_idle and other.get_memories() == []


async def test_a_watch_list_changed_at_run_time_is_honoured():
    env = Environment()
    role = listener("R", [Whisper])
    env.add_role(role)
    role._watch([Shout])  # MetaGPT's way
    env.publish_message(Message("1", cause_by=Shout))
    env.publish_message(Message("2", cause_by=Whisper))
    assert [m.content for m in role.rc.msg_buffer._queue] == ["1"]
    role.rc.watch = {"actions.action.UserRequirement"}  # assigned
    role.rc.watch.add(Whisper.__module__ + ".Whisper")  # changed in place
    env.publish_message(Message("3", cause_by=Whisper))
    env.publish_message(Message("4", cause_by=UserRequirement))
    env.publish_message(Message("5", cause_by=Shout))
    role.rc.watch.clear()
    env.publish_message(Message("6", cause_by=Whisper))
    role.rc.watch |= {Shout.__module__ + ".Shout"}
    env.publish_message(Message("7", cause_by=Shout))
    assert [m.content for m in role.rc.msg_buffer._queue] == ["1", "3", "4", "7"]


async def test_a_role_that_watches_nothing_still_receives_what_is_addressed_to_it():
    env = Environment()
    deaf = listener("Deaf", [])
    env.add_role(deaf)
    env.publish_message(Message("by name", cause_by=Shout, send_to="Deaf"))
    env.publish_message(Message("to all and by name", cause_by=Shout, send_to=[MESSAGE_ROUTE_TO_ALL, "Deaf"]))
    env.publish_message(Message("to all", cause_by=Shout))
    assert [m.content for m in deaf.rc.msg_buffer._queue] == ["by name", "to all and by name"]
    await env.run()
    assert [m.content for m in deaf.get_memories()][:2] == ["by name", "to all and by name"]


async def test_observe_all_set_at_run_time_remembers_every_broadcast():
    env = Environment()
    archivist = listener("Ar", [Shout])
    env.add_role(archivist)
    archivist.observe_all_msg_from_buffer = True
    env.publish_message(Message("not watched", cause_by=Whisper))
    await env.run()
    assert [m.content for m in archivist.get_memories()] == ["not watched"]
    archivist.observe_all_msg_from_buffer = False
    env.publish_message(Message("not watched either", cause_by=Whisper))
    assert len(archivist.rc.msg_buffer) == 0 and not archivist.is_idle


async def test_a_new_context_keeps_the_role_wired_to_its_environment():
    env = Environment()
    role = listener("R", [Shout])
    env.add_role(role)
    role.rc = RoleContext(watch={Whisper.__module__ + ".Whisper"})
    assert role.rc.env is env
    env.publish_message(Message("shout", cause_by=Shout))
    env.publish_message(Message("whisper", cause_by=Whisper))
    assert [m.content for m in role.rc.msg_buffer._queue] == ["whisper"]
    await env.run()
    assert [m.content for m in role.get_memories()] == ["whisper", "heard whisper"]


async def test_a_role_with_its_own_put_message_is_handed_every_broadcast():
    class Tally(Role):
        seen: list[str] = []

        def put_message(self, message):
            self.seen.append(message.content)
            super().put_message(message)

    env = Environment()
    tally = Tally(name="T", actions=[Listen()], watch=[Shout], llm=ScriptedLLM([]))
    env.add_role(tally)
    env.publish_message(Message("not watched", cause_by=Whisper))
    env.publish_message(Message("watched", cause_by=Shout))
    assert tally.seen == ["not watched", "watched"] and len(tally.rc.msg_buffer) == 1


def test_a_copy_of_the_watch_list_leaves_the_environment_behind():
    env = Environment()
    role = listener("R", [Shout])
    env.add_role(role)
    copy = pickle.loads(pickle.dumps(role.rc.watch))
    assert copy == role.rc.watch and copy._on_change is None
    assert role.rc.model_dump(mode="json")["watch"] == [Shout.__module__ + ".Shout"]
    env.publish_message(Message("x", cause_by=Whisper))
    inbox = pickle.loads(pickle.dumps(role.rc.msg_buffer))
    assert not inbox.empty() and inbox._ledger is None  # the shipped inbox keeps the count of what it ignored


def _observed(env: Environment) -> list:
    return [
        (r.name, r.is_idle, r.rc.msg_buffer.empty(), len(r.rc.msg_buffer), [m.content for m in r.get_memories()])
        for r in env.roles.values()
    ] + [env.is_idle, [m.content for m in env.history.get()]]


async def test_what_a_user_observes_is_the_same_as_when_every_role_checks_every_broadcast():
    causes = [UserRequirement, Shout, Whisper, Listen]
    for seed in range(12):
        rng = random.Random(seed)
        envs = []
        for cls in (Environment, EveryRoleChecks):
            rng_roles = random.Random(seed)
            env = cls()
            for i in range(6):
                watch = rng_roles.sample(causes, rng_roles.randint(0, 2))
                env.add_role(listener(f"R{i}", watch, observe_all_msg_from_buffer=rng_roles.random() < 0.15))
            envs.append(env)
        for step in range(25):
            op = rng.random()
            cause = rng.choice(causes)
            sender = rng.choice(["", "R0", "R3", "R5"])
            target = rng.choice([None, None, None, "R1", "R4"])
            name = f"R{rng.randrange(6)}"
            new_watch = rng.sample(causes, rng.randint(0, 2))
            for env in envs:
                if op < 0.5:
                    env.publish_message(Message(f"m{step}", cause_by=cause, sent_from=sender,
                                                send_to=target or MESSAGE_ROUTE_TO_ALL))
                elif op < 0.6:
                    env.roles[name]._watch(new_watch)
                elif op < 0.65:
                    env.roles[name].rc.watch.add(cause.__module__ + "." + cause.__qualname__)
                elif op < 0.7:
                    await env.roles[name].run()
                else:
                    await env.run()
            assert _observed(envs[0]) == _observed(envs[1]), (seed, step)
