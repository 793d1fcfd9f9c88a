"""A team's tunable surface, and a tuning: what ``rolecast optimize`` may change, and the file it writes.

The surface, by stable keys (see :func:`surface`):

* ``role:<name>.goal`` and ``role:<name>.constraints`` — each role's goal and constraints;
* ``action:<ActionClass>.instruction`` — each action's instruction: its prompt template when the class
  declares one as a text field (``PROMPT_TEMPLATE: str = ...``, MetaGPT's way), else its ``instruction``;
* ``action:<ActionClass>.demos`` — few-shot demonstrations for the action's calls.

Demonstrations are rendered at one place (:meth:`actions.Action._aask`): each is a user turn (a prompt the
action sent) and an assistant turn (the answer it got), after the system prompt and before the action's own
prompt. An action without demonstrations sends what it always sent: without a tuning, every prompt is
byte-for-byte what it was, so runs replay and reuse as before.

A tuning is a reviewable YAML file::

    rolecast_tuning: 1
    evalset: examples/multi_agents.evalset.yaml
    keys:
      action:SimpleWriteTest.demos:
        demos:
        - {input: "...", output: "...", from: RUN_ID}
      role:Alice.goal:
        text: write correct, tested code
        source: 3f2a...        # a digest of the text it replaces: a changed source is a warning
        from: bootstrap

applied by ``Team(tuning=PATH)``, the ``ROLECAST_TUNING`` variable, or ``rolecast eval --tuning PATH``
(:func:`apply_tuning`, when the team starts). A key the team does not have is a
:class:`~rolecast.errors.TuningError` naming the closest; a key whose source text changed since the
tuning was made is a warning (the tuning still applies).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from loguru import logger

from ..core.files import read_at_most
from ..errors import TuningError

#: the file format's version (the ``rolecast_tuning`` key)
FORMAT = 1
#: the environment variable naming a tuning every team applies (when it was given none itself)
ENV = "ROLECAST_TUNING"
#: the most demonstrations one action key may hold, and the longest text a key may hold
MAX_DEMOS = 8
MAX_TEXT = 20_000
MAX_FILE_BYTES = 2**20

_ACTIVE: ContextVar[Tuning | None] = ContextVar("rolecast_tuning", default=None)


def digest(text: str) -> str:
    """A short digest of a key's source text (a tuning says what it replaced)."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Demo:
    """One demonstration: a prompt an action sent, the answer it got, and the run it came from."""

    input: str
    output: str
    source: str = ""

    def as_dict(self) -> dict[str, str]:
        return {"input": self.input, "output": self.output, **({"from": self.source} if self.source else {})}


@dataclass
class KeyTuning:
    """What a tuning sets for one key: a text (instruction, goal, constraints) or demonstrations."""

    text: str | None = None
    demos: tuple[Demo, ...] = ()
    source: str = ""  # the digest of the text the tuning replaced
    origin: str = ""  # where it came from: "bootstrap", "teacher", "hand"

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.text is not None:
            out["text"] = self.text
        if self.demos:
            out["demos"] = [d.as_dict() for d in self.demos]
        if self.source:
            out["source"] = self.source
        if self.origin:
            out["from"] = self.origin
        return out


@dataclass
class Tuning:
    """A tuning: per key (see the module docstring), what it sets."""

    keys: dict[str, KeyTuning] = field(default_factory=dict)
    evalset: str = ""
    path: Path | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"rolecast_tuning": FORMAT, **({"evalset": self.evalset} if self.evalset else {}),
                "keys": {key: value.as_dict() for key, value in sorted(self.keys.items())}}

    def dump(self) -> str:
        """The YAML text of the tuning (block style, readable in review)."""
        import yaml  # (PyYAML when a tuning is written or read: importing the framework stays light)

        return yaml.safe_dump(self.as_dict(), sort_keys=False, allow_unicode=True, width=100)

    def save(self, path: str | Path) -> None:
        """Write the tuning to ``path`` (atomically: a reader never sees half a file)."""
        target = Path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(target.suffix + ".part")
        partial.write_text(self.dump(), encoding="utf-8")
        partial.replace(target)


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise TuningError(f"{where} is a text of at most {MAX_TEXT:,} characters, not {str(value)[:60]!r}")
    return value


