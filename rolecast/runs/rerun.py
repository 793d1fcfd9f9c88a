"""Edit a script, rerun it with one command: ``rolecast runs rerun RUN``.

Three pieces, each small:

* **A run remembers how it was started.** ``Team.run`` writes in its ``run_started`` event the
  command of its process (:func:`started_command`: ``sys.argv`` and the working directory) when the
  process is a script — not under pytest, in a notebook or at an interactive prompt, where running
  ``argv`` again would not run the team again.
* **The command runs it again** (:func:`rerun`), and only when the person says so: a store is data
  that someone else may have written, so the recorded command is first checked to be what rolecast
  records (:func:`check_recorded`: a Python script or a module of the recorded directory, run with
  this Python — never ``/bin/sh``, ``python -c`` or a module that is not the recorded script's), then
  shown, and run on confirmation (``confirm``: ``rolecast runs rerun`` asks, or takes ``--yes``). Then
  the parent's recorded command (or one given) runs as a child process, in the recorded directory,
  with three environment variables: ``ROLECAST_REUSE`` (the parent), ``ROLECAST_RUN_ID`` (the new
  run) and ``ROLECAST_STORE`` (the store the parent is in).
* **A team takes them, narrowly** (:func:`claim`): a ``Team`` built with none of ``reuse``, ``fork``
  or ``run_id`` takes the variables when the parent's team (its ``run_started`` ``team``) is of its
  own name, and removes ``ROLECAST_REUSE`` and ``ROLECAST_RUN_ID`` from ``os.environ`` so that no
  second team of the script, nor a process it starts, takes them too. The team then runs as
  ``Team(run_id=NEW, reuse=PARENT)``: a call the parent made (same role, action and request) is
  answered from the parent's log; every other call goes live (see :mod:`rolecast.runs.lineage`).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from loguru import logger

from ..errors import ConfigError, UnsafeCommand, UsageError
from ..observe.printable import printable
from .base import RunStore
from .events import (
    LLM_CALL,
    RUN_STARTED,
    RUN_STOPPED,
    CommandData,
    RunEvent,
    RunStoppedData,
    command_argv,
    run_started,
)
from .ids import check_run_id
from .inspection import call_counts, no_run
from .lineage import Lineage, check_lineage
from .log import new_run_id
from .store import open_store

#: the run a rerun reuses, the rerun's id, and the store both are in
REUSE_VARIABLE = "ROLECAST_REUSE"
RUN_ID_VARIABLE = "ROLECAST_RUN_ID"
STORE_VARIABLE = "ROLECAST_STORE"

#: programs that run other code (tests, notebooks, debuggers): ``argv`` names them, not the team's script
_LAUNCHERS = frozenset({
    "pytest", "py.test", "_pytest", "ipykernel_launcher", "ipykernel", "ipython", "IPython", "jupyter",
    "pydevd", "debugpy", "pdb", "bdb",
})


def started_command() -> CommandData | None:
    """How this process was started, when it is a script a rerun can start again: ``{"argv": sys.argv,
    "cwd": os.getcwd()}`` (and ``"module"`` for ``python -m MODULE``); None at an interactive prompt,
    for ``python -c``, and under a launcher (pytest, a Jupyter kernel, a debugger)."""
    argv = [str(a) for a in sys.argv]
    if not argv or argv[0] in ("", "-c", "-") or hasattr(sys, "ps1") or not os.path.isfile(argv[0]):
        return None
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    module = str(getattr(spec, "name", "") or "")  # "" for ``python script.py``
    if {Path(argv[0]).stem, Path(argv[0]).name, module.split(".")[0]} & _LAUNCHERS:
        return None
    try:
        command: CommandData = {"argv": argv, "cwd": os.getcwd()}
    except OSError:  # (the working directory was deleted)
        return None
    if module:
        command["module"] = module.removesuffix(".__main__")
    return command


def recorded_command(store: RunStore, run_id: str) -> CommandData | None:
    """The command that last started (or resumed) ``run_id``, if it recorded one."""
    found = None
    for event in store.events(run_id, [RUN_STARTED]):
        command = run_started(event).get("command")
        if command and command.get("argv"):
            found = command
    return found


#: a module name as ``python -m`` takes it: dotted identifiers
_MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def check_recorded(command: Any) -> tuple[list[str], str]:
    """The command line and directory that run a *recorded* command again, once it is checked to have
    the shape :func:`started_command` records; else :class:`~rolecast.errors.UnsafeCommand`.

    A store is data, and anyone who can write to it can write a ``run_started`` event. So: ``argv`` is a
    list of strings whose first is a ``.py`` file that exists (relative to ``cwd``, an absolute
    directory that exists) and is no option (``-c…``); with a ``module``, the module is a dotted name
    whose file is that very file, under ``cwd`` (``python -m`` run in ``cwd`` imports it from there),
    and not the standard library's. What is run is this Python (``sys.executable``) on that file —
    never ``argv[0]`` itself."""
    if not isinstance(command, dict):
        raise UnsafeCommand(f"the recorded command is not a command rolecast records: {command!r}")
    argv, cwd, module = command.get("argv"), command.get("cwd"), command.get("module")
    if not isinstance(argv, list) or not argv or not all(isinstance(a, str) and "\0" not in a for a in argv):
        raise UnsafeCommand(f"the recorded command's argv is not a list of arguments: {argv!r}")
    if not isinstance(cwd, str) or not os.path.isabs(cwd) or not os.path.isdir(cwd):
        raise UnsafeCommand(f"the recorded command's directory {cwd!r} is not an existing absolute directory")
    script = argv[0]
    where = Path(cwd, script).resolve()
    if script.startswith("-") or not script.endswith(".py") or not where.is_file():
        raise UnsafeCommand(f"the recorded command {shlex.join(argv)!r} does not run a Python script that is "
                            "there (rolecast records a .py file): not run")
    if module is None:
        return [sys.executable, *argv], cwd
    if not isinstance(module, str) or not _MODULE.fullmatch(module) or module.split(".")[0] in sys.stdlib_module_names:
        raise UnsafeCommand(f"the recorded module {module!r} is not a module of the run's own: not run")
    base = Path(cwd).resolve().joinpath(*module.split("."))
    if where not in (base.with_name(base.name + ".py"), base / "__main__.py"):
        raise UnsafeCommand(f"the recorded module {module!r} is not the recorded script {script!r} (under {cwd}): "
                            "not run")
    return [sys.executable, "-m", module, *argv[1:]], cwd


def shown(argv: list[str], cwd: str) -> str:
    """A command as a person reads it before running it: shell-quoted, every control character escaped."""
    return f"{printable(shlex.join(argv))}  (in {printable(cwd)})"


# ---------------------------------------------------------------- the team's side
def claim(team: str, store: Any) -> tuple[str | None, str] | None:
    """``(parent, new run id)`` when this process is a rerun (``$ROLECAST_REUSE``) of a run of a team
    named ``team`` that ``store`` holds; ``(None, run id)`` when it continues a run of such a team that
    ``store`` holds (``$ROLECAST_RUN_ID`` alone: ``rolecast runs continue``, a fork going on) — the
    variables then leave ``os.environ``; else None.

    ``store`` is the team's store as it was given (a path, a URL, a store). A team whose store does not
    hold the run, or whose run was another team's, leaves the variables to the next team."""
    parent = os.environ.get(REUSE_VARIABLE, "").strip()
    new = os.environ.get(RUN_ID_VARIABLE, "").strip()
    if not (parent or new) or store is None:
        return None
    for name, value in ((REUSE_VARIABLE, parent), (RUN_ID_VARIABLE, new)):
        if value:
            try:
                check_run_id(value)
            except UsageError as exc:
                raise UsageError(f"${name}: {exc}") from None
    asked = parent or new  # the run whose team must be this one: the rerun's parent, or the run to go on with
    started = _started_event(store, asked)
    if started is None:
        logger.debug("{} is not in this team's store {}: left for another team", asked, store)
        return None
    if run_started(started).get("team") != team:
        logger.debug("{} was run by a team {!r}, not {!r}: left for another team", asked,
                     run_started(started).get("team"), team)
        return None
    os.environ.pop(REUSE_VARIABLE, None)
    os.environ.pop(RUN_ID_VARIABLE, None)
    if not parent:
        logger.info("this {} goes on with run {} ({})", team, new, RUN_ID_VARIABLE)
        return None, new
    new = new or new_run_id()
    logger.info("this {} reruns run {} as run {} ({}): what did not change is answered from its log",
                team, parent, new, REUSE_VARIABLE)
    return parent, new


