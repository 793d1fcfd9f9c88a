"""Long runs for MetaGPT-style code (issue 44): actions that build their prompts from the role's memory
(``get_memories(k)``, ``rc.memory.get()``, ``rc.history``) fit the window, compaction keeps them going,
and an overflow tightens the fit once instead of ending the run. Scripted doubles with small windows."""

from __future__ import annotations

from typing import Any

import pytest

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.errors import ConfigError, ContextOverflow
from rolecast.llm.base import messages_text
from rolecast.llm.window import estimate_prompt_tokens
from rolecast.runs import open_store
from rolecast.runs.events import HISTORY_FITTED
from rolecast.testing import FunctionLLM
from roles import Role
from roles.fitting import COMPACTED, Compaction, compact

WINDOW = 900
POINT = "cars crowd the streets and the air, so the centre should be free of them for good. " * 2


class Speak(Action):
    name: str = "Speak"

    async def run(self, context: str, name: str) -> str:  # type: ignore[override]
        return await self._aask(f"## DEBATE HISTORY\n{context}\n## YOUR TURN\n{name}, argue in 80 words:")


def reader(accessor: str):
    """A MetaGPT-style debater whose ``_act`` reads its memory through ``accessor``."""

    class Debater(Role):
        opponent: str = ""

        def __init__(self, **data: Any):
            super().__init__(**data)
            self.set_actions([Speak])
            self._watch([UserRequirement, Speak])

        async def _observe(self) -> int:
            await super()._observe()
            self.rc.news = [m for m in self.rc.news if m.send_to == {self.name}]
            return len(self.rc.news)

        async def _act(self) -> Message:
            memories = {
                "get_memories": lambda: self.get_memories(),
                "get_memories_k": lambda: self.get_memories(k=50),
                "memory.get": lambda: self.rc.memory.get(),
                "history": lambda: self.rc.history,
            }[accessor]()
            context = "\n".join(f"{m.sent_from}: {m.content}" for m in memories)
            rsp = await self.rc.todo.run(context=context, name=self.name)
            msg = Message(content=rsp, role=self.profile, sent_from=self.name, cause_by=Speak, send_to=self.opponent)
            self.rc.memory.add(msg)
            return msg

    return Debater


def model(seen: list, window: int = WINDOW) -> FunctionLLM:
    def answer(messages, call):
        seen.append(messages)
        if "Summarise the conversation" in messages[-1]["content"]:
            return "Ada wants cars out of the centre; Ben says shops need them. Facts: 42 shops, 3 buses."
        return f"Point {len(seen)}: {POINT}"

    return FunctionLLM(answer, context_window=window)


def debate(accessor: str, llm: FunctionLLM, **team: Any) -> Team:
    cls = reader(accessor)
    return Team(llm=llm, roles=[cls(name="Ada", profile="Pro", opponent="Ben"),
                                cls(name="Ben", profile="Con", opponent="Ada")], **team)


@pytest.mark.parametrize("accessor", ["get_memories", "get_memories_k", "memory.get", "history"])
async def test_a_metagpt_style_debate_reading_memory_runs_every_round_within_the_window(accessor, tmp_path):
    seen: list = []
    team = debate(accessor, model(seen), store=open_store(tmp_path / "runs.db"))
    history = await team.run(n_round=24, idea="Ban cars from city centres?", send_to="Ada")
    spoke = [m for m in history if m.cause_by.endswith("Speak")]
    assert len(spoke) >= 22  # ContextOverflow in round 2 or so before
    assert max(estimate_prompt_tokens(messages_text(m), len(m)) for m in seen) <= WINDOW
    assert "earlier messages left out to fit the context window" in seen[-1][-1]["content"]
    fitted = list(team.env.context.run_log.store.events(team.run_id, [HISTORY_FITTED]))
    assert any(e.data["purpose"] == "memory of action Speak" for e in fitted)


async def test_with_compaction_the_summary_stands_in_for_what_it_replaced(tmp_path):
    seen: list = []
    team = debate("get_memories", model(seen), compaction=Compaction(keep=4), store=open_store(tmp_path / "r.db"))
    history = await team.run(n_round=30, idea="Ban cars from city centres?", send_to="Ada")
    assert len([m for m in history if m.cause_by.endswith("Speak")]) >= 28
    debates = [m[-1]["content"] for m in seen if "DEBATE HISTORY" in m[-1]["content"]]
    assert any("[summary of" in p and "42 shops" in p for p in debates[-5:])  # the summary reached the prompt
    assert max(estimate_prompt_tokens(messages_text(m), len(m)) for m in seen) <= WINDOW


async def test_an_action_whose_prompt_still_overflows_runs_again_with_a_tighter_fit():
    class Wordy(Action):
        name: str = "Wordy"

        async def run(self, context: str) -> str:  # type: ignore[override]
            # its own words take far more than the eighth of the window the fit leaves them, and leave less
            # than MIN_ANSWER_ROOM of it for the answer
            return await self._aask("Rules: be brief. " * 150 + f"\n{context}\nAnswer:")

    runs: list[int] = []

    class Talker(Role):
        def __init__(self, **data: Any):
            super().__init__(**data)
            self.set_actions([Wordy])

        async def _act(self) -> Message:
            memories = self.get_memories()
            runs.append(len(memories))
            return await self.rc.todo.run(context="\n".join(m.content for m in memories))

    llm = FunctionLLM(lambda messages: POINT, context_window=1400)
    role = Talker(name="T")
    role.llm = llm
    for i in range(12):
        role.rc.memory.add(Message(content=f"note {i}: {POINT}", sent_from="user"))
    role.rc.news = [role.rc.memory.get()[-1]]
    await role.react()  # a ContextOverflow before
    assert len(runs) == 2 and runs[1] < runs[0]


