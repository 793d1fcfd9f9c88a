"""The events of a run's log: their kinds, their payloads, and :class:`RunEvent`, one record.

Every reader and writer of the log goes through this module for what an event is. An event has
a kind (a string, the constants below) and a JSON payload whose shape each kind documents, field
by field, as a :class:`~typing.TypedDict` (LangGraph documents its ``Checkpoint`` the same way):

==================  =====================================================================
kind                payload
==================  =====================================================================
run_started         :class:`RunStartedData` — team, roles, idea, budget; ``resumed``; lineage;
                    the ``command`` that started the process (:class:`CommandData`)
round_started       :class:`RoundStartedData` — the roles the round starts (or the runtime)
message             :class:`MessageData` — the published message's JSON
llm_call            :class:`LLMCallData` — role's action, model, fingerprint, request summary,
                    the full request (``messages``, ``settings``, ``constraints``: see
                    :mod:`rolecast.runs.requests`), response, cost, latency; ``error`` for a
                    failed attempt; ``reused`` for an answer taken from another run's log
turn_started        :class:`TurnStartedData` — (empty: the role is the event's ``role``)
state_invalid       :class:`StateInvalidData` — a state-selection answer that was no valid
                    choice (the raw answer, the number of options): the role's turn ended
turn_finished       :class:`TurnFinishedData` — the id of the message the turn returned
turn_failed         :class:`TurnFailedData` — the error's type and text
round_finished      :class:`RoundFinishedData` — messages published; each finished turn's message
run_stopped         :class:`RunStoppedData` — why, rounds (and the ``n_round`` asked), cost, calls
                    (live, reused, saved)
checkpoint          :class:`CheckpointData` — where ``Team.serialize`` saved the team
lineage             :class:`LineageData` — a fork (parent, round) or a rerun reusing a parent
approval_requested  :class:`ApprovalRequestedData` — a deferred approval's question
approval_decided    :class:`ApprovalDecidedData` — a person's answer to it
history_fitted      :class:`HistoryFittedData` — a prompt left out older messages to fit the window
==================  =====================================================================

Writers build these dicts (the types let a type checker hold them to the fields); readers get
them through :func:`payload`, which also brings a payload of an older format up to this one —
:data:`FORMAT_VERSION` is the format this version writes, kept per store (SQLite's
``user_version``, PostgreSQL's ``rolecast_meta``) and per run (``run_started``'s ``format``). A
store of a newer format than this version knows is refused, never misread.

Formats: 1 — before issue 23 (no ``format`` field; no lineage, approval or ``reused`` data);
2 — issue 23; 3 — an ``llm_call`` holds its full request (every message as sent, by
reference to the store's texts, and the settings), and the store a table of texts; 4 — this one: a
long text is kept in chunks, and a message's reference may be the list of its chunks' keys
(:func:`rolecast.runs.requests.chunks`), so that a prompt holding a whole conversation adds only
what is new to the store. Every older payload reads as format 4 (the new fields are optional: a
call logged without them has only its summary,
:attr:`CallRequest.full <rolecast.runs.requests.CallRequest.full>` False).
"""

from __future__ import annotations

import json
import time
import types
import typing
from typing import Any, TypedDict, cast

from pydantic_core import PydanticSerializationError, to_json

from ..errors import DamagedRun

#: the payload format this version writes (see the module docstring)
FORMAT_VERSION = 4