def parse_tuning(raw: Any, path: Path | None = None) -> Tuning:
    """A :class:`Tuning` from a tuning file's parsed content."""
    where = f"tuning {path}" if path is not None else "the tuning"
    if not isinstance(raw, dict) or raw.get("rolecast_tuning") != FORMAT:
        raise TuningError(f"{where} is a mapping starting `rolecast_tuning: {FORMAT}` with its keys under `keys:`")
    unknown = sorted(set(raw) - {"rolecast_tuning", "evalset", "keys"})
    if unknown:
        raise TuningError(f"{where}: unknown field(s) {unknown}; a tuning has rolecast_tuning, evalset and keys")
    keys_raw = raw.get("keys") or {}
    if not isinstance(keys_raw, dict):
        raise TuningError(f"{where}: keys is a mapping of tunable keys")
    keys: dict[str, KeyTuning] = {}
    for key, value in keys_raw.items():
        at = f"{where} key {key!r}"
        kind = _kind(str(key), at)
        if not isinstance(value, dict) or set(value) - {"text", "demos", "source", "from"}:
            raise TuningError(f"{at} is a mapping of text or demos (and source, from)")
        tuned = KeyTuning(source=str(value.get("source", "")), origin=str(value.get("from", "")))
        if kind == "demos":
            demos = value.get("demos")
            if not isinstance(demos, list) or len(demos) > MAX_DEMOS or "text" in value:
                raise TuningError(f"{at} holds demos: a list of at most {MAX_DEMOS} {{input, output}}")
            for i, demo in enumerate(demos):
                if not isinstance(demo, dict) or set(demo) - {"input", "output", "from"}:
                    raise TuningError(f"{at} demo {i + 1} is a mapping of input, output (and from)")
            tuned.demos = tuple(Demo(_text(f"{at} demo input", d.get("input")), _text(f"{at} demo output",
                                     d.get("output")), str(d.get("from", ""))) for d in demos)
        else:
            if "demos" in value:
                raise TuningError(f"{at} holds a text, not demos")
            tuned.text = _text(f"{at} text", value.get("text"))
        keys[str(key)] = tuned
    return Tuning(keys, str(raw.get("evalset", "")), path)


def load_tuning(path: str | Path) -> Tuning:
    """Read a tuning file (YAML); a :class:`~rolecast.errors.TuningError` for one that cannot be used."""
    file = Path(path)
    try:
        data = read_at_most(file, MAX_FILE_BYTES)
    except OSError as exc:
        raise TuningError(f"cannot read the tuning {file}: {exc.strerror or exc}") from exc
    if data is None:
        raise TuningError(f"the tuning {file} is larger than {MAX_FILE_BYTES // 1024} KiB")
    import yaml  # (PyYAML when a tuning is written or read: importing the framework stays light)

    class NoAliasLoader(yaml.SafeLoader):
        """YAML's safe loader, refusing aliases (no "billion laughs" in a tuning)."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                raise yaml.YAMLError("aliases are not allowed in a tuning")
            return super().compose_node(parent, index)

    try:
        raw = yaml.load(data.decode("utf-8"), Loader=NoAliasLoader)  # a safe loader, without aliases
    except (UnicodeDecodeError, yaml.YAMLError, RecursionError) as exc:
        raise TuningError(f"the tuning {file} is not valid YAML: {str(exc)[:300]}") from exc
    return parse_tuning(raw, file.resolve())


def _kind(key: str, where: str) -> str:
    """What a key tunes: ``goal``, ``constraints``, ``instruction`` or ``demos`` (else a TuningError)."""
    target, _, kind = key.rpartition(".")
    scope = target.partition(":")[0]
    allowed = {"role": ("goal", "constraints"), "action": ("instruction", "demos")}.get(scope)
    if not allowed or kind not in allowed or not target.partition(":")[2]:
        raise TuningError(f"{where}: a key is role:<name>.goal, role:<name>.constraints, "
                          f"action:<ActionClass>.instruction or action:<ActionClass>.demos; not {key!r}")
    return kind


# ------------------------------------------------------------------ the surface of a team
def instruction_field(action: Any) -> str:
    """The field holding an action's instruction: its prompt template when declared as a text field
    (``PROMPT_TEMPLATE: str = ...``), else ``instruction``."""
    fields = getattr(type(action), "model_fields", {})
    if "PROMPT_TEMPLATE" in fields and isinstance(getattr(action, "PROMPT_TEMPLATE", None), str):
        return "PROMPT_TEMPLATE"
    return "instruction"


def surface(team: Any) -> dict[str, str]:
    """Every tunable key of ``team``'s roles and actions, with its current text ("" for demos)."""
    found: dict[str, str] = {}
    for role in team.env.roles.values():
        found[f"role:{role.name}.goal"] = role.goal
        found[f"role:{role.name}.constraints"] = role.constraints
        for action in role.actions:
            name = type(action).__name__
            found[f"action:{name}.instruction"] = getattr(action, instruction_field(action)) or ""
            found[f"action:{name}.demos"] = ""
    return found