async def test_an_overflow_the_tighter_fit_cannot_cure_is_still_a_context_overflow():
    class Huge(Action):
        name: str = "Huge"

        async def run(self, context: str) -> str:  # type: ignore[override]
            return await self._aask("x" * 20_000 + context)

    class Talker(Role):
        def __init__(self, **data: Any):
            super().__init__(**data)
            self.set_actions([Huge])

        async def _act(self) -> Message:
            return await self.rc.todo.run(context=str(self.get_memories()))

    role = Talker(name="T")
    role.llm = FunctionLLM(lambda messages: "ok", context_window=1000)
    role.rc.memory.add(Message(content="hello", sent_from="user"))
    role.rc.news = role.rc.memory.get()
    with pytest.raises(ContextOverflow) as raised:
        await role.react()
    # compaction would not help: the advice says the memory was fitted and names the action's own text
    said = str(raised.value)
    assert raised.value.fitted and "Huge" in said and "the action's own text" in said
    assert "turn on compaction" not in said


def test_outside_an_action_memory_reads_are_as_stored():
    role = reader("get_memories")(name="Ada")
    role.llm = FunctionLLM(lambda messages: "ok", context_window=300)
    for i in range(40):
        role.rc.memory.add(Message(content=f"{i}: {POINT}", sent_from="Ben"))
    assert len(role.get_memories()) == 40 and len(role.rc.history) == 40


async def test_a_compaction_never_drops_the_previous_summary_for_an_oversized_message():
    # issue 43 item 16: an oversized message cut the previous summary out of the next summary's prompt
    seen: list = []
    llm = FunctionLLM(lambda messages: seen.append(messages[-1]["content"]) or "New summary.", context_window=2000)
    role = Role(name="Ada")
    role.llm = llm
    first = Message(content="[summary of 10 earlier messages]\nThe secret code is 7412.", role="system",
                    sent_from="Ada", cause_by=COMPACTED, id="summary-1", metadata={"compacted": 10, "kept_from": "m0"})
    role.rc.memory.add(first)
    role.rc.memory.add(Message(content="x " * 3000, sent_from="Ben", id="m0"))  # far larger than the window
    for i in range(1, 9):
        role.rc.memory.add(Message(content=f"turn {i}", sent_from="Ben", id=f"m{i}"))
    made = await compact(role, Compaction(keep=2, share=0.1))
    assert made is not None
    assert "The secret code is 7412." in seen[-1]  # dropped by fitting before


async def test_answers_as_long_as_half_the_window_are_cut_in_the_view_and_the_debate_goes_on(tmp_path):
    """A 135M model's answers run to its 512-token default in a 1,024-token window: the newest message
    (always shown) and the summary alone passed the budget, and the debate died in round 25 with a
    934-token prompt. The view cuts the longest of them, with a note; the stored messages stay whole."""
    seen: list = []
    long_point = "the centre belongs to people on foot and on bikes, not to parked cars. " * 30  # ~700 tokens

    def answer(messages, call):
        seen.append(messages)
        if "Summarise the conversation" in messages[-1]["content"]:
            return "Ada wants cars out of the centre; Ben says shops need them. " * 8
        return f"Point {len(seen)}: {long_point}"

    llm = FunctionLLM(answer, context_window=1024)
    team = debate("get_memories", llm, compaction=True, store=open_store(tmp_path / "r.db"))
    history = await team.run(n_round=12, idea="Ban cars from city centres?", send_to="Ada")
    spoke = [m for m in history if m.cause_by.endswith("Speak")]
    assert len(spoke) >= 10 and not any("cut to fit" in m.content for m in spoke)  # stored as answered
    assert any("characters cut to fit the window" in m[-1]["content"] for m in seen)


def test_rolecast_compaction_turns_compaction_on_for_a_script_that_does_not(monkeypatch):
    """MetaGPT's debate, run as it is, builds ``Team()`` with no compaction: the environment turns it on."""
    monkeypatch.setenv("ROLECAST_COMPACTION", "1")
    assert isinstance(Team().env.context.kwargs.get("compaction"), Compaction)
    monkeypatch.setenv("ROLECAST_COMPACTION", "0.4")
    assert Team().env.context.kwargs.get("compaction").share == 0.4
    monkeypatch.setenv("ROLECAST_COMPACTION", "off")
    assert Team().env.context.kwargs.get("compaction") is None
    monkeypatch.setenv("ROLECAST_COMPACTION", "sometimes")
    with pytest.raises(ConfigError, match="ROLECAST_COMPACTION='sometimes'"):
        Team()


async def test_rc_news_read_by_an_act_of_its_own_is_fitted_and_restored_after():
    """MetaGPT's ``self.rc.news[-1].content`` in an ``_act``: a news message longer than the window is
    shown cut to fit while the action runs, and rc.news holds the message as it came afterwards."""
    seen: list = []

    class Answerer(Role):
        def __init__(self, **data: Any):
            super().__init__(**data)
            self.set_actions([Speak])

        async def _act(self) -> Message:
            said = await self.rc.todo.run(context=self.rc.news[-1].content, name=self.name)
            return Message(content=said, role=self.profile, sent_from=self.name, cause_by=Speak)

    role = Answerer(name="Ada")
    role.llm = FunctionLLM(lambda messages: seen.append(messages) or "fine", context_window=WINDOW)
    huge = Message(content=POINT * 40, sent_from="user")  # about 2,800 tokens: past the window alone
    role.rc.memory.add(huge)
    role.rc.news = [huge]
    await role.react()  # a ContextOverflow before
    assert "characters cut to fit the window" in seen[-1][-1]["content"]
    assert role.rc.news == [huge] and role.rc.news[0].content == POINT * 40