# Event kinds, in the order a run writes them.
RUN_STARTED = "run_started"
"""A run began: its idea, roles and settings (the first event of every run)."""
ROUND_STARTED = "round_started"
"""A round began (``{"round"}``)."""
MESSAGE = "message"
"""A message was published on the environment's bus (the message, whole)."""
LLM_CALL = "llm_call"
"""A model call: its request, then its answer and usage (written before the answer is used)."""
TURN_STARTED = "turn_started"
"""A role began its turn in a round."""
STATE_INVALID = "state_invalid"
"""A role's answer to "which action next?" was not a valid choice; its turn ended
(``{"raw", "n_options", "error"}``)."""
TURN_FINISHED = "turn_finished"
"""A role's turn ended (the action it ran, or none)."""
#: a prompt left out older messages to fit the model's context window
#: ({"purpose", "kept", "omitted", "unit", "window", "budget", "max_tokens", "history_tokens", "omitted_tokens"})
HISTORY_FITTED = "history_fitted"
TURN_FAILED = "turn_failed"
"""A role raised during its turn: the error, typed and named, and the turn's partial work."""
ROUND_FINISHED = "round_finished"
"""A round ended: the state a resume restores from."""
RUN_STOPPED = "run_stopped"
"""A run ended: why (done, round limit, budget, error), its calls (live and replayed) and cost."""
CHECKPOINT = "checkpoint"
"""A snapshot of the roles' state a long run can resume from without replaying every round."""
#: where a run comes from: a fork of another run at a round, or a rerun reusing another's answers
LINEAGE = "lineage"
#: a deferred approval asked (the run pauses there) / answered (by a person, later, in any process)
APPROVAL_REQUESTED = "approval_requested"
APPROVAL_DECIDED = "approval_decided"
#: not an event: a journal line holding texts an event refers to (``{key: text}``; see RunEvent.texts)
TEXTS = "texts"
DURABLE_KINDS = frozenset({
    RUN_STARTED, LLM_CALL, TURN_FAILED, ROUND_FINISHED, RUN_STOPPED, CHECKPOINT, LINEAGE, APPROVAL_REQUESTED,
    APPROVAL_DECIDED,
})
"""The kinds the run log writes at once (a model call: before its answer is used); the others ride with the
next write: re-executing the run re-derives them, while a model call, paid for, must never be lost."""
EVENT_KINDS = (
    RUN_STARTED, ROUND_STARTED, MESSAGE, LLM_CALL, TURN_STARTED, STATE_INVALID, TURN_FINISHED, TURN_FAILED,
    ROUND_FINISHED, RUN_STOPPED, CHECKPOINT, LINEAGE, APPROVAL_REQUESTED, APPROVAL_DECIDED, HISTORY_FITTED,
)
"""Every event kind a run log holds."""


# ------------------------------------------------------------------ payloads
#: a role as ``run_started`` lists it: name, profile, its class (``module.QualName``), its actions' names
RoleData = TypedDict("RoleData", {"name": str, "profile": str, "class": str, "actions": list[str]}, total=False)


class LineageData(TypedDict, total=False):
    #: ``"fork"`` or ``"reuse"``
    relation: str
    #: the run it comes from
    parent: str
    #: a fork's last round taken over from the parent
    at: int


class CommandData(TypedDict, total=False):
    """How the process that started (or resumed) a run was started, when it was a script: what
    ``rolecast runs rerun`` runs again (see :mod:`rolecast.runs.rerun`)."""

    #: ``sys.argv``: the script first (as given: relative to ``cwd``), then its arguments
    argv: list[str]
    #: the directory the process ran in
    cwd: str
    #: the module run with ``python -m`` (``argv[0]`` is then its file)
    module: str


class RunStartedData(TypedDict, total=False):
    team: str
    roles: list[RoleData]
    idea: str
    investment: float
    n_round: int | None
    #: a resume (the log held events of the run already)
    resumed: bool
    lineage: LineageData
    #: the payload format of the process that started (or resumed) the run; 1 when absent
    format: int
    #: the script that started this process (absent under pytest, in a notebook or at a prompt);
    #: an optional field, added without a new format (older readers ignore it)
    command: CommandData
    #: labels a runner gave the run (``rolecast eval``: ``{"eval": EVAL_ID, "case": CASE, "repeat": "1"}``;
    #: see :mod:`rolecast.runs.binding`); an optional field, added without a new format
    tags: dict[str, str]


class RoundStartedData(TypedDict, total=False):
    roles: list[str]
    #: the runtime's class, when the turns run elsewhere (Ray)
    runtime: str