def _started_event(store: Any, run_id: str) -> RunEvent | None:
    """The first ``run_started`` of ``run_id`` in ``store`` (a store, or where one is: opened read-only)."""
    given = isinstance(store, RunStore)
    try:
        opened = store if given else open_store(store, read_only=True)
    except ConfigError:  # (no store there yet: it cannot hold the run)
        return None
    assert opened is not None
    try:
        return next(opened.events(run_id, [RUN_STARTED]), None)
    finally:
        if not given:
            opened.close()


# ---------------------------------------------------------------- the command's side
@dataclass(frozen=True)
class Rerun:
    """What :func:`rerun` did: the child's exit status, the new run, and its calls (from the new
    run's ``run_stopped``; None when the command made no such run)."""

    status: int
    run_id: str
    parent: str
    stopped: RunStoppedData | None

    def summary(self) -> str:
        """One line: the new run, its live and reused model calls, and what the reused ones saved."""
        what = f"rerun of {self.parent}" if self.parent else "went on"
        if self.stopped is None:
            return f"run {self.run_id} ({what}) was not made"
        s = self.stopped
        stop = "" if self.parent else f" stopped: {printable(s.get('reason', '?'))};"
        return (f"run {self.run_id} ({what}):{stop} model calls: {s.get('live_calls', 0)} live, "
                f"{s.get('reused_calls', 0)} reused (saved ${s.get('saved_cost', 0.0):.6f})")


