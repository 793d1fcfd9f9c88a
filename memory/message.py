"""Message: what roles say to each other on the environment bus."""

from __future__ import annotations

import json
import sys
import uuid
from typing import Any

from loguru import logger
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_serializer,
    field_validator,
)

from .instruct import MAPPING_ATTR, create_instruct_value, model_from_mapping

MESSAGE_ROUTE_TO_ALL = "<all>"
#: ``any_to_str(actions.UserRequirement)``: a message's cause unless it names another
#: (memory sits below actions, so the class is named, not imported)
USER_REQUIREMENT = "actions.action.UserRequirement"


def any_to_str(val: Any) -> str:
    """A stable string for a class, an instance or a string: ``module.QualName`` or the string."""
    if isinstance(val, str):
        return val
    cls = val if isinstance(val, type) else type(val)
    return f"{cls.__module__}.{cls.__qualname__}"


def any_to_str_set(val: Any) -> set[str]:
    """``send_to`` normalisation: one value or an iterable of names, profiles, classes or roles."""
    if val is None or val == "":
        return set()
    if isinstance(val, (str, type)) or not hasattr(val, "__iter__") or isinstance(val, BaseModel):
        items = [val]
    else:
        items = list(val)
    out: set[str] = set()
    for item in items:
        name = getattr(item, "name", None) if not isinstance(item, (str, type)) else None
        out.add(name if isinstance(name, str) and name else any_to_str(item))
    return out


def _sender_or_cause(v: Any) -> str:
    # a role instance sends as its name; classes and actions as their class path
    name = getattr(v, "name", None) if not isinstance(v, (str, type)) and hasattr(v, "profile") else None
    return name if isinstance(name, str) and name else any_to_str(v)


class Message(BaseModel):
    """One message on the bus.

    ``cause_by`` accepts an Action class, an Action instance or a string and is stored
    as a stable string; it defaults to the user's requirement
    (``"actions.action.UserRequirement"``), as in MetaGPT. ``send_to`` holds role
    names or profiles, ``{"<all>"}`` by default. A message serialises to JSON and back,
    ``instruct_content`` included.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    content: str = ""
    instruct_content: BaseModel | None = None
    role: str = "user"
    cause_by: str = USER_REQUIREMENT
    sent_from: str = ""
    send_to: set[str] = Field(default_factory=lambda: {MESSAGE_ROUTE_TO_ALL})
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, content: str = "", **data: Any):
        super().__init__(content=content, **data)

    @field_validator("content", mode="before")
    @classmethod
    def _content_to_str(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("cause_by", mode="before")
    @classmethod
    def _cause_to_str(cls, v: Any) -> str:
        return USER_REQUIREMENT if v is None or v == "" else _sender_or_cause(v)

    @field_validator("sent_from", mode="before")
    @classmethod
    def _to_str(cls, v: Any) -> str:
        return "" if v is None or v == "" else _sender_or_cause(v)

    @field_validator("send_to", mode="before")
    @classmethod
    def _to_set(cls, v: Any) -> set[str]:
        result = any_to_str_set(v)
        return result or {MESSAGE_ROUTE_TO_ALL}

    @field_validator("instruct_content", mode="before")
    @classmethod
    def _load_instruct(cls, v: Any) -> Any:
        if isinstance(v, dict) and "class" in v and "value" in v:
            return _rebuild_model(v)
        return v

    @field_serializer("instruct_content")
    def _dump_instruct(self, v: BaseModel | None) -> dict[str, Any] | None:
        if v is None:
            return None
        mapping = getattr(type(v), MAPPING_ATTR, None)
        if isinstance(mapping, dict):  # built from a mapping (ActionNode): rebuilt from it
            return {"class": type(v).__name__, "mapping": dict(mapping), "value": v.model_dump(mode="json")}
        return {"class": any_to_str(v), "value": v.model_dump(mode="json")}

    @field_serializer("send_to")
    def _dump_send_to(self, v: set[str]) -> list[str]:
        return sorted(v)

    # ------------------------------------------------------------------ helpers
    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str) -> Message:
        return cls.model_validate(json.loads(text))

    def dump(self) -> str:
        """This message as JSON (MetaGPT's name; ``None`` fields left out)."""
        return self.model_dump_json(exclude_none=True)

    @staticmethod
    def load(val: str | bytes) -> Message | None:
        """A message from :meth:`dump`'s JSON; ``None`` (and an error logged) if it is not JSON."""
        try:
            data = json.loads(val)
        except json.JSONDecodeError as err:
            logger.error("not a message: cannot parse {!r}: {}", str(val)[:200], err)
            return None
        return Message.model_validate(data)

    def to_dict(self) -> dict[str, str]:
        """``{"role": ..., "content": ...}`` (MetaGPT's chat form; see :meth:`to_chat` for the model's)."""
        return {"role": self.role, "content": self.content}

    @staticmethod
    def create_instruct_value(kvs: dict[str, Any], class_name: str = "") -> BaseModel:
        """A pydantic value holding ``kvs`` (for ``instruct_content``), each field typed by its value."""
        return create_instruct_value(kvs, class_name)

    def to_chat(self) -> dict[str, str]:
        """This message as an OpenAI chat message."""
        role = self.role if self.role in ("system", "user", "assistant") else "user"
        return {"role": role, "content": self.content}

    def is_addressed_to(self, addresses: set[str]) -> bool:
        return MESSAGE_ROUTE_TO_ALL in self.send_to or not self.send_to.isdisjoint(addresses)

    def __str__(self) -> str:
        return f"{self.role}: {self.content}"

    # as in MetaGPT: a list of messages formats into a prompt as readable lines
    __repr__ = __str__

    def __hash__(self) -> int:
        return hash(self.id)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Message) and other.id == self.id


def _rebuild_model(data: dict[str, Any]) -> BaseModel:
    """Rebuild ``instruct_content`` from its dump.

    A mapping (MetaGPT's form for dynamic models) rebuilds the typed model; otherwise the
    class named by the dump is used if its module is *already imported* — the data never
    decides what gets imported — else an equivalent model with the same fields.
    """
    value = data["value"]
    name = str(data["class"])
    if isinstance(data.get("mapping"), dict):
        return model_from_mapping(name, data["mapping"]).model_validate(value)
    module_name, _, qualname = (f"{data['module']}.{name}" if data.get("module") else name).rpartition(".")
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split(".") if obj is not None else ():
        obj = getattr(obj, part, None)
    if isinstance(obj, type) and issubclass(obj, BaseModel):
        return obj.model_validate(value)
    fields: dict[str, Any] = {k: (Any, ...) for k in value}
    model = create_model(qualname.rsplit(".", 1)[-1] or "InstructContent", **fields)
    return model.model_validate(value)


class UserMessage(Message):
    """A message from the user (``role="user"``)."""

    def __init__(self, content: str = "", **data: Any):
        data.setdefault("role", "user")
        super().__init__(content, **data)


class AIMessage(Message):
    """A message from a model (``role="assistant"``)."""

    def __init__(self, content: str = "", **data: Any):
        data.setdefault("role", "assistant")
        super().__init__(content, **data)


class SystemMessage(Message):
    """A system message (``role="system"``)."""

    def __init__(self, content: str = "", **data: Any):
        data.setdefault("role", "system")
        super().__init__(content, **data)