# defined here, the kernel's lowest place that knows it, and re-exported by :mod:`memory`
MESSAGE_ROUTE_TO_ALL = "<all>"
"""The address of a broadcast (``Message.send_to``), in messages and in their logged events."""


class MessageData(TypedDict):
    #: the message as ``Message.model_dump(mode="json")``: id, content, role, cause_by, sent_from, send_to …
    message: dict[str, Any]


class UsageData(TypedDict, total=False):
    prompt_tokens: int
    completion_tokens: int
    estimated: bool


class ResponseData(TypedDict, total=False):
    #: ``Completion.to_json()``: the text, tool calls, usage …
    text: str
    usage: UsageData


class ReusedData(TypedDict):
    #: the run whose log answered the call, the call's ``seq`` there, and what it cost that run
    run: str
    seq: int
    cost: float


class RequestSummary(TypedDict, total=False):
    """The compact summary of a request every format keeps (``rolecast runs show``, mismatches)."""

    #: ``"complete"``, ``"choose"`` or ``"embed"``
    kind: str
    n_messages: int
    #: the first system message's first 300 characters, the last message's last 2,000
    system: str
    last: str


class LLMCallData(TypedDict, total=False):
    action: str
    model: str
    #: the provider, as OpenTelemetry's ``gen_ai.system`` ("openai", "anthropic", "gcp.gemini" …)
    system: str
    #: sha-256 (32 hex digits) of the canonical request: what resume and reuse match on
    fingerprint: str
    #: the request's summary (:class:`RequestSummary`)
    request: dict[str, Any]
    #: (format 3) every message as sent, in order: ``[role, text key]``, or ``[role, text key, extras]``
    #: (format 4: the key of a long text is the list of its chunks' keys, joined in order)
    #: where the message had more (``tool_calls``, ``tool_call_id``, ``name``; ``content`` when it was
    #: not text, the key then None). The texts are the store's, read with
    #: :func:`rolecast.runs.requests.request_of`
    messages: list[list[Any]]
    #: (format 3) the settings as sent: the model settings given (temperature, top_p, seed …),
    #: ``max_tokens`` as the call was limited, ``stop``, ``n_options`` (choose), ``purpose`` (embed)
    settings: dict[str, Any]
    #: (format 3) the long constraints, by text key: ``grammar`` (GBNF), ``schema`` and ``tools`` (JSON)
    constraints: dict[str, str]
    response: ResponseData
    #: dollars charged to this run (0 for a reused answer)
    cost: float
    latency: float
    #: a failed attempt: ``"<ErrorType>: <message>"`` (no response)
    error: str
    reused: ReusedData


class TurnStartedData(TypedDict, total=False):
    pass


class HistoryFittedData(TypedDict, total=False):
    #: which prompt: "state", "action NAME", "compaction" …
    purpose: str
    #: the newest messages it kept, and the earlier ones it left out
    kept: int
    omitted: int
    #: what was counted: "message" (a history), "step" (a loop's scratchpad), "task result" …
    unit: str
    #: the model's context window, the tokens the history could use, the answer's room
    window: int
    budget: int
    max_tokens: int
    #: the whole history's tokens, and those of the messages left out (the model's count)
    history_tokens: int
    omitted_tokens: int


class StateInvalidData(TypedDict, total=False):
    #: the model's answer to "which action next?", as it came
    raw: str
    #: how many actions it could choose from (a valid answer is -1 … n_options - 1)
    n_options: int
    error: str


class TurnFinishedData(TypedDict, total=False):
    message_id: str | None


class TurnFailedData(TypedDict, total=False):
    type: str
    error: str


class RoundFinishedData(TypedDict, total=False):
    messages: int
    #: role -> the id of the message its turn returned (None: nothing); failed turns are absent
    turns: dict[str, str | None]


