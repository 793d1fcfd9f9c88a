"""Message: what roles say to each other on the environment bus."""

from __future__ import annotations

import importlib
import json
import uuid
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    create_model,
    field_serializer,
    field_validator,
)

MESSAGE_ROUTE_TO_ALL = "<all>"


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


class Message(BaseModel):
    """One message on the bus.

    ``cause_by`` accepts an Action class, an Action instance or a string and is stored
    as a stable string (``"actions.action.UserRequirement"``); ``send_to`` holds role
    names or profiles, ``{"<all>"}`` by default. A message serialises to JSON and back,
    ``instruct_content`` included.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    content: str = ""
    instruct_content: BaseModel | None = None
    role: str = "user"
    cause_by: str = ""
    sent_from: str = ""
    send_to: set[str] = Field(default_factory=lambda: {MESSAGE_ROUTE_TO_ALL})
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, content: str = "", **data: Any):
        super().__init__(content=content, **data)

    @field_validator("content", mode="before")
    @classmethod
    def _content_to_str(cls, v: Any) -> str:
        return "" if v is None else str(v)

    @field_validator("cause_by", "sent_from", mode="before")
    @classmethod
    def _to_str(cls, v: Any) -> str:
        if v is None or v == "":
            return ""
        # a role instance sends as its name; classes and actions as their class path
        name = getattr(v, "name", None) if not isinstance(v, (str, type)) and hasattr(v, "profile") else None
        return name if isinstance(name, str) and name else any_to_str(v)

    @field_validator("send_to", mode="before")
    @classmethod
    def _to_set(cls, v: Any) -> set[str]:
        result = any_to_str_set(v)
        return result or {MESSAGE_ROUTE_TO_ALL}

    @field_validator("instruct_content", mode="before")
    @classmethod
    def _load_instruct(cls, v: Any) -> Any:
        if isinstance(v, dict) and "class" in v and "value" in v:
            return _rebuild_model(v["class"], v["value"])
        return v

    @field_serializer("instruct_content")
    def _dump_instruct(self, v: BaseModel | None) -> dict[str, Any] | None:
        if v is None:
            return None
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


def _rebuild_model(class_path: str, value: dict[str, Any]) -> BaseModel:
    """Rebuild ``instruct_content``: the original class if importable, else an equivalent model."""
    module_name, _, qualname = class_path.rpartition(".")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in qualname.split("."):
            obj = getattr(obj, part)
        if isinstance(obj, type) and issubclass(obj, BaseModel):
            return obj.model_validate(value)
    except (ImportError, AttributeError, ValueError):
        pass
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
