"""The loop detector of free text on the embedded model, driven here without a model."""

from __future__ import annotations

import random

from rolecast.llm.repetition import RepetitionStop, trim_repetition


def piece(t: int) -> str:
    return f"w{t} "


def decode(stop: RepetitionStop, answer: list[int]) -> int:
    """Stream ``answer`` token by token as the engine would; the tokens streamed when it said stop (or all)."""
    for n, token in enumerate(answer, start=1):
        if stop.feed(piece(token)):
            return n
    return len(answer)


def text(tokens: list[int]) -> str:
    return "".join(piece(t) for t in tokens)


def test_a_short_span_stops_at_its_third_copy() -> None:
    span = [11, 12, 13, 14, 15, 16, 17, 18]  # 8 tokens: shorter than long_period
    answer = [5, 6, *span * 5]
    stop = RepetitionStop()
    assert decode(stop, answer) == 2 + 3 * len(span)
    assert stop.found_copies == 3


def test_a_long_span_stops_at_its_second_copy_and_keeps_one() -> None:
    span = list(range(100, 140))  # 40 tokens
    answer = [5, 6, *span * 3]
    stop = RepetitionStop()
    decoded = decode(stop, answer)
    assert decoded == 2 + 2 * len(span)  # the third copy is never decoded
    assert stop.trim(text(answer[:decoded])) == text([5, 6, *span]).rstrip()


def test_with_long_copies_equal_to_copies_a_long_span_waits_for_its_third_copy() -> None:
    span = list(range(100, 140))
    stop = RepetitionStop(long_copies=3)
    assert decode(stop, [*span * 4]) == 3 * len(span)


def test_text_that_does_not_repeat_runs_to_the_end() -> None:
    rng = random.Random(0)
    answer = [rng.randrange(1, 1000) for _ in range(300)]
    stop = RepetitionStop()
    assert decode(stop, answer) == len(answer) and not stop.fired
    assert stop.trim("unchanged") == "unchanged"


def test_once_fired_it_keeps_saying_stop() -> None:
    stop = RepetitionStop()
    decode(stop, [7, *[11, 12, 13, 14, 15, 16] * 3])
    assert stop.fired and stop.feed("anything")


def test_a_short_span_is_trimmed_in_the_text() -> None:
    stop = RepetitionStop()
    decode(stop, [7, *[11, 12, 13, 14, 15, 16] * 3])
    assert stop.found_copies == 3
    assert trim_repetition("a. b. b. b.", min_chars=2) == "a. b."
    assert stop.trim("Intro. The tests are good. The tests are good. The tests are good.") == (
        "Intro. The tests are good."
    )


def test_a_long_span_whose_text_does_not_match_is_left_as_it_is() -> None:
    span = list(range(100, 140))
    stop = RepetitionStop()
    decode(stop, span * 2)
    assert stop.trim("some other text") == "some other text"