class RunStoppedData(TypedDict, total=False):
    #: ``"n_round"``, ``"idle"``, ``"budget"``, ``"deadline"``, ``"waiting: approval <id>"``, ``"error: <Type>"``
    reason: str
    rounds: int
    #: the rounds ``run`` was asked for (a run started by ``run_project`` logs them only here)
    n_round: int
    cost: float
    calls: int
    live_calls: int
    reused_calls: int
    saved_cost: float


class CheckpointData(TypedDict, total=False):
    path: str
    rounds: int


class ApprovalRequestedData(TypedDict, total=False):
    #: ``"<role>-<n>"``: the role's n-th deferred approval of the run
    id: str
    role: str
    round: int
    #: the invocation's kind (``"tool"``, ``"action"`` …), name and arguments
    kind: str
    name: str
    arguments: dict[str, Any]
    #: the tool's JSON schema, which an edit is checked against
    schema: dict[str, Any]


class ApprovalDecidedData(TypedDict, total=False):
    id: str
    #: ``"approve"``, ``"reject"`` or ``"edit"``
    verdict: str
    arguments: dict[str, Any]
    reason: str
    #: who answered (``"rolecast runs approve"`` …) and when (Unix time)
    by: str
    at: float


#: each kind's payload type
PAYLOADS: dict[str, type] = {
    "run_started": RunStartedData, "round_started": RoundStartedData, "message": MessageData,
    "llm_call": LLMCallData, "turn_started": TurnStartedData, "state_invalid": StateInvalidData,
    "turn_finished": TurnFinishedData,
    "turn_failed": TurnFailedData, "round_finished": RoundFinishedData, "run_stopped": RunStoppedData,
    "checkpoint": CheckpointData, "lineage": LineageData, "approval_requested": ApprovalRequestedData,
    "approval_decided": ApprovalDecidedData, "history_fitted": HistoryFittedData,
}


#: the fields a reader cannot do without, per kind (the others are optional)
REQUIRED: dict[str, tuple[str, ...]] = {
    "approval_requested": ("id",), "approval_decided": ("id", "verdict"),
    "lineage": ("relation", "parent"),
}
_shapes: dict[str, dict[str, tuple[type, ...]]] = {}


def _json_types(hint: Any) -> tuple[type, ...]:
    """The Python types JSON decodes to that fit a payload field's annotation (``object``: anything)."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return tuple(t for arg in typing.get_args(hint) for t in _json_types(arg))
    if hint is type(None):
        return (type(None),)
    if hint is float:
        return (int, float)
    if hint in (str, int, bool):
        return (hint,)
    if origin in (list, dict):
        return (origin,)
    if typing.is_typeddict(hint):
        return (dict,)
    return (object,)


def _shape(kind: str) -> dict[str, tuple[type, ...]]:
    found = _shapes.get(kind)
    if found is None:
        hints = typing.get_type_hints(PAYLOADS[kind]) if kind in PAYLOADS else {}
        found = _shapes[kind] = {name: types_ for name, hint in hints.items()
                                 if object not in (types_ := _json_types(hint))}
    return found


def check_payload(run_id: str, seq: int, kind: str, data: Any) -> dict[str, Any]:
    """``data`` when it has its kind's shape (a JSON object; each field of its TypedDict that is there of
    the field's JSON type; the fields in :data:`REQUIRED` there); else :class:`~rolecast.errors.DamagedRun`.
    Fields a newer version added (not in the TypedDict) pass; so does a kind this version does not know."""
    if not isinstance(data, dict):
        raise DamagedRun(run_id, seq, kind, f"holds a JSON {type(data).__name__}, not an object")
    shape = _shape(kind)
    for name, value in data.items():
        wanted = shape.get(name)
        if wanted is not None and not isinstance(value, wanted):
            raise DamagedRun(run_id, seq, kind, f"has a {type(value).__name__} as {name!r}, not "
                                                f"{' or '.join(sorted(t.__name__ for t in wanted))}")
    for name in REQUIRED.get(kind, ()):
        if name not in data:
            raise DamagedRun(run_id, seq, kind, f"has no {name!r}")
    return data


def decode_payload(run_id: str, seq: int, kind: str, text: str | bytes) -> dict[str, Any]:
    """A stored payload's JSON text, decoded and checked (:func:`check_payload`); text that is not JSON
    (or nests past what the decoder can) is :class:`~rolecast.errors.DamagedRun`, never a raw
    ``JSONDecodeError`` or ``RecursionError``."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        problem = "nests too deep" if isinstance(exc, RecursionError) else f"is not JSON ({exc})"
        raise DamagedRun(run_id, seq, kind, problem) from None
    return check_payload(run_id, seq, kind, data)


