"""Run the examples and write the README's table of what they do: the table cannot drift.

    python bench/examples_table.py                     # run every example, print the table
    python bench/examples_table.py --write             # ... and put it in docs/guides/embedded-model.md
    python bench/examples_table.py --only debate.py    # one example (repeat --only for more)
    python bench/examples_table.py --scripted          # on the canned models (checks this script)

Each example runs as a newcomer starts it — ``python examples/<name>.py`` with its default
idea, in a fresh process, on the model this machine is configured for (the embedded
SmolLM2 without an API key) — with its run logged to a throwaway store. For each the table
says: the wall time (start to exit, interpreter start and model load included), the model
calls the run store holds, the exit status, and what the run ended with, as the example
printed it (its last line of output, or its ``error: …`` line). Nothing in the table is
written by hand: rerun this after a change to the examples, the framework or the model.

The model calls are counted where every call is paid for, in the process itself: a
``sitecustomize`` module on the example's path (it changes nothing the example does) adds
one for each answered call a :class:`~rolecast.accounting.cost.CostManager` counts, and
writes the sum when the process exits, so an example that runs no team (and so logs no
run) has its calls counted too. The examples run without ``--no-console``, as a newcomer
starts them: the line shown is the one a newcomer sees last.

``--write`` replaces what lies between ``<!-- examples-table:begin -->`` and
``<!-- examples-table:end -->`` in the README (``--readme`` names another file).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- examples-table:begin -->", "<!-- examples-table:end -->"

#: the README's examples, in its order, with the arguments a newcomer gives (none: the default idea)
EXAMPLES: list[tuple[str, list[str]]] = [
    ("build_customized_multi_agents.py", []),
    ("debate.py", []),
    ("build_customized_agent.py", []),
    ("react_agent.py", []),
    ("stepwise_math.py", []),
    ("sequential_planner.py", []),
    ("data_plan.py", []),
    ("simulation.py", []),
]
#: examples that take ``--scripted`` (a canned model)
SCRIPTABLE = {"build_customized_multi_agents.py", "debate.py", "build_customized_agent.py",
              "sequential_planner.py", "data_plan.py", "simulation.py"}

#: put on the example's path: counts the answered model calls, writes the sum at exit
COUNTER = """
import atexit, os
from rolecast.accounting import cost as _cost

_calls = [0]
_count = _cost.CostManager._count

def _counted(self, model, role, prompt_tokens, completion_tokens, cost, failed):
    if not failed:
        _calls[0] += 1
    return _count(self, model, role, prompt_tokens, completion_tokens, cost, failed)

