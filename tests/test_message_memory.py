"""Message normalisation and serialisation; Memory's index, dedup and lookups."""

from __future__ import annotations

import pytest
from pydantic import BaseModel, ValidationError

from actions import Action, UserRequirement
from memory import MESSAGE_ROUTE_TO_ALL, Memory, Message, any_to_str


class WriteCode(Action):
    pass


class Review(BaseModel):
    score: int
    notes: list[str]


def test_cause_by_accepts_class_instance_or_string_and_stores_a_stable_string():
    by_class = Message("x", cause_by=WriteCode)
    by_instance = Message("x", cause_by=WriteCode())
    by_string = Message("x", cause_by=any_to_str(WriteCode))
    assert by_class.cause_by == by_instance.cause_by == by_string.cause_by == f"{__name__}.WriteCode"


def test_cause_by_assignment_is_normalised_too():
    m = Message("x")
    m.cause_by = UserRequirement
    assert m.cause_by == "actions.action.UserRequirement"


def test_send_to_defaults_to_everyone_and_accepts_one_or_many_names():
    assert Message("x").send_to == {MESSAGE_ROUTE_TO_ALL}
    assert Message("x", send_to="Bob").send_to == {"Bob"}
    assert Message("x", send_to=["Bob", "Alice"]).send_to == {"Bob", "Alice"}
    assert Message("x", send_to="").send_to == {MESSAGE_ROUTE_TO_ALL}


def test_message_round_trips_through_json_with_instruct_content():
    original = Message(
        "review done",
        instruct_content=Review(score=4, notes=["ok"]),
        role="Reviewer",
        cause_by=WriteCode,
        sent_from="Carol",
        send_to={"Alice", "Bob"},
        metadata={"round": 2},
    )
    restored = Message.from_json(original.to_json())
    assert restored == original
    assert restored.content == "review done"
    assert isinstance(restored.instruct_content, Review)
    assert restored.instruct_content.notes == ["ok"]
    assert restored.send_to == {"Alice", "Bob"}
    assert restored.metadata == {"round": 2}
    assert restored.cause_by == original.cause_by


def test_instruct_content_of_an_unimportable_class_still_loads_its_values():
    data = Message("x", instruct_content=Review(score=1, notes=[])).model_dump(mode="json")
    data["instruct_content"]["class"] = "nowhere.Gone"
    restored = Message.model_validate(data)
    assert restored.instruct_content is not None
    assert restored.instruct_content.model_dump() == {"score": 1, "notes": []}


def test_memory_never_stores_the_same_message_twice():
    mem = Memory()
    m = Message("hello", cause_by=WriteCode)
    mem.add(m)
    mem.add(m)
    mem.add_batch([m, Message.from_json(m.to_json())])
    assert mem.count() == 1
    assert mem.get_by_action(WriteCode) == [m]


def test_memory_get_returns_the_last_k_oldest_first():
    mem = Memory()
    msgs = [Message(str(i)) for i in range(5)]
    mem.add_batch(msgs)
    assert mem.get() == msgs
    assert mem.get(k=2) == msgs[-2:]
    assert mem.get(k=0) == msgs


def test_memory_lookups_by_action_role_and_content():
    mem = Memory()
    a = Message("def add(a, b): return a + b", role="Coder", cause_by=WriteCode)
    b = Message("please add", role="user", cause_by=UserRequirement)
    c = Message("def sub(a, b): return a - b", role="Coder", cause_by=WriteCode)
    mem.add_batch([a, b, c])
    assert mem.get_by_action(WriteCode) == [a, c]
    assert mem.get_by_action(WriteCode()) == [a, c]
    assert mem.get_by_actions([WriteCode, UserRequirement]) == [a, b, c]
    assert mem.get_by_role("Coder") == [a, c]
    assert mem.get_by_content("sub") == [c]


def test_memory_delete_and_delete_newest_keep_the_index_right():
    mem = Memory()
    a, b, c = (Message(x, cause_by=WriteCode) for x in "abc")
    mem.add_batch([a, b, c])
    mem.delete(b)
    assert mem.get() == [a, c]
    assert mem.get_by_action(WriteCode) == [a, c]
    assert mem.delete_newest() == c
    assert mem.get_by_action(WriteCode) == [a]
    mem.add(b)  # a deleted message may come back
    assert mem.count() == 2
    mem.clear()
    assert mem.count() == 0 and mem.get_by_action(WriteCode) == []
    assert mem.delete_newest() is None


def test_find_news_compares_with_the_last_k_messages():
    mem = Memory()
    old = [Message(str(i)) for i in range(3)]
    mem.add_batch(old)
    fresh = Message("new")
    assert mem.find_news([old[0], fresh]) == [fresh]
    # only the last message counts as already seen with k=1
    assert mem.find_news([old[0], old[2], fresh], k=1) == [old[0], fresh]


def test_memory_serialises_and_rebuilds_its_index():
    mem = Memory()
    mem.add_batch([Message("a", cause_by=WriteCode), Message("b")])
    restored = Memory.from_json(mem.to_json())
    assert restored.count() == 2
    assert [m.content for m in restored.get_by_action(WriteCode)] == ["a"]


def test_memory_is_a_pydantic_field_that_round_trips_in_a_role_context():
    from roles import RoleContext

    rc = RoleContext()
    rc.memory.add(Message("a", cause_by=WriteCode))
    restored = RoleContext.model_validate_json(rc.model_dump_json())
    assert isinstance(restored.memory, Memory)
    assert [m.content for m in restored.memory.get_by_action(WriteCode)] == ["a"]