def upgrade(kind: str, data: dict[str, Any], version: int = 1) -> dict[str, Any]:
    """``data`` of format ``version`` as this version's format (a new dict only where it changes).

    1 → 2 adds only optional fields, so a format-1 payload is already a valid format-2 one; this is
    where a later format's changes to older payloads go (renamed or restructured fields)."""
    if version > FORMAT_VERSION:
        raise ValueError(f"a {kind} event of payload format {version}: this version reads up to {FORMAT_VERSION}")
    return data


def payload(event: RunEvent) -> Any:
    """The event's payload, in this version's format (its kind's TypedDict: see :data:`PAYLOADS`)."""
    return upgrade(event.kind, event.data)


def llm_call(event: RunEvent) -> LLMCallData:
    """An ``llm_call`` event's payload."""
    return cast(LLMCallData, payload(event))


def usage(event: RunEvent) -> UsageData:
    """The tokens of an ``llm_call`` (empty for a failed attempt)."""
    return llm_call(event).get("response", {}).get("usage", {})


def run_started(event: RunEvent) -> RunStartedData:
    return cast(RunStartedData, payload(event))


def run_stopped(event: RunEvent) -> RunStoppedData:
    return cast(RunStoppedData, payload(event))


def message(event: RunEvent) -> dict[str, Any]:
    """A ``message`` event's message (its JSON)."""
    return cast(MessageData, payload(event)).get("message") or {}


def lineage(event: RunEvent) -> LineageData:
    return cast(LineageData, payload(event))


def command_argv(command: CommandData, python: str = "python") -> list[str]:
    """The command line that runs ``command`` again: ``python -m MODULE ARGS`` for a module,
    ``python SCRIPT.py ARGS`` for a Python file, else ``argv`` as it is (an executable script);
    ``python`` is the interpreter to name (``rolecast runs rerun`` gives its own, ``sys.executable``)."""
    argv = [str(a) for a in command.get("argv", [])]
    if not argv:
        return []
    module = command.get("module")
    if module:
        return [python, "-m", module, *argv[1:]]
    if argv[0].endswith(".py"):
        return [python, *argv]
    return argv