def apply_tuning(team: Any, tuning: Tuning) -> None:
    """Set what ``tuning`` says on ``team``'s roles and actions (each role's actions become its own copies
    where a tuned action class is concerned, so no other team shares the change)."""
    known = surface(team)
    for key, tuned in tuning.keys.items():
        if key not in known:
            close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TuningError(f"the tuning{' ' + str(tuning.path) if tuning.path else ''} sets {key!r}, which "
                              f"this team does not have{hint}; its keys: {', '.join(sorted(known))}")
        if tuned.text is not None and tuned.source and tuned.source != digest(known[key]):
            logger.warning("tuning key {}: its source text changed since the tuning was made; applying it anyway",
                           key)
    for role in team.env.roles.values():
        for kind in ("goal", "constraints"):
            role_key = tuning.keys.get(f"role:{role.name}.{kind}")
            if role_key is not None and role_key.text is not None:
                setattr(role, kind, role_key.text)
        actions = list(role.actions)
        changed = False
        for i, action in enumerate(actions):
            name = type(action).__name__
            text, demos = tuning.keys.get(f"action:{name}.instruction"), tuning.keys.get(f"action:{name}.demos")
            if text is None and demos is None:
                continue
            own = type(action)(**{k: getattr(action, k) for k in action.model_fields_set if k != "prefix"})
            if text is not None and text.text is not None:
                setattr(own, instruction_field(action), text.text)
            if demos is not None:
                own.set_demos([(d.input, d.output) for d in demos.demos])
            actions[i], changed = own, True
        if changed:
            role.set_actions(actions)


def resolve_tuning(given: Any) -> Tuning | None:
    """The tuning a team applies: ``given`` (a path or a :class:`Tuning`), else the one active in this task
    (:func:`tuning_active`: ``rolecast eval --tuning``, an optimizer's candidate), else ``$ROLECAST_TUNING``."""
    if isinstance(given, Tuning):
        return given
    if given is not None:
        if not isinstance(given, (str, os.PathLike)):
            raise TuningError(f"tuning= takes a path to a tuning file or a Tuning, not {type(given).__name__}")
        return load_tuning(os.fspath(given))
    active = _ACTIVE.get()
    if active is not None:
        return active
    path = os.environ.get(ENV)
    return load_tuning(path) if path else None


@contextmanager
def tuning_active(tuning: Tuning | None) -> Iterator[None]:
    """Teams started in this task (an eval's runs) apply ``tuning`` unless given one of their own."""
    token = _ACTIVE.set(tuning)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


__all__ = [
    "ENV", "FORMAT", "Demo", "KeyTuning", "Tuning", "apply_tuning", "digest", "instruction_field", "load_tuning",
    "parse_tuning", "resolve_tuning", "surface", "tuning_active",
]
