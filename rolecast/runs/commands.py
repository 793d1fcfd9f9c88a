"""``rolecast runs …``: the command line of the runs package (``rolecast.cli`` hands it the arguments).

    rolecast runs list                        the runs, newest first (with each one's origin)
    rolecast runs show RUN [--calls]          a run's timeline; a fork's or rerun's origin and savings;
                                              --calls: each model call's messages and settings
    rolecast runs graph RUN                   who said what to whom (--format mermaid|dot)
    rolecast runs export RUN                  the run's events as JSON lines
    rolecast runs fork RUN --at ROUND [--run-id NEW]
                                              a new run whose rounds 1 … ROUND are RUN's
    rolecast runs rerun RUN [--run-id NEW] [--yes] [-- CMD ARGS…]
                                              run RUN's script again (or CMD), reusing RUN's answers
                                              to the calls that did not change (rolecast.runs.rerun);
                                              the recorded command is shown and runs once confirmed
    rolecast runs continue RUN [--yes]        let RUN (a fork, a run that stopped or waits) go on: its recorded
                                              command runs again as RUN (shown, run once confirmed)
    rolecast runs approvals RUN               the run's deferred approvals, answered or pending
    rolecast runs approve RUN [ID]            answer a deferred approval: run the call as asked
    rolecast runs reject RUN ID --why TEXT    … do not run it (the agent is told why)
    rolecast runs edit RUN ID --args JSON     … run it with these arguments (checked against the tool's schema)
    rolecast runs delete RUN                  delete a run (not one a live process holds)
    rolecast runs prune --keep N | --older-than 30d
                                              delete old runs, then give the space back (VACUUM)

Each takes ``--store PATH|URL`` (a SQLite file or a ``postgresql://`` URL; default
``$ROLECAST_STORE`` or ``./.rolecast/runs.db``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from ..errors import UsageError
from ..observe.printable import printable
from . import inspection
from .approvals import approvals, decide, json_arguments
from .lineage import fork_run
from .rerun import go_on, rerun
from .store import DEFAULT_STORE_PATH, open_store

#: the commands that only read: they open the store read-only (a store on read-only media works)
READERS = frozenset({"list", "show", "graph", "export", "approvals", "rerun", "continue"})  # (their child writes)
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def duration(text: str) -> float:
    """Seconds from ``30d``, ``12h``, ``90m``, ``45s``, ``2w`` (or a plain number of days)."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw]?)\s*", text or "")
    if match is None:
        raise UsageError(f"a duration such as 30d, 12h or 90m, not {text!r}")
    return float(match.group(1)) * _UNITS[match.group(2) or "d"]


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``rolecast runs rerun RUN … -- CMD ARGS…``: the arguments before the first ``--`` and the
    command after it (None when this is no rerun, or has no ``--``). argparse would take the
    command's own options for the rerun's, and drops every ``--`` in it."""
    if "--" not in argv:
        return argv, None
    cut = argv.index("--")
    head = argv[:cut]
    if "runs" not in head or "rerun" not in head[head.index("runs"):]:
        return argv, None
    return head, argv[cut + 1:]


def add_parser(sub: Any) -> None:
    """The ``runs`` command and its subcommands, on ``rolecast``'s subparsers."""
    runs = sub.add_parser("runs", help="inspect, fork, answer and prune the runs in the run store")
    runs_sub = runs.add_subparsers(dest="runs_command", required=True, metavar="SUBCOMMAND", title="subcommands")
    helps = {
        "list": "list the runs", "show": "a run's timeline", "graph": "the message flow of a run",
        "export": "a run's events as JSON lines", "fork": "a new run whose first rounds are another's",
        "rerun": "run a run's script again, paying only for the calls that changed",
        "continue": "let a run (a fork) go on: run its recorded command again as that run",
        "approvals": "a run's deferred approvals", "approve": "approve a deferred call",
        "reject": "reject a deferred call", "edit": "run a deferred call with other arguments",
        "delete": "delete a run", "prune": "delete old runs and give the space back",
    }
    for name, text in helps.items():
        cmd = runs_sub.add_parser(name, help=text)
        cmd.add_argument("--store", metavar="PATH|URL",
                         help="the run store: a SQLite file or a postgresql:// URL "
                              "(default: $ROLECAST_STORE or ./.rolecast/runs.db)")
        if name not in ("list", "prune"):
            cmd.add_argument("run_id", metavar="RUN", help="the run's id (rolecast runs list shows them)")
        if name == "show":
            cmd.add_argument("--calls", action="store_true",
                             help="each model call's full request under it: every message, the settings")
        if name == "graph":
            cmd.add_argument("--format", choices=["mermaid", "dot"], default="mermaid",
                             help="the graph's language (default: mermaid)")
        elif name == "fork":
            cmd.add_argument("--at", type=int, required=True, metavar="ROUND", help="the last round taken over")
            cmd.add_argument("--run-id", dest="new_run_id", help="the fork's run id (default: a fresh one)")
        elif name == "rerun":
            cmd.add_argument("--run-id", dest="new_run_id", help="the rerun's run id (default: a fresh one)")
            cmd.add_argument("--yes", "-y", action="store_true",
                             help="run the recorded command without asking (it is shown first; read it)")
            # (what follows `--` on the command line: split off by split_command, argparse never sees it)
            cmd.set_defaults(command_line=[])
            cmd.epilog = ("-- CMD ARGS...: the command to run instead of the one RUN recorded (a run started "
                          "from a notebook or pytest records none); a .py file runs under this Python")
        elif name == "continue":
            cmd.add_argument("--yes", "-y", action="store_true",
                             help="run the recorded command without asking (it is shown first; read it)")
        elif name == "approve":
            cmd.add_argument("approval_id", nargs="?", help="which approval (default: the only pending one)")
        elif name in ("reject", "edit"):
            cmd.add_argument("approval_id", help="which approval (rolecast runs approvals RUN lists them)")
            if name == "reject":
                cmd.add_argument("--why", default="", help="the reason the agent is told")
            else:
                cmd.add_argument("--args", required=True, dest="arguments", metavar="JSON",
                                 help="the call's arguments, a JSON object")
        elif name == "prune":
            cmd.add_argument("--keep", type=int, metavar="N", help="keep the newest N runs")
            cmd.add_argument("--older-than", dest="older_than", metavar="AGE",
                             help="delete runs started more than AGE ago (30d, 12h, 90m)")