class RunEvent:
    """One record of a run's log.

    ``data`` is the payload; ``text`` its JSON, which is what a store writes. An event made from
    JSON text (``RunEvent(..., text=...)``: a message the writer encoded already, a record the log
    encoded when it was logged) decodes ``data`` only when something reads it, and an event made
    from ``data`` encodes its text once, when a store first asks."""

    __slots__ = ("_data", "_text", "kind", "role", "round", "run_id", "seq", "texts", "ts")

    def __init__(
        self, run_id: str, kind: str, data: dict[str, Any] | None = None, round: int = 0, role: str = "",
        seq: int = 0, ts: float | None = None, *, text: str | None = None,
    ):
        self.run_id = run_id
        self.kind = kind
        self._data = data if data is not None or text is not None else {}
        self._text = text
        self.round = round
        self.role = role
        self.seq = seq  # assigned by the store on append
        self.ts = time.time() if ts is None else ts
        #: texts the payload refers to that travel to the store with it (``{key: text}``: see
        #: :mod:`rolecast.runs.requests`); written in the same transaction, kept once per store
        self.texts: dict[str, str] | None = None

    @property
    def data(self) -> dict[str, Any]:
        data = self._data
        if data is None:
            text = self._text
            data = self._data = decode_payload(self.run_id, self.seq, self.kind, text) if text is not None else {}
        return data

    @data.setter
    def data(self, value: dict[str, Any]) -> None:
        self._data, self._text = value, None

    @property
    def text(self) -> str:
        """``data`` as JSON text (:func:`encode_data`): what a store writes."""
        text = self._text
        if text is None:
            text = self._text = encode_data(self._data if self._data is not None else {})
        return text

    def seal(self) -> None:
        """Encode ``data`` now and let the dict go (it is decoded again if read): an event waiting
        to be written then holds one string, not a tree of objects for the collector to walk."""
        if self._text is None:
            self._text = encode_data(self._data if self._data is not None else {})
        self._data = None

    def __repr__(self) -> str:
        return (f"RunEvent(run_id={self.run_id!r}, kind={self.kind!r}, data={self.data!r}, round={self.round!r}, "
                f"role={self.role!r}, seq={self.seq!r}, ts={self.ts!r})")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunEvent):
            return NotImplemented
        return (self.run_id, self.kind, self.data, self.round, self.role, self.seq, self.ts) == (
            other.run_id, other.kind, other.data, other.round, other.role, other.seq, other.ts)

    __hash__ = None  # type: ignore[assignment]  # (mutable, like the dataclass it was)

    def to_json(self, extra: dict[str, Any] | None = None) -> str:
        """The event as one line of JSON (``rolecast runs export``), with ``extra``'s fields after its
        own; text that UTF-8 cannot hold (a lone surrogate a model wrote) is written as JSON's
        ``\\ud800`` escape, so the line prints."""
        record = {"run_id": self.run_id, "seq": self.seq, "ts": self.ts, "kind": self.kind,
                  "round": self.round, "role": self.role, "data": self.data, **(extra or {})}
        line = json.dumps(record, ensure_ascii=False)
        if not line.isascii():
            try:
                line.encode("utf-8")
            except UnicodeEncodeError:
                return json.dumps(record, ensure_ascii=True)
        return line


def encode_data(data: dict[str, Any]) -> str:
    """An event's payload as JSON text (what every store writes); anything JSON has no type for
    is written as its ``str()``. pydantic-core's encoder: four times the standard library's speed.

    Text that UTF-8 cannot hold — a lone surrogate (``\\ud800``) in what a model returned — is kept,
    as JSON's own escape (the standard library's encoder with ``ensure_ascii``): decoding the
    payload gives back the very string the role saw.
    """
    try:
        return to_json(data, fallback=str).decode()
    except PydanticSerializationError:
        return json.dumps(data, ensure_ascii=True, default=str)


__all__ = [
    "APPROVAL_DECIDED",
    "APPROVAL_REQUESTED",
    "CHECKPOINT",
    "DURABLE_KINDS",
    "EVENT_KINDS",
    "FORMAT_VERSION",
    "HISTORY_FITTED",
    "LINEAGE",
    "LLM_CALL",
    "MESSAGE",
    "MESSAGE_ROUTE_TO_ALL",
    "PAYLOADS",
    "ROUND_FINISHED",
    "ROUND_STARTED",
    "RUN_STARTED",
    "RUN_STOPPED",
    "STATE_INVALID",
    "TEXTS",
    "TURN_FAILED",
    "TURN_FINISHED",
    "TURN_STARTED",
    "ApprovalDecidedData",
    "ApprovalRequestedData",
    "CheckpointData",
    "CommandData",
    "LLMCallData",
    "LineageData",
    "MessageData",
    "RequestSummary",
    "ResponseData",
    "ReusedData",
    "RoleData",
    "RoundFinishedData",
    "RoundStartedData",
    "RunEvent",
    "RunStartedData",
    "RunStoppedData",
    "StateInvalidData",
    "TurnFailedData",
    "TurnFinishedData",
    "TurnStartedData",
    "UsageData",
    "check_payload",
    "command_argv",
    "decode_payload",
    "encode_data",
    "lineage",
    "llm_call",
    "message",
    "payload",
    "run_started",
    "run_stopped",
    "upgrade",
    "usage",
]
