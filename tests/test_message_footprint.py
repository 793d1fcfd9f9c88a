"""Messages kept once (issue 38): what a message and a bounded memory cost, and what they still do."""

from __future__ import annotations

import copy
import gc
import pickle
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from actions import Action, UserRequirement
from environment import Team
from memory import MESSAGE_ROUTE_TO_ALL, Memory, Message
from memory.message import plain_message
from rolecast.testing import FunctionLLM
from roles import Role


class Post(Action):
    name: str = "Post"

    async def run(self, history: list[Message]) -> str:
        return await self._aask("post about " + (history[-1].content if history else ""))


def _bytes_each(make: Callable[[int], Any], n: int = 3000) -> float:
    gc.collect()
    kept: list[Any] = [None] * n
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for i in range(n):
            kept[i] = make(i)
        return (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()


def test_a_posted_and_readdressed_message_costs_a_few_hundred_bytes():
    action = Post()
    followers = [f"agent{i}" for i in range(4)]
    content = "I lean towards the park (00c0ffee)."  # the same text: the message's own cost is measured

    def post(i: int) -> Message:
        message = plain_message(content, "Agent", action, "agent9")
        message.send_to = followers  # every post readdressed, as the simulation's agents do
        return message

    # the object, its field dict and its id: 1.6 KB a message before (a fields-set of its own that grew
    # to 728 bytes when readdressed, a send_to set and a cause string each), then ~505 (a field dict of
    # its own, 280 bytes, and an empty metadata dict, 64), now ~320 (the dict shares its key table)
    assert _bytes_each(post) < 400
    validated = _bytes_each(lambda i: Message(content=content, cause_by=action, sent_from="agent9", send_to=followers))
    assert validated < 400


def test_messages_share_what_is_the_same_and_stay_pydantic_messages():
    a = Message("a", cause_by=Post, send_to=["x", "y"])
    b = Message("b", cause_by=Post(), send_to={"y", "x"})
    assert a.send_to is b.send_to and a.send_to == {"x", "y"}
    assert a.cause_by is b.cause_by
    assert Message("c").send_to is Message("d").send_to == {MESSAGE_ROUTE_TO_ALL}
    assert a.model_fields_set is b.model_fields_set == {"content", "cause_by", "send_to"}
    with pytest.raises(TypeError, match="shared"):
        a.model_fields_set.add("role")
    # what pydantic does with the fields-set still works, message by message
    a.role = "assistant"
    assert "role" in a.model_fields_set and "role" not in b.model_fields_set
    assert a.model_dump(exclude_unset=True) == {"content": "a", "role": "assistant", "cause_by": b.cause_by,
                                                "send_to": ["x", "y"]}
    c = b.model_copy(update={"content": "c"})
    assert c.content == "c" and b.content == "b"
    saved = b.model_dump_json(exclude_unset=True)
    for other in (copy.deepcopy(b), pickle.loads(pickle.dumps(b)), Message.model_validate_json(saved)):
        assert other.model_dump(exclude={"id"}) == b.model_dump(exclude={"id"})
        assert other.send_to == b.send_to and other.model_fields_set == b.model_fields_set
        other.content = "changed"
        assert b.content == "b"


@pytest.mark.parametrize("make", [
    lambda: Message("hello"),
    lambda: plain_message("hello", "Agent", Post, "agent9"),
    lambda: Message.model_validate_json(Message("hello").model_dump_json()),
    lambda: pickle.loads(pickle.dumps(Message("hello"))),
    lambda: copy.deepcopy(plain_message("hello", "Agent", Post, "agent9")),
])
def test_metadata_written_after_creation_belongs_to_that_message(make: Callable[[], Message]):
    # every message starts with one shared empty metadata; writing through message.metadata gives
    # the message a dict of its own first
    a, b = make(), make()
    a.metadata["k"] = "v"
    a.metadata.setdefault("n", 1)
    assert a.metadata == {"k": "v", "n": 1} and b.metadata == {} and make().metadata == {}
    assert a.model_dump()["metadata"] == {"k": "v", "n": 1} and b.model_dump()["metadata"] == {}
    assert type(b.model_dump()["metadata"]) is dict and '"metadata":{}' in b.model_dump_json()
    assert Message.model_validate_json(a.model_dump_json()).metadata == {"k": "v", "n": 1}
    c = b.model_copy(deep=True)
    c.metadata["only"] = "c"
    assert b.metadata == {} and c.metadata == {"only": "c"}
    b.metadata = {"set": True}
    assert b.metadata == {"set": True} and b.model_dump()["metadata"] == {"set": True}
    held = make().metadata  # what a caller holds is the message's own dict
    held["later"] = 1
    assert held == {"later": 1}


def test_subclassed_messages_keep_their_metadata_field():
    from memory import UserMessage

    class Tagged(Message):
        metadata: dict[str, Any] = {"tag": "t"}

    u = UserMessage("u")
    u.metadata["k"] = 1
    assert u.metadata == {"k": 1} and UserMessage("v").metadata == {} and u.role == "user"
    tagged = Tagged("x")
    tagged.metadata["more"] = 2
    assert tagged.metadata == {"tag": "t", "more": 2} and Tagged("y").metadata == {"tag": "t"}


def test_a_large_memory_finds_its_messages_by_hash_in_few_bytes():
    n = 24_000  # past memory.memory.COMPACT_IDS
    messages = [plain_message(f"m{i}", "Agent", Post if i % 3 else UserRequirement, "a") for i in range(n)]

    def history(i: int) -> Memory:
        memory = Memory()
        memory.add_batch(messages)
        return memory

    # the ids were a set beside the list and a cause index (~45 bytes a message past a million; 28
    # here): now ~17 bytes a message beside the list, the cause index made only when asked
    assert _bytes_each(history, n=1) / n < 30
    memory = history(0)
    memory.add_batch(messages[::7])  # all held already: nothing changes
    assert len(memory) == n and memory.get(2) == messages[-2:]
    assert messages[0] in memory and messages[-1] in memory and Message("new") not in memory
    fresh = Message("fresh")
    assert memory.unseen([messages[5], fresh, messages[n - 1]]) == [fresh]
    assert memory.get_by_action(UserRequirement) == messages[::3]
    memory.add(fresh)
    memory.delete(messages[3])
    assert messages[3] not in memory and len(memory) == n
    assert memory.get_by_action(UserRequirement) == [messages[0], *messages[6::3], fresh]
    assert memory.delete_newest() is fresh and fresh not in memory
    assert memory.get_by_action(UserRequirement) == [messages[0], *messages[6::3]]
    memory.add(messages[3])  # forgotten, so new again
    assert memory.get(1) == messages[3:4] and len(memory) == n
    moved = pickle.loads(pickle.dumps(memory))  # its index is rebuilt there (hashes differ by process)
    assert moved.get() == memory.get() and messages[3] in moved and moved.unseen([fresh]) == [fresh]
    moved.add(messages[4])
    assert len(moved) == n


def test_messages_whose_keys_share_a_hash_are_told_apart():
    from memory.fingerprints import KeyIndex

    class SameHash(str):
        def __hash__(self) -> int:
            return 42

    index = KeyIndex(lambda m: SameHash(m.id))
    a, b, c = Message("a"), Message("b"), Message("c")
    index.add(SameHash(a.id), a)
    index.add(SameHash(b.id), b)
    assert SameHash(a.id) in index and SameHash(b.id) in index and SameHash(c.id) not in index
    index.discard(SameHash(c.id))
    index.discard(SameHash(a.id))
    assert SameHash(a.id) not in index and SameHash(b.id) in index and len(index) == 1


def test_a_small_memory_window_keeps_no_index_and_still_answers():
    messages = [Message(str(i), cause_by=Post if i % 2 else UserRequirement) for i in range(40)]

    def windowed(i: int) -> Memory:
        memory = Memory(window=3)
        memory.add_batch(messages[i % 30: i % 30 + 10])
        return memory

    # a list of three; before: an id set grown to 728 bytes and a cause index beside it (~1.3 KB)
    assert _bytes_each(windowed) < 400
    memory = windowed(0)
    assert [m.content for m in memory.get()] == ["7", "8", "9"]
    assert [m.content for m in memory.get_by_action(Post)] == ["7", "9"]
    assert memory.unseen(messages[6:11]) == messages[6:7] + messages[10:11]
    memory.add(messages[8])  # already held: nothing changes
    assert len(memory) == 3 and memory.forgotten == 7
    assert memory.find_news(messages[8:11], k=1) == messages[8:9] + messages[10:11]
    memory.delete(messages[8])
    assert memory.delete_newest() is messages[9] and memory.get() == messages[7:8] and messages[8] not in memory
    assert memory.index == {"test_message_footprint.Post": messages[7:8]}


def test_a_bounded_memory_finds_what_it_let_go_in_the_run_store(tmp_path: Path):
    class Poster(Role):
        def __init__(self, **kwargs: Any):
            super().__init__(**kwargs)
            self._watch([UserRequirement, Post])
            self.set_actions([Post])
            self.rc.memory = Memory(window=2)

    team = Team(llm=FunctionLLM(lambda messages: "a post"), store=str(tmp_path / "runs.db"))
    team.hire([Poster(name="Ann", profile="P"), Poster(name="Ben", profile="P")])
    history = team.run_sync(n_round=4, idea="begin")
    ann = team.env.roles["Ann"].rc.memory
    assert len(ann.get()) == 2 and ann.forgotten > 0
    everything = ann.get(archived=True)
    assert len(everything) == ann.forgotten + 2
    assert everything[-2:] == ann.get() and everything[0].content == "begin"
    assert {m.id for m in everything} <= {m.id for m in history}
    assert len(ann.get_by_action(Post, archived=True)) == len(everything) - 1
    topic = history[0]
    assert topic.content == "begin" and topic not in ann
    assert topic in ann.get_by_role(topic.role, archived=True) and topic not in ann.get_by_role(topic.role)
    assert ann.get(5, archived=True) == everything[-5:]
    # a copy taken elsewhere (a Ray worker) leaves this process's run log behind
    moved = pickle.loads(pickle.dumps(ann))
    assert moved.get() == ann.get() and moved.get(archived=True) == ann.get()
    team.close()


def test_what_a_window_let_go_costs_eight_bytes_a_message():
    messages = [Message(str(i)) for i in range(13)]

    class Archive:
        def messages(self) -> list[Message]:
            return messages

    archive = Archive()

    def bounded(i: int) -> Memory:
        memory = Memory(window=3)
        memory.archive = archive
        memory.add_batch(messages)
        return memory

    # ten fingerprints: an array of them was 80 bytes and a growing buffer (392 a memory in all),
    # now one bytes object (~297)
    assert _bytes_each(bounded) < 340
    memory = bounded(0)
    assert memory.forgotten == 10 and memory.archived() == messages[:10]
    assert memory.get(archived=True) == messages and memory.get_by_role("user", archived=True) == messages
    memory.clear()
    assert memory.archived() == [] and memory.get(archived=True) == []


def test_without_a_store_a_window_lets_go_for_good():
    team = Team(llm=FunctionLLM(lambda messages: "a post"), store=None)
    role = Role(name="Ann", profile="P", actions=[Post])
    role.rc.memory = Memory(window=1)
    team.hire([role])
    team.run_sync(n_round=2, idea="begin")
    memory = team.env.roles["Ann"].rc.memory
    assert memory.forgotten > 0 and memory.get(archived=True) == memory.get()
