"""Saving a pydantic model to a JSON file and reading it back: MetaGPT's ``SerializationMixin``.

A model that mixes in :class:`SerializationMixin` gets ``serialize(path)`` (its
``model_dump()`` written as JSON, with ``__module_class_name`` naming its class) and the
class method ``deserialize(path)``; without a path, the file is
``SERDESER_PATH / "<ClassName>.json"`` (``get_serialization_path``). The class key is
MetaGPT's, so files written by either read in both.

Reading never imports a module because a file names it: a dump whose
``__module_class_name`` names a *loaded* subclass of the class asked for comes back as
that subclass (:func:`rolecast.core.classes.loaded_subclass`); any other path is a
:class:`~rolecast.errors.UsageError`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import (
    BaseModel,
    SerializerFunctionWrapHandler,
    ValidatorFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic_core import to_jsonable_python
from typing_extensions import Self

from ..errors import DataError
from .classes import class_path, loaded_subclass
from .jsonutil import MAX_JSON_DEPTH, check_depth

#: the key under which a dump names the class it came from (MetaGPT's; rolecast's older dumps said ``class_path``)
CLASS_KEY = "__module_class_name"
#: rolecast's key before it wrote MetaGPT's (still read)
OLD_CLASS_KEY = "class_path"

#: where ``serialize()`` writes when given no path (MetaGPT's ``SERDESER_PATH``): ``$ROLECAST_SERDESER_PATH``
#: or ``./.rolecast/storage``, beside the run store
SERDESER_PATH = Path(os.environ.get("ROLECAST_SERDESER_PATH", Path.cwd() / ".rolecast" / "storage"))

M = TypeVar("M", bound=BaseModel)


def write_json_file(path: str | os.PathLike[str], data: Any, encoding: str = "utf-8", indent: int = 4) -> None:
    """Write ``data`` as JSON to ``path`` (its folder made if needed), atomically (MetaGPT's helper)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    # sets, models, paths and enums as pydantic writes them in JSON mode
    tmp.write_text(json.dumps(data, ensure_ascii=False, indent=indent, default=to_jsonable_python),
                   encoding=encoding)
    tmp.replace(target)


def read_json_file(path: str | os.PathLike[str], encoding: str = "utf-8") -> Any:
    """The JSON in ``path``; :class:`~rolecast.errors.DataError` if it is missing, not JSON, or nests too deep."""
    target = Path(path)
    try:
        data = json.loads(target.read_text(encoding=encoding))
        check_depth(data, MAX_JSON_DEPTH)
    except FileNotFoundError:
        raise DataError(f"no such file: {target}") from None
    except (OSError, ValueError, RecursionError) as exc:
        raise DataError(f"{target} cannot be read as JSON: {exc}") from exc
    return data


def class_named(base: type[M], data: Any) -> type[M]:
    """The class a dump names (either key), among ``base`` and its loaded subclasses; ``base`` if it names none."""
    if isinstance(data, dict):
        path = data.get(CLASS_KEY) or data.get(OLD_CLASS_KEY)
        if isinstance(path, str) and path != class_path(base):
            return loaded_subclass(base, path)
    return base


def without_class_key(data: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k not in (CLASS_KEY, OLD_CLASS_KEY)}


class SerializationMixin(BaseModel):
    """``serialize(path)`` / ``deserialize(path)`` for a pydantic model (MetaGPT's mixin).

    Every dump carries ``__module_class_name`` (the model's class path), and validating
    a dump that names a loaded subclass of the class asked for builds that subclass, so
    a field typed with a base class comes back as the subclass that was saved.
    """

    @model_serializer(mode="wrap")
    def _dump_with_class(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        if isinstance(data, dict):
            data[CLASS_KEY] = class_path(self)
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _as_named_class(cls, value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        if isinstance(value, dict) and (CLASS_KEY in value or OLD_CLASS_KEY in value):
            target = class_named(cls, value)
            data = without_class_key(value)
            return handler(data) if target is cls else target.model_validate(data)
        return handler(value)

    def serialize(self, file_path: str | os.PathLike[str] | None = None) -> str | os.PathLike[str]:
        """Write :meth:`model_dump` as JSON to ``file_path`` (default :meth:`get_serialization_path`)."""
        path = file_path if file_path is not None else self.get_serialization_path()
        write_json_file(path, self.model_dump())
        return path

    @classmethod
    def deserialize(cls, file_path: str | os.PathLike[str] | None = None) -> Self:
        """The model saved at ``file_path`` (default :meth:`get_serialization_path`), of the class it names."""
        path = file_path if file_path is not None else cls.get_serialization_path()
        data = read_json_file(path)
        if not isinstance(data, dict):
            raise DataError(f"{path} holds {type(data).__name__}, not the fields of a {cls.__name__}")
        return class_named(cls, data)(**without_class_key(data))

    @classmethod
    def get_serialization_path(cls) -> str:
        """``SERDESER_PATH / "<ClassName>.json"``: where :meth:`serialize` writes by default."""
        return str(SERDESER_PATH / f"{cls.__qualname__}.json")


__all__ = [
    "CLASS_KEY",
    "SERDESER_PATH",
    "SerializationMixin",
    "class_named",
    "read_json_file",
    "without_class_key",
    "write_json_file",
]