def rerun(store: RunStore, where: str, parent: str, run_id: str | None = None,
          command: list[str] | None = None, *, confirm: bool | Callable[[str], bool] = False) -> Rerun:
    """Run ``parent``'s recorded command again (``command``, when given, instead: run in this
    directory) as a rerun reusing ``parent``'s answers, as run ``run_id`` (a fresh id by default),
    and wait for it. ``store`` holds ``parent``; ``where`` is its address as given (a path or a URL),
    passed on to the child. A parent not in the store, or with no recorded command when none is given,
    is a :class:`UsageError`; so is a ``run_id`` that names a run of another origin.

    A recorded command is checked (:func:`check_recorded`) and runs only when ``confirm`` is True or,
    a function, returns True for the command as shown (:func:`shown`); else it is a
    :class:`UsageError` that shows it. A ``command`` given is the caller's own and runs as given."""
    if not store.has_run(check_run_id(parent)):
        raise no_run(store, parent)  # (the error every runs command gives)
    new = check_run_id(run_id) if run_id else new_run_id()
    if new == parent:
        raise UsageError("a rerun needs a run id of its own: the parent is only read")
    check_lineage(store, new, Lineage("reuse", parent))  # (an existing rerun of parent is resumed)
    if command:
        argv, cwd = command_argv({"argv": list(command)}, sys.executable), os.getcwd()
    else:
        argv, cwd = confirmed(store, parent, confirm, f"rolecast runs rerun {parent}")
    return _run_child(store, where, parent, new, argv, cwd)


