"""Message: what roles say to each other on the environment bus."""

from __future__ import annotations

import importlib
import json
import os
import threading
import weakref
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from loguru import logger
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)

from rolecast.core.classes import current_class_path
from rolecast.core.jsonutil import check_depth, extract_json
from rolecast.core.models import Model
from rolecast.errors import DataError, OutputParseError, UsageError
from rolecast.llm.base import BaseLLM
from rolecast.runs.events import MESSAGE_ROUTE_TO_ALL

from .instruct import MAPPING_ATTR, create_instruct_value, model_from_mapping
from .message_fields import (
    FIELDS_TEMPLATE,
    NO_METADATA,
    SEND_TO_ALL,
    MetadataField,
    SharedFieldsSet,
    any_to_str,
    any_to_str_set,
    compact_fields,
    shared_fields,
    shared_send_to,
    thaw_fields,
)

#: ``any_to_str(actions.UserRequirement)``: a message's cause unless it names another
#: (memory sits below actions, so the class is named, not imported)
USER_REQUIREMENT = "actions.action.UserRequirement"
#: saved messages nest at most this deep (deeper JSON is refused before anything recursive runs)
MAX_MESSAGE_DEPTH = 200

B = TypeVar("B", bound=type[BaseModel])


# a version-4 UUID's fixed bits (RFC 4122 variant, version 4), as uuid.UUID(version=4) sets them
_UUID4_KEEP = ~((0xC000 << 48) | (0xF000 << 64))
_UUID4_SET = (0x8000 << 48) | (4 << 76)


def new_message_id() -> str:
    """A fresh message id: a random version-4 UUID as 32 hex digits, the same as ``uuid.uuid4().hex``
    (made from the same 16 random bytes without building a UUID object; every message gets one)."""
    return f"{int.from_bytes(os.urandom(16), 'big') & _UUID4_KEEP | _UUID4_SET:032x}"


def any_to_name(val: Any) -> str:
    """The last part of :func:`any_to_str`: a class's name (``"WriteCode"``); MetaGPT's ``any_to_name``."""
    return any_to_str(val).split(".")[-1]


#: per class: None when its instances have a ``profile`` (roles: they send as their name), else the
#: class path its instances send and cause as (actions); and per class given itself, its path. Asked
#: once per class, because asking a pydantic model for an attribute it lacks is slow, and every
#: message asks; and one string per class, shared by every message it causes (not a new
#: ``module.QualName`` string a message)
_INSTANCE_PATH: dict[type, str | None] = {}
_CLASS_PATH: dict[type, str] = {}


def _class_path(cls: type) -> str:
    path = _CLASS_PATH.get(cls)
    if path is None:
        path = _CLASS_PATH[cls] = any_to_str(cls)
    return path


def _sender_or_cause(v: Any) -> str:
    # a role instance sends as its name; classes and actions as their class path
    if isinstance(v, str):
        return v
    if isinstance(v, type):
        return _class_path(v)
    cls = type(v)
    if cls in _INSTANCE_PATH:
        found = _INSTANCE_PATH[cls]
    else:
        found = _INSTANCE_PATH[cls] = None if hasattr(v, "profile") else _class_path(cls)
    if found is not None:
        return found
    name = getattr(v, "name", None)
    return name if isinstance(name, str) and name else any_to_str(v)