def run(args: argparse.Namespace) -> int:
    """Carry out ``rolecast runs …``; the exit status."""
    where = args.store or os.environ.get("ROLECAST_STORE") or str(DEFAULT_STORE_PATH)
    command = args.runs_command
    store = open_store(where, read_only=True)  # (a store that is not there is a ConfigError, not a new one)
    assert store is not None
    if command not in READERS:  # fork, approve, delete … write: the store opened for writing
        store.close()
        store = open_store(where)
        assert store is not None
    try:
        if command == "list":
            print(inspection.list_runs(store))
        elif command == "show":
            print(inspection.show_run(store, args.run_id, calls=args.calls))
        elif command == "graph":
            print(inspection.graph_run(store, args.run_id, args.format))
        elif command == "export":
            for line in inspection.export_run(store, args.run_id):
                print(line)
        elif command == "fork":
            new = fork_run(store, args.run_id, args.at, args.new_run_id)
            print(new)
            print(f"run {new} is a fork of {args.run_id} at round {args.at}: 'rolecast runs continue {new}' runs "
                  f"its recorded command to go on from there (or run your script with Team(run_id={new!r}))",
                  file=sys.stderr)
        elif command == "rerun":
            done = rerun(store, where, args.run_id, args.new_run_id, args.command_line,
                         confirm=confirmation(args.yes))
            if done.stopped is None:
                print(f"rolecast: the command made no run {done.run_id}: no team in it took the rerun of "
                      f"{args.run_id} (the first Team of the parent's class, built with no run_id, reuse or fork "
                      f"and using the store {where}, takes it); exit status {done.status}", file=sys.stderr)
                return done.status or 1
            print(done.summary())
            return done.status
        elif command == "continue":
            done = go_on(store, where, args.run_id, confirm=confirmation(args.yes))
            print(done.summary())
            return done.status
        elif command == "approvals":
            print(_approvals_text(store, args.run_id))
        elif command in ("approve", "reject", "edit"):
            verdict = command
            arguments = json_arguments(args.arguments) if command == "edit" else None
            decision = decide(store, args.run_id, args.approval_id, verdict, arguments=arguments,
                              reason=getattr(args, "why", ""), by=f"rolecast runs {command}")
            print(f"approval {printable(decision['id'])} of run {printable(args.run_id)}: {verdict}; run the "
                  f"script again with run_id={printable(repr(args.run_id))} to go on")
        elif command == "delete":
            count = store.delete(args.run_id)
            if not count:
                raise UsageError(f"no run {args.run_id!r} in the store")
            print(f"deleted run {args.run_id} ({count} events)")
        elif command == "prune":
            before = store.size()
            older = duration(args.older_than) if args.older_than is not None else None
            deleted = store.prune(keep=args.keep, older_than=older)
            after = store.size()
            sizes = f"; the store {_mib(before)} -> {_mib(after)}" if before is not None and after is not None else ""
            print(f"deleted {len(deleted)} run(s){sizes}")
    finally:
        store.close()
    return 0


def confirmation(yes: bool) -> Any:
    """What confirms a recorded command: ``--yes``; else the person at the terminal, asked (no terminal:
    nobody, and the command is refused with a message that shows it)."""
    if yes:
        return True

    def ask(shown: str) -> bool:
        if not sys.stdin.isatty():
            return False
        print(f"the run recorded this command: {shown}", file=sys.stderr)
        try:
            answer = input("run it? [y/N] ")
        except EOFError:
            return False
        return answer.strip().lower() in ("y", "yes")

    return ask


def _mib(size: int | None) -> str:
    return "?" if size is None else f"{size / 2**20:.2f} MiB"


def _approvals_text(store: Any, run_id: str) -> str:
    found = approvals(store, run_id)
    if not found:
        return f"run {run_id} asked no approval"
    lines = []
    for a in found:  # (every field is the store's: escaped, as runs show escapes it)
        decision = a["decision"]
        state = "pending" if decision is None else str(decision.get("verdict", "?"))
        arguments = json.dumps(a.get("arguments", {}), ensure_ascii=False, default=str)
        lines.append(" ".join((f"{printable(a['id']):<16}", f"{printable(state):<8}",
                               f"{printable(a.get('role', ''))}: {printable(a.get('kind', ''))}",
                               printable(a.get("name", "")), printable(arguments))))
    return "\n".join(lines)


__all__ = ["add_parser", "confirmation", "duration", "run", "split_command"]
