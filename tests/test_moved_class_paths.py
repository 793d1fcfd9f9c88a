"""A run or team saved before the kernel moved into sub-packages names classes by their old paths."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from memory import Message
from memory.message import allow_instruct_modules
from rolecast.core.classes import MOVED_MODULES, class_path, current_class_path, loaded_subclass
from rolecast.core.models import Model
from rolecast.core.settings import LLMSettings
from rolecast.errors import UsageError


@pytest.mark.parametrize(("old", "new"), [
    ("rolecast.approval.Thing", "rolecast.control.approval.Thing"),
    ("rolecast.classes.Thing", "rolecast.core.classes.Thing"),
    ("rolecast.config.Thing", "rolecast.core.config.Thing"),
])
def test_an_old_path_reads_as_the_new_one(old, new):
    assert current_class_path(old) == new


def test_a_path_of_a_module_that_did_not_move_is_unchanged():
    assert current_class_path("myapp.roles.Writer") == "myapp.roles.Writer"
    assert current_class_path("rolecast.llm.local.provider.LocalLLM") == "rolecast.llm.local.provider.LocalLLM"
    assert current_class_path("rolecast.llm.local.LocalLLM") == "rolecast.llm.local.provider.LocalLLM"
    assert current_class_path("rolecast.errors.UsageError") == "rolecast.errors.UsageError"


def test_a_class_saved_under_its_old_module_path_restores():
    old = next(o for o, n in MOVED_MODULES.items() if n == "rolecast.core.models")
    assert loaded_subclass(BaseModel, f"{old}.Model") is Model
    assert class_path(Model) == "rolecast.core.models.Model"


def test_a_message_saved_with_an_old_instruct_content_path_rebuilds_its_class():
    allow_instruct_modules("rolecast.core.settings")
    old = '{"instruct_content": {"class": "rolecast.settings.LLMSettings", "value": {}}}'
    assert type(Message.from_json(old).instruct_content) is LLMSettings


def test_an_unknown_old_looking_path_is_still_refused():
    with pytest.raises(UsageError):
        loaded_subclass(BaseModel, "rolecast.models.NoSuchModel")
