"""The paths and routing names MetaGPT scripts import from ``metagpt.const``.

``ROLECAST_ROOT`` is the project's root (MetaGPT's ``METAGPT_ROOT``, by the same rule):
``$ROLECAST_PROJECT_ROOT`` when set, else the source tree rolecast runs from when it is one
(a checkout: the folder holding ``pyproject.toml`` beside the ``rolecast`` package), else the
current directory. Its ``workspace`` folder is the default of ``config.workspace.path`` and its
``data`` folder holds what the tutorials write (``TUTORIAL_PATH``), as in MetaGPT.
"""

from __future__ import annotations

from .core.config import project_root
from .core.serialization import SERDESER_PATH
from .runs.events import MESSAGE_ROUTE_TO_ALL

ROLECAST_ROOT = project_root()
DEFAULT_WORKSPACE_ROOT = ROLECAST_ROOT / "workspace"
EXAMPLE_PATH = ROLECAST_ROOT / "examples"
DATA_PATH = ROLECAST_ROOT / "data"
TUTORIAL_PATH = DATA_PATH / "tutorial_docx"

#: ``send_to`` of a message meant for no role: it is recorded in the history and delivered to nobody
#: (MetaGPT's name; a role's ``_act`` that published its work itself returns one)
MESSAGE_ROUTE_TO_NONE = "<none>"

__all__ = [
    "DATA_PATH",
    "DEFAULT_WORKSPACE_ROOT",
    "EXAMPLE_PATH",
    "MESSAGE_ROUTE_TO_ALL",
    "MESSAGE_ROUTE_TO_NONE",
    "ROLECAST_ROOT",
    "SERDESER_PATH",
    "TUTORIAL_PATH",
    "project_root",
]
