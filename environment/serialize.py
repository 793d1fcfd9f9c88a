"""Saving and restoring a team: MetaGPT's ``team.serialize(path)`` / ``Team.deserialize(path)``.

A saved team is one JSON file: each role with its class path and fields, its actions
(class paths and fields), memory, inbox, state and plan; the environment's history;
the idea, the investment, the cost so far, the rounds run and the run id.

Classes are restored *polymorphically*: a role saved as ``my_app.SimpleCoder`` comes
back as a ``SimpleCoder`` with its own actions. Data never decides what is imported:
a class is looked up among the subclasses of :class:`~roles.Role` and
:class:`~actions.Action` already defined in the process (import the module that
defines them before deserializing); a path that names none of them is a
:class:`~rolecast.errors.UsageError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from actions import Action
from actions.plan_and_act import Plan
from memory import Memory, Message, any_to_str
from memory.message import load_json_data
from rolecast.accounting.cost import CostManager, UsageTotals
from rolecast.core.classes import loaded_subclass
from rolecast.errors import DataError, UsageError
from roles import Role

FORMAT_VERSION = 1
TEAM_FILE = "team.json"


# -------------------------------------------------------------------- saving
def dump_action(action: Action) -> dict[str, Any]:
    return {"class": any_to_str(action), "fields": action.model_dump(mode="json")}


def dump_role(role: Role) -> dict[str, Any]:
    plan = role.planner.plan if role._planner is not None else None
    return {
        "class": any_to_str(role),
        "fields": role.model_dump(mode="json", exclude={"rc"}),
        "actions": [dump_action(a) for a in role.actions],
        "memory": [m.model_dump(mode="json") for m in role.rc.memory.get()],
        "inbox": role.rc.model_dump(mode="json", include={"msg_buffer"})["msg_buffer"],
        "state": role.rc.state,
        "watch": sorted(role.rc.watch),
        "react_mode": role.rc.react_mode.value,
        "max_react_loop": role.rc.max_react_loop,
        "plan": plan.model_dump(mode="json") if plan is not None else None,
    }


def _dump_totals(t: UsageTotals) -> dict[str, Any]:
    return {"prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens, "cost": t.cost,
            "calls": t.calls}


def dump_costs(cm: CostManager) -> dict[str, Any]:
    return {
        "max_budget": cm.max_budget,
        "total": _dump_totals(cm.total),
        "by_role": {k: _dump_totals(v) for k, v in cm.by_role.items()},
        "by_model": {k: _dump_totals(v) for k, v in cm.by_model.items()},
    }


def write_team(path: str | os.PathLike[str], state: dict[str, Any]) -> Path:
    """Write a team's state to ``path`` (a folder; the file is ``team.json``), atomically."""
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / TEAM_FILE
    tmp = target.with_suffix(".json.tmp")
    tmp.write_text(json.dumps({"version": FORMAT_VERSION, **state}, ensure_ascii=False, indent=1), encoding="utf-8")
    tmp.replace(target)
    return target


# ----------------------------------------------------------------- restoring
def is_plain_dump(state: dict[str, Any]) -> bool:
    """Whether a saved team is a plain ``team.model_dump()`` (what MetaGPT's ``Team.serialize`` writes)."""
    return "version" not in state and isinstance(state.get("env"), dict)


def read_team(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A saved team's state: rolecast's format, or a plain ``model_dump()`` (see :func:`is_plain_dump`)."""
    folder = Path(path)
    target = folder / TEAM_FILE if folder.is_dir() else folder
    try:
        state: dict[str, Any] = load_json_data(target.read_text(encoding="utf-8"), what=f"saved team at {target}")
    except FileNotFoundError:
        raise UsageError(f"no saved team at {target}") from None
    except OSError as exc:
        raise UsageError(f"the saved team at {target} cannot be read: {exc}") from exc
    if not isinstance(state, dict):
        raise DataError(f"the saved team at {target} is not a JSON object")
    if is_plain_dump(state):
        return state
    if state.get("version") != FORMAT_VERSION:
        raise UsageError(f"{target} has format version {state.get('version')!r}; this rolecast reads {FORMAT_VERSION}")
    return state


def load_action(data: dict[str, Any]) -> Action:
    cls = loaded_subclass(Action, data["class"])
    return cls(**data["fields"])


def load_role(data: dict[str, Any]) -> Role:
    """A role of its own class, with the saved actions, memory, inbox, state and plan."""
    cls = loaded_subclass(Role, data["class"])
    role = cls(**data["fields"])
    role.set_actions([load_action(a) for a in data["actions"]])
    role._set_react_mode(data["react_mode"], max(1, data["max_react_loop"]))
    role.rc.max_react_loop = data["max_react_loop"]
    role.rc.watch = set(data["watch"])
    role.rc.memory = Memory(Message.model_validate(m) for m in data["memory"])
    for m in data["inbox"]:
        role.put_message(Message.model_validate(m))
    role.rc.state = data["state"]
    role.recovered = data["state"] >= 0  # saved mid-turn: _think resumes that state without asking
    if data.get("plan") is not None:
        role.planner.resume_from(Plan.model_validate(data["plan"]))
    return role


def load_costs(cm: CostManager, data: dict[str, Any]) -> None:
    def totals(d: dict[str, Any]) -> UsageTotals:
        return UsageTotals(d["prompt_tokens"], d["completion_tokens"], d["cost"], d["calls"])

    cm.max_budget = data["max_budget"]
    cm.total = totals(data["total"])
    cm.by_role = {k: totals(v) for k, v in data["by_role"].items()}
    cm.by_model = {k: totals(v) for k, v in data["by_model"].items()}


__all__ = ["TEAM_FILE", "dump_role", "is_plain_dump", "load_role", "read_team", "write_team"]
