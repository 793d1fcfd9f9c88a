"""Stock teams: :func:`coding_team`, MetaGPT's Engineer and QaEngineer (:mod:`roles.coding`)."""

from __future__ import annotations

from typing import Any

from roles.coding import Engineer, QaEngineer

from .team import Team


def coding_team(
    *, n_candidates: int = 3, test_round_allowed: int = 5, use_code_review: bool = False, **team_kwargs: Any,
) -> Any:
    """A :class:`~environment.Team` of an :class:`Engineer` and a :class:`QaEngineer`: run it with the
    requirement as the idea and ``n_round`` of at least ``2 * test_round_allowed + 1`` (each rewrite takes
    the Engineer a round and the QaEngineer the next); :func:`~roles.coding.final_code` reads the code it ended with.
    ``team_kwargs`` go to ``Team`` (``llm=``, ``store=``, ``investment=`` …)."""
    return Team(roles=[Engineer(n_candidates=n_candidates, use_code_review=use_code_review),
                       QaEngineer(test_round_allowed=test_round_allowed)], **team_kwargs)



__all__ = ["coding_team"]