def go_on(store: RunStore, where: str, run_id: str, *, confirm: bool | Callable[[str], bool] = False) -> Rerun:
    """Let run ``run_id`` (a fork, a run that stopped or waits) go on: its recorded command (a fork has
    its parent's) runs again — checked, shown and confirmed as for :func:`rerun` — with
    ``$ROLECAST_RUN_ID`` naming it, which the first team of its class takes (:func:`claim`): the team
    runs as ``Team(run_id=run_id)``, answering the rounds the log holds from it and going on live."""
    if not store.has_run(check_run_id(run_id)):
        raise no_run(store, run_id)
    argv, cwd = confirmed(store, run_id, confirm, f"rolecast runs continue {run_id}")
    shared = store.shared()
    env = {**os.environ, RUN_ID_VARIABLE: run_id, STORE_VARIABLE: shared[1] if isinstance(shared, tuple) else where}
    env.pop(REUSE_VARIABLE, None)
    status = _wait(argv, cwd, env)
    return Rerun(status, run_id, "", _stopped(store, run_id))


def confirmed(store: RunStore, parent: str, confirm: bool | Callable[[str], bool], how: str) -> tuple[list[str], str]:
    """``parent``'s recorded command, checked, shown and confirmed (see :func:`rerun`): its argv and
    directory. ``how`` is the command a person types to run it (for the messages)."""
    recorded = recorded_command(store, parent)
    if recorded is None:
        raise UsageError(
            f"run {parent!r} recorded no command to run again (it was not started by a script: from a "
            f"notebook, pytest or a prompt): pass the command after --, such as "
            f"'{how} -- python my_team.py'")
    cwd = recorded.get("cwd")
    if isinstance(cwd, str) and os.path.isabs(cwd) and not os.path.isdir(cwd):
        raise UsageError(f"run {parent!r} was started in {cwd}, which is gone: pass the command after --")
    argv, cwd = check_recorded(recorded)
    text = shown(argv, cwd)
    if confirm is True or (callable(confirm) and confirm(text)):
        return argv, cwd
    raise UsageError(f"run {parent!r} recorded the command {text}; a run store is data anyone who writes to it "
                     f"can change, so it runs only when confirmed: read it, then run '{how} --yes' "
                     f"(or pass your own command after --)")


def _run_child(store: RunStore, where: str, parent: str, new: str, argv: list[str], cwd: str) -> Rerun:
    """Run ``argv`` in ``cwd`` as run ``new`` reusing ``parent`` (the three variables set), and wait."""
    shared = store.shared()  # (a SQLite file as an absolute path: the child runs in another directory)
    env = {**os.environ, REUSE_VARIABLE: parent, RUN_ID_VARIABLE: new,
           STORE_VARIABLE: shared[1] if isinstance(shared, tuple) else where}
    logger.debug("rerun of {} as {}: {} (in {})", parent, new, argv, cwd)
    return Rerun(_wait(argv, cwd, env), new, parent, _stopped(store, new))


def _wait(argv: list[str], cwd: str, env: dict[str, str]) -> int:
    """Run ``argv`` in ``cwd`` with ``env`` and wait; its exit status (a signal as a shell says it)."""
    try:
        child = subprocess.Popen(argv, cwd=cwd, env=env)
    except OSError as exc:
        raise UsageError(f"cannot run {argv[0]!r}: {exc}") from exc
    with child:
        try:
            status = child.wait()
        except KeyboardInterrupt:  # the child got the interrupt too: let it save its run and stop
            status = child.wait()
    if status < 0:  # killed by a signal, as a shell says it
        status = 128 - status
    return status


def _stopped(store: RunStore, run_id: str) -> RunStoppedData | None:
    """The last ``run_stopped`` of ``run_id``; for a run that never stopped (killed), its calls counted
    from its events; None when there is no such run."""
    stopped = None
    for event in store.events(run_id, [RUN_STOPPED]):
        stopped = event.data
    if stopped is not None:
        return cast(RunStoppedData, stopped)
    calls = list(store.events(run_id, [LLM_CALL]))
    if not calls and not store.has_run(run_id):
        return None
    live, reused, saved = call_counts(calls)
    return {"reason": "did not stop", "live_calls": live, "reused_calls": reused, "saved_cost": saved}


__all__ = [
    "REUSE_VARIABLE",
    "RUN_ID_VARIABLE",
    "STORE_VARIABLE",
    "Rerun",
    "check_recorded",
    "claim",
    "confirmed",
    "go_on",
    "recorded_command",
    "rerun",
    "shown",
    "started_command",
]
