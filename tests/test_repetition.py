"""The loop detector of free text on the embedded model (a logits processor, driven here without a model)."""

from __future__ import annotations

import numpy as np

from rolecast.llm.repetition import RepetitionStop, trim_repetition

EOS = 0
VOCAB = 1000


def decode(stop: RepetitionStop, prompt: list[int], answer: list[int]) -> int:
    """Feed ``answer`` token by token as llama.cpp would; the number of tokens decoded when it forced EOS (or all)."""
    ids = list(prompt)
    for n, token in enumerate([*answer, None]):
        scores = np.zeros(VOCAB, dtype=np.float32)
        stop(np.array(ids, dtype=np.intc), scores)
        if stop.fired:
            assert scores.argmax() == EOS and np.isneginf(np.delete(scores, EOS)).all()
            return n
        if token is None:
            return n
        ids.append(token)
    raise AssertionError("unreachable")


def detok(tokens: list[int]) -> bytes:
    return "".join(f"w{t} " for t in tokens).encode()


def test_a_short_span_stops_at_its_third_copy() -> None:
    span = [11, 12, 13, 14, 15, 16, 17, 18]  # 8 tokens: shorter than long_period
    answer = [5, 6, *span * 5]
    stop = RepetitionStop(EOS)
    assert decode(stop, [1, 2, 3], answer) == 2 + 3 * len(span)
    assert stop.found_copies == 3


def test_a_long_span_stops_at_its_second_copy_and_keeps_one() -> None:
    span = list(range(100, 140))  # 40 tokens
    answer = [5, 6, *span * 3]
    stop = RepetitionStop(EOS)
    decoded = decode(stop, [1, 2, 3], answer)
    assert decoded == 2 + 2 * len(span)  # the third copy is never decoded
    text = detok(answer[:decoded]).decode()
    assert stop.trim(text, detok) == detok([5, 6, *span]).decode().rstrip()


def test_with_long_copies_equal_to_copies_a_long_span_waits_for_its_third_copy() -> None:
    span = list(range(100, 140))
    stop = RepetitionStop(EOS, long_copies=3)
    assert decode(stop, [1], [*span * 4]) == 3 * len(span)


def test_text_that_does_not_repeat_runs_to_the_end() -> None:
    rng = np.random.default_rng(0)
    answer = [int(t) for t in rng.integers(1, VOCAB, size=300)]
    stop = RepetitionStop(EOS)
    assert decode(stop, [1, 2], answer) == len(answer) and not stop.fired
    assert stop.trim("unchanged", detok) == "unchanged"


def test_a_short_span_is_trimmed_in_the_text() -> None:
    stop = RepetitionStop(EOS)
    decode(stop, [1], [7, *[11, 12, 13, 14, 15, 16] * 3])
    assert stop.found_copies == 3
    assert trim_repetition("a. b. b. b.", min_chars=2) == "a. b."
    assert stop.trim("Intro. The tests are good. The tests are good. The tests are good.", detok) == (
        "Intro. The tests are good."
    )


def test_a_long_span_whose_text_does_not_match_is_left_as_it_is() -> None:
    span = list(range(100, 140))
    stop = RepetitionStop(EOS)
    decode(stop, [1], span * 2)
    assert stop.trim("some other text", detok) == "some other text"