class Message(Model):
    """One message on the bus.

    ``cause_by`` accepts an Action class, an Action instance or a string and is stored
    as a stable string; it defaults to the user's requirement
    (``"actions.action.UserRequirement"``), as in MetaGPT. ``send_to`` holds role
    names or profiles, ``{"<all>"}`` by default. A message serialises to JSON and back,
    ``instruct_content`` included.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, validate_assignment=True, defer_build=True)

    id: str = Field(default_factory=new_message_id)
    content: str = ""
    instruct_content: BaseModel | None = None
    role: str = "user"
    cause_by: str = USER_REQUIREMENT
    sent_from: str = ""
    send_to: frozenset[str] = SEND_TO_ALL
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, content: str = "", **data: Any):
        super().__init__(content=content, **data)

    @model_validator(mode="after")
    def _share_fields_set(self) -> Message:
        # the fields a message was given: one frozenset per distinct set, shared (thawed into a set
        # of its own before anything adds to it: see __setattr__, __copy__); and the field dict one
        # that shares its key table, an empty metadata shared (see memory.message_fields)
        object.__setattr__(self, "__pydantic_fields_set__", shared_fields(self.__pydantic_fields_set__))
        object.__setattr__(self, "__dict__", compact_fields(self.__dict__))
        return self

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

    @field_validator("send_to", mode="wrap")
    @classmethod
    def _to_set(cls, v: Any, handler: ValidatorFunctionWrapHandler) -> frozenset[str]:
        # the shared frozenset itself (pydantic's own frozenset validation would copy it)
        del handler
        return shared_send_to(v)

    @field_validator("instruct_content", mode="before")
    @classmethod
    def _load_instruct(cls, v: Any) -> Any:
        if isinstance(v, BaseModel):
            if not isinstance(v, InstructContent):
                register_instruct_model(type(v))  # code made it, so its class may be rebuilt later
            return v
        if isinstance(v, dict):
            if isinstance(v.get("mapping"), dict) and isinstance(v.get("value"), dict):
                # MetaGPT's form for a model made from a mapping (ActionNode): rebuilt from the mapping
                return model_from_mapping(str(v.get("class", "InstructContent")), v["mapping"]).model_validate(
                    v["value"]
                )
            if set(v) == {"class", "value"}:
                return _rebuild_model(v["class"], v["value"])
            return InstructContent.model_validate(v)  # a bare object: kept as it is, never dropped
        if v is None:
            return None
        raise ValueError(f"instruct_content must be a pydantic model or an object, not {type(v).__name__}")

    @field_serializer("instruct_content")
    def _dump_instruct(self, v: BaseModel | None) -> dict[str, Any] | None:
        if v is None:
            return None
        mapping = getattr(type(v), MAPPING_ATTR, None)
        if isinstance(mapping, dict):  # built from a mapping (ActionNode): rebuilt from it
            return {"class": type(v).__name__, "mapping": dict(mapping), "value": v.model_dump(mode="json")}
        path = v.class_path if isinstance(v, InstructContent) else any_to_str(v)
        return {"class": path, "value": v.model_dump(mode="json")}

    @field_serializer("send_to")
    def _dump_send_to(self, v: AbstractSet[str]) -> list[str]:
        return sorted(v)

    def __setattr__(self, name: str, value: Any) -> None:
        if type(self) is Message:
            # what validate_assignment does for these fields (the same normalisation), without
            # pydantic re-validating the whole message: that rebuilt the message's dict and grew every
            # readdressed message by about 1 KB (a role that addresses its posts, every turn;
            # bench/bench_scale.py), and cost every published message two validations (its sender
            # and cause, set when an action returns a Message: ~25 calls a hand-over); the
            # fields-set stays a shared one
            if name == "send_to":
                value = shared_send_to(value)
            elif name == "cause_by" and type(value) is str:
                value = value or USER_REQUIREMENT
            elif name != "sent_from" or type(value) is not str:
                if name in type(self).model_fields:
                    thaw_fields(self)  # pydantic adds the name to it
                super().__setattr__(name, value)
                return
            self.__dict__[name] = value
            fields = self.__pydantic_fields_set__
            if name not in fields:
                if type(fields) is SharedFieldsSet:
                    object.__setattr__(self, "__pydantic_fields_set__", shared_fields({*fields, name}))
                else:
                    fields.add(name)
            return
        if name in type(self).model_fields:
            thaw_fields(self)  # pydantic adds the name to it
        super().__setattr__(name, value)

    def __setstate__(self, state: dict[Any, Any]) -> None:
        # a message from a pickle (one a Ray worker sent): held as compactly as one made here
        super().__setstate__(state)
        object.__setattr__(self, "__pydantic_fields_set__", shared_fields(self.__pydantic_fields_set__))
        object.__setattr__(self, "__dict__", compact_fields(self.__dict__))

    def __copy__(self) -> Message:
        copied = super().__copy__()
        thaw_fields(copied)  # model_copy(update=...) adds to it
        return copied

    def __deepcopy__(self, memo: dict[int, Any] | None = None) -> Message:
        copied = super().__deepcopy__(memo)
        thaw_fields(copied)
        return copied

    # ------------------------------------------------------------------ helpers
    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, text: str | bytes) -> Message:
        """A message from :meth:`to_json`'s text; :class:`~rolecast.errors.DataError` if it is not one.

        ``instruct_content`` is rebuilt as its class only when that class is registered
        (see :func:`register_instruct_model`) or lives in a module the application
        allowed (:func:`allow_instruct_modules`); otherwise it becomes an
        :class:`InstructContent` holding the same values. Nothing is imported because
        the data names it.
        """
        try:
            return cls.model_validate(load_json_data(text, what="message"))
        except ValidationError as exc:
            raise DataError(f"the JSON is not a message: {exc}") from exc

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

    async def parse_resources(self, llm: BaseLLM, key_descriptions: dict[str, str] | None = None) -> dict[str, Any]:
        """Ask ``llm`` for the resources this message's text mentions (MetaGPT's ``parse_resources``).

        Returns ``{"resources": [Resource, ...], "reason": ..., <key>: ...}`` with one entry
        per key of ``key_descriptions`` (``{key: what it holds}``); ``{}`` for an empty
        message. An answer that is not that JSON object is sent back (the seam's re-ask).
        """
        if not self.content:
            return {}
        keys = dict(key_descriptions or {})
        fields = "\n".join(f'- "{k}": {v}' for k, v in keys.items())
        instructions = [
            "List every resource the original requirement mentions (files, repositories, branches, "
            "URLs, names, numbers it needs).",
            "Answer with one JSON object (in a ```json block) with these keys:\n"
            '- "resources": a list of objects, each with "resource_type" (what kind of resource), '
            '"value" (the resource, as text) and "description" (why it is needed);\n'
            + (fields + "\n" if fields else "")
            + '- "reason": why you listed these.',
        ]
        prompt = f"## Original Requirement\n```text\n{self.content}\n```\n"

        def parse(text: str) -> dict[str, Any]:
            data = extract_json(text, expect=dict)
            missing = [k for k in ("resources", *keys) if k not in data]
            if missing:
                raise OutputParseError(f"the answer lacks the keys {missing}", raw=text)
            if not isinstance(data["resources"], list):
                raise OutputParseError('"resources" must be a list of objects', raw=text)
            try:
                data["resources"] = [Resource.model_validate(r) for r in data["resources"]]
            except ValidationError as exc:
                raise OutputParseError(f"a resource is not an object with resource_type, value and description: "
                                       f"{exc}", raw=text) from exc
            return data

        return await llm.ask_valid(prompt, parse, instructions)

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


# ``message.metadata``: a dict of the message's own, made when first read (see NoMetadata)
type.__setattr__(Message, "metadata", MetadataField())

#: the fields a framework-made message is given (see :func:`plain_message`)
_PLAIN_FIELDS_SET = shared_fields({"content", "role", "cause_by", "sent_from"})


class Resource(BaseModel):
    """One resource a message mentions (:meth:`Message.parse_resources`)."""

    resource_type: str = ""
    value: str = ""
    description: str = ""

    @field_validator("resource_type", "value", "description", mode="before")
    @classmethod
    def _as_text(cls, v: Any) -> str:
        return v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)


def plain_message(content: str, role: str, cause_by: Any, sent_from: str) -> Message:
    """``Message(content=content, role=role, cause_by=cause_by, sent_from=sent_from)``, built without
    running the validators when the values are already what they would make of them (``content``,
    ``role`` and ``sent_from`` plain strings, ``cause_by`` an action or class naming a plain string):
    the same fields, defaults and set fields as the validated message. Anything else is validated.
    (An action's result becomes a message this way, every step.)"""
    plain = type(content) is str and type(role) is str and type(sent_from) is str
    if not (plain and isinstance(cause_by, (BaseModel, type))):
        return Message(content=content, role=role, cause_by=cause_by, sent_from=sent_from)
    cause = _sender_or_cause(cause_by)
    if type(cause) is not str:
        return Message(content=content, role=role, cause_by=cause_by, sent_from=sent_from)
    message = object.__new__(Message)
    fields = FIELDS_TEMPLATE.copy()  # (a dict sharing its key table: see memory.message_fields)
    fields["id"] = new_message_id()
    fields["content"] = content
    fields["role"] = role
    fields["cause_by"] = cause
    fields["sent_from"] = sent_from
    fields["send_to"] = SEND_TO_ALL
    fields["metadata"] = NO_METADATA
    object.__setattr__(message, "__dict__", fields)
    object.__setattr__(message, "__pydantic_fields_set__", _PLAIN_FIELDS_SET)
    object.__setattr__(message, "__pydantic_extra__", None)
    object.__setattr__(message, "__pydantic_private__", None)
    return message


class InstructContent(BaseModel):
    """``instruct_content`` whose class may not be rebuilt here: the same values, as extra fields.

    ``class_path`` remembers the original class, so saving the message again writes
    what was read.
    """

    model_config = ConfigDict(extra="allow", defer_build=True)
    _class_path: str = PrivateAttr(default="")

    @property
    def class_path(self) -> str:
        """The ``module.QualName`` the saved data named ('' when it named none)."""
        return self._class_path


# class path -> model class; weak, so models made on the fly (create_model) are not kept alive
_REGISTERED: weakref.WeakValueDictionary[str, type[BaseModel]] = weakref.WeakValueDictionary()
_ALLOWED_MODULES: set[str] = set()
_LOCK = threading.Lock()


def register_instruct_model(cls: B) -> B:
    """Let saved messages rebuild ``instruct_content`` as ``cls`` (usable as a class decorator).

    A class is registered automatically when a message is made with one of its
    instances in this process.
    """
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        raise UsageError(f"only pydantic models can be registered as instruct_content, not {cls!r}")
    with _LOCK:
        _REGISTERED[any_to_str(cls)] = cls
    return cls


def allow_instruct_modules(*modules: str) -> None:
    """Allow rebuilding ``instruct_content`` from pydantic models importable from these modules.

    A name allows the module and its sub-modules (``"myapp.schemas"`` allows
    ``myapp.schemas.review``). Only the application decides this; saved data never does.
    """
    with _LOCK:
        _ALLOWED_MODULES.update(m.strip(".") for m in modules if m.strip("."))


def _allowed(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in _ALLOWED_MODULES)


def _lookup_class(class_path: str) -> type[BaseModel] | None:
    """The registered (or allowed and importable) model class at ``class_path``, else None."""
    class_path = current_class_path(class_path)  # a kernel module that moved
    found = _REGISTERED.get(class_path)
    if found is not None:
        return found
    module_name, _, qualname = class_path.rpartition(".")
    if not module_name or not _allowed(module_name):
        return None
    parts = qualname.split(".")
    if any(not p.isidentifier() or p.startswith("_") for p in parts):
        return None
    try:
        obj: Any = importlib.import_module(module_name)
        for part in parts:
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        return None
    if isinstance(obj, type) and issubclass(obj, BaseModel):
        register_instruct_model(obj)
        return obj
    return None


def _rebuild_model(class_path: Any, value: Any) -> BaseModel:
    """Rebuild saved ``instruct_content``: its class if registered or allowed, else :class:`InstructContent`."""
    if not isinstance(class_path, str) or not isinstance(value, dict):
        raise ValueError("instruct_content must be {'class': 'module.Name', 'value': {...}}")
    cls = _lookup_class(class_path)
    if cls is not None:
        return cls.model_validate(value)
    generic = InstructContent.model_validate(value)
    generic._class_path = class_path
    return generic


def load_json_data(text: str | bytes, *, what: str, max_depth: int = MAX_MESSAGE_DEPTH) -> Any:
    """Parse saved JSON for ``what``, refusing nesting past ``max_depth``; :class:`DataError` on failure."""
    try:
        data = json.loads(text)
        check_depth(data, max_depth)
    except (ValueError, RecursionError, OutputParseError) as exc:
        raise DataError(f"the {what} is not valid JSON: {exc}") from exc
    return data


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


__all__ = [
    "MAX_MESSAGE_DEPTH",
    "MESSAGE_ROUTE_TO_ALL",
    "SEND_TO_ALL",
    "USER_REQUIREMENT",
    "AIMessage",
    "InstructContent",
    "Message",
    "SharedFieldsSet",
    "SystemMessage",
    "UserMessage",
    "allow_instruct_modules",
    "any_to_str",
    "any_to_str_set",
    "load_json_data",
    "new_message_id",
    "plain_message",
    "register_instruct_model",
    "shared_send_to",
]
