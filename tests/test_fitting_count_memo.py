"""Window fitting is cheap per call (issue 48): each text's tokens are counted once per model, so a long
run's turn counts only the messages new since the last fit."""

from __future__ import annotations

from rolecast.llm.window import fit_to_window
from rolecast.testing import FunctionLLM


async def test_fitting_the_same_history_each_turn_counts_only_the_new_messages():
    counted: list[str] = []

    class CountingLLM(FunctionLLM):
        async def count_texts(self, texts):
            counted.extend(texts)
            return await super().count_texts(texts)

    llm = CountingLLM(lambda messages: "ok", context_window=1024)
    history = [f"message {i}: " + "the centre should be free of cars. " * 6 for i in range(40)]
    fixed = [{"role": "user", "content": "Continue the debate."}]
    first = await fit_to_window(llm, history, fixed, 256, purpose="test")
    assert first > 0 and len(counted) == 41  # too long for the window: counted once (and the note)
    counted.clear()
    history.append("message 40: and the buses run on time")
    assert await fit_to_window(llm, history, fixed, 256, purpose="test") == first + 1  # the same fit, one newer
    # only the new message was counted (and the note, which now says 41)
    assert sorted(counted) == ["[41 earlier messages left out to fit the context window]",
                               "message 40: and the buses run on time"]


async def test_the_memo_never_shadows_a_providers_own_attributes():
    # the embedded model's provider has a method named _counted: a memo stored under that name made every
    # later count a "'tuple' object is not callable" (the long-run integration test caught it)
    from rolecast.llm.window import counted_texts
    from rolecast.testing import FunctionLLM

    class Counting(FunctionLLM):
        async def _counted(self, work):
            return work

    llm = Counting(lambda messages: "ok", context_window=512)
    assert len(await counted_texts(llm, ["a b c", "d"])) == 2
    assert callable(llm._counted) and (await llm._counted(7)) == 7