def test_an_action_result_becomes_the_same_message_as_one_made_by_hand():
    """A step's message is built without the validators; it is the validated message all the same."""
    import uuid

    from actions.perform import to_message
    from roles import Role

    class Named(Action):  # an action with a profile sends as its name (the validator's rule)
        profile: str = "p"

    role = Role(name="Alice", profile="Coder")
    for action in (WriteCode(), Named(name="Nm")):
        made = to_message("some text", action, role)
        by_hand = Message(content="some text", role="Coder", cause_by=action, sent_from="Alice")
        assert made.model_dump(exclude={"id"}) == by_hand.model_dump(exclude={"id"})
        assert made.model_fields_set == by_hand.model_fields_set
        assert made.model_dump_json(exclude={"id"}) == by_hand.model_dump_json(exclude={"id"})
        assert Message.model_validate(made.model_dump()) == made
        assert uuid.UUID(made.id).version == 4 and uuid.UUID(made.id).hex == made.id
        made.cause_by = UserRequirement  # still validated on assignment
        assert made.cause_by == "actions.action.UserRequirement"
    assert to_message(None, WriteCode(), role).content == ""
    role.profile = 7  # type: ignore[assignment]  # set past validation: the message is validated, as before
    with pytest.raises(ValidationError):
        to_message("x", WriteCode(), role)
    assert len({Message("x").id for _ in range(1000)}) == 1000


def test_readdressing_a_message_normalises_send_to_without_growing_the_message():
    import gc
    import sys
    import tracemalloc

    m = Message("post", cause_by=WriteCode)
    m.send_to = ["Bob", "Alice"]
    assert m.send_to == {"Bob", "Alice"} and "send_to" in m.model_fields_set
    m.send_to = None
    assert m.send_to == {MESSAGE_ROUTE_TO_ALL}
    m.send_to = Review  # a class names itself by its path, as at creation
    assert m.send_to == {any_to_str(Review)}
    assert Message.model_validate_json(m.model_dump_json()).send_to == m.send_to
    # what a readdressed message grows by is its new set of names, not a re-validated copy of its
    # fields (480 bytes a message before, of which 216 the set)
    posts = [Message("post") for _ in range(2000)]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for post in posts:
            post.send_to = ["Bob", "Al"]
        gc.collect()
        grown = (tracemalloc.get_traced_memory()[0] - before) / len(posts)
    finally:
        tracemalloc.stop()
    assert grown <= sys.getsizeof({"Bob", "Al"}) + 48, grown


def test_a_memory_window_keeps_the_newest_messages_and_its_index_right():
    mem = Memory(window=3)
    messages = [Message(str(i), cause_by=WriteCode if i % 2 else UserRequirement) for i in range(7)]
    mem.add_batch(messages)
    assert [m.content for m in mem.get()] == ["4", "5", "6"]
    assert [m.content for m in mem.get_by_action(WriteCode)] == ["5"]
    assert [m.content for m in mem.get_by_action(UserRequirement)] == ["4", "6"]
    assert mem.forgotten == 4 and messages[0] not in mem and messages[6] in mem
    with pytest.raises(Exception, match="whole number"):
        Memory(window=0)


def test_a_role_keeps_its_memory_window_through_a_save():
    from roles import RoleContext

    rc = RoleContext()
    rc.memory = Memory(window=2)
    rc.memory.add_batch([Message("a"), Message("b"), Message("c")])
    restored = RoleContext.model_validate_json(rc.model_dump_json())
    assert restored.memory.window == 2 and [m.content for m in restored.memory.get()] == ["b", "c"]
    restored.memory.add(Message("d"))
    assert [m.content for m in restored.memory.get()] == ["c", "d"]


def test_add_batch_keeps_each_message_once_across_the_compact_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch path (every delivery) skips held ids, indexes causes, and hands over to the compact
    index when the id set fills up mid-batch, with the rest of the batch (a list or a generator)."""
    import memory.memory as memory_module

    monkeypatch.setattr(memory_module, "COMPACT_IDS", 8)
    for as_generator in (False, True):
        memory = Memory()
        first = [Message(content=f"m{i}", cause_by=UserRequirement) for i in range(5)]
        memory.add_batch(first)
        assert memory.get_by_action(UserRequirement) == first  # the index made now follows the batches
        batch = [*first[:2], *(Message(content=f"n{i}") for i in range(10)), first[3]]
        memory.add_batch(m for m in batch) if as_generator else memory.add_batch(batch)
        assert [m.content for m in memory.get()] == [*(f"m{i}" for i in range(5)), *(f"n{i}" for i in range(10))]
        assert all(m in memory for m in batch)
        memory.add_batch([first[4], Message(content="last", cause_by=UserRequirement)])
        assert memory.count() == 16 and [m.content for m in memory.get_by_action(UserRequirement)][-1] == "last"


def test_setting_sender_and_cause_normalises_and_marks_them_set() -> None:
    """Set without re-validating the message (every published Message gets both), as validation would."""
    from memory.message import USER_REQUIREMENT

    message = Message(content="x")
    assert "sent_from" not in message.model_fields_set and "cause_by" not in message.model_fields_set
    message.sent_from = "Alice"
    message.cause_by = ""
    assert message.sent_from == "Alice" and message.cause_by == USER_REQUIREMENT
    assert {"sent_from", "cause_by"} <= message.model_fields_set
    other = Message(content="y")
    assert "sent_from" not in other.model_fields_set  # the shared fields-set of the first was not changed
    message.cause_by = UserRequirement  # a class still goes through validation: its path
    assert message.cause_by == USER_REQUIREMENT
    message.sent_from = ""
    assert message.sent_from == ""
    assert Message.model_validate_json(message.model_dump_json()) == message