_cost.CostManager._count = _counted
atexit.register(lambda: open(os.environ["ROLECAST_EXAMPLES_TABLE_CALLS"], "w").write(str(_calls[0])))
"""


@dataclass
class Row:
    example: str
    seconds: float
    calls: int | None
    status: int
    outcome: str

    def markdown(self) -> str:
        calls = "?" if self.calls is None else str(self.calls)
        status = "0" if self.status == 0 else f"**{self.status}**"
        return f"| `{self.example}` | {self.seconds:.0f} s | {calls} | {status} | {_cell(self.outcome)} |"


def _cell(text: str) -> str:
    """One table cell: no pipes, no newlines, no raw control characters, at most 200 characters."""
    text = re.sub(r"[\x00-\x1f\x7f]", " ", text).replace("|", "\\|").strip()
    return text if len(text) <= 200 else text[:199] + "…"


def outcome(stdout: str, stderr: str, status: int) -> str:
    """What the run ended with: its ``error: …`` line when it failed, else its last line of output."""
    if status != 0:
        errors = [line for line in stderr.splitlines() if line.startswith("error:")]
        if errors:
            return errors[-1]
        tail = [line for line in stderr.splitlines() if line.strip()]
        return tail[-1] if tail else f"exit status {status}, no output"
    lines = [line for line in stdout.splitlines() if line.strip() and not set(line.strip()) <= set("─-=")]
    return lines[-1] if lines else "(no output)"


def model_calls(store: Path) -> int | None:
    """The model calls of every run in ``store`` (the example's runs), or None without a store."""
    if not store.exists():
        return None
    from rolecast.runs import LLM_CALL, open_store

    with open_store(store, read_only=True) as runs:
        return sum(1 for info in runs.runs() for _ in runs.events(info.run_id, [LLM_CALL]))


def counted_calls(path: Path) -> int | None:
    """The calls the example's ``sitecustomize`` counted, or None when it wrote nothing (killed)."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


def run_example(name: str, args: list[str], *, scripted: bool, timeout: float) -> Row:
    with tempfile.TemporaryDirectory(prefix="rolecast-examples-table-") as tmp:
        store, counter = Path(tmp) / "runs.db", Path(tmp) / "calls"
        (Path(tmp) / "sitecustomize.py").write_text(COUNTER)
        env = {**os.environ, "ROLECAST_STORE": str(store), "PYTHONPATH": f"{tmp}{os.pathsep}{ROOT}",
               "ROLECAST_EXAMPLES_TABLE_CALLS": str(counter)}
        command = [sys.executable, str(ROOT / "examples" / name), *args]
        if scripted:
            command.append("--scripted")
        started = time.monotonic()
        try:
            done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
            status, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            status, stdout, stderr = -1, "", f"error: timed out after {timeout:g} s ({exc})"
        seconds = time.monotonic() - started
        calls = counted_calls(counter)
        return Row(name, seconds, calls if calls is not None else model_calls(store), status,
                   outcome(stdout, stderr, status))


def table(rows: list[Row], *, scripted: bool) -> str:
    model = "canned models (--scripted)" if scripted else _model_name()
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    head = (
        f"Generated by `python bench/examples_table.py --write` on {when}: {model}, "
        f"{os.cpu_count()} CPU cores ({platform.machine()}, Python {platform.python_version()}). "
        "Do not edit by hand; rerun the script."
    )
    lines = [head, "", "| example | wall time | model calls | exit | what the run ended with |",
             "|---|---|---|---|---|"]
    lines += [row.markdown() for row in rows]
    return "\n".join(lines)


def _model_name() -> str:
    """The model a run on this machine uses, as ``rolecast info`` says it."""
    done = subprocess.run([sys.executable, "-m", "rolecast.cli", "info"], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    found = dict(re.findall(r"^(\w[\w ]*?)\s*:\s(.+?)\s*$", done.stdout, re.MULTILINE))  # "key   : value" rows
    return " on ".join(v for v in (found.get("model"), found.get("engine")) if v) or "the configured model"


def write(readme: Path, text: str) -> None:
    """Put ``text`` between the markers in ``readme`` (they must be there, once each)."""
    content = readme.read_text(encoding="utf-8")
    if content.count(BEGIN) != 1 or content.count(END) != 1 or content.index(BEGIN) > content.index(END):
        raise SystemExit(f"{readme} must hold {BEGIN} and then {END}, once each")
    start, end = content.index(BEGIN) + len(BEGIN), content.index(END)
    readme.write_text(content[:start] + "\n" + text + "\n" + content[end:], encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="replace the table in the README")
    parser.add_argument("--readme", type=Path, default=ROOT / "docs" / "guides" / "embedded-model.md")
    parser.add_argument("--only", action="append", default=[], help="run only this example (repeatable)")
    parser.add_argument("--scripted", action="store_true", help="run on the canned models (checks the script)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per example")
    args = parser.parse_args(argv)
    chosen = [(n, a) for n, a in EXAMPLES if not args.only or n in args.only]
    unknown = set(args.only) - {n for n, _ in EXAMPLES}
    if unknown:
        parser.error(f"not an example of the table: {', '.join(sorted(unknown))}")
    if args.scripted:
        chosen = [(n, a) for n, a in chosen if n in SCRIPTABLE]
    rows = []
    for name, extra in chosen:
        row = run_example(name, extra, scripted=args.scripted, timeout=args.timeout)
        print(f"{name}: {row.seconds:.1f} s, exit {row.status}: {row.outcome}", file=sys.stderr)
        rows.append(row)
    text = table(rows, scripted=args.scripted)
    print(text)
    if args.write:
        write(args.readme, text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
