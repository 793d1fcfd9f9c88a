"""The simulation (examples/simulation.py) on a SQLite store, killed at a random moment:
``python kill_simulation.py STORE RUN_ID AGENTS ROUNDS CALLS_FILE [KILL_AFTER [BATCH]]``.

The model is the simulation's instant rule; every call that reaches it is first appended to
CALLS_FILE (one line, written to the file before the model answers, so it survives the process
being killed). With KILL_AFTER > 0 the process sends itself SIGKILL that many seconds after the
run started, wherever the run then is (a turn, the journal, a database write, a delivery).
BATCH > 0 writes a round in batches of that many events (``rolecast.runs.log.BATCH_EVENTS``),
most of them behind, in the store's thread, and empties the journal past 16 KiB, writing a batch
at once to empty it past 64 KiB, so that a kill also meets a batch written in the middle of a
round (behind or at once) and a journal just emptied. Run again with the same STORE and RUN_ID, it resumes. Prints the
history as JSON lines, then one line of totals and the run's wall time.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import simulation

from rolecast.runs import journal, log, sqlite
from rolecast.testing import FunctionLLM


def main() -> None:
    store, run_id, calls_file = sys.argv[1], sys.argv[2], sys.argv[5]
    agents, rounds = int(sys.argv[3]), int(sys.argv[4])
    kill_after = float(sys.argv[6]) if len(sys.argv) > 6 else 0.0
    batch = int(sys.argv[7]) if len(sys.argv) > 7 else 0
    if batch > 0:
        log.BATCH_EVENTS, journal.ROTATE_BYTES, sqlite.BEHIND_BYTES = batch, 16 * 1024, 64 * 1024
        sqlite.WRITE_BEHIND = True
    calls = os.open(calls_file, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def answer(messages):
        os.write(calls, (messages[-1]["content"].splitlines()[0] + "\n").encode())
        return simulation.instant_reply(messages)

    team = simulation.build_team(agents, llm=FunctionLLM(answer, model="instant", keep_calls=False),
                                 store=store, run_id=run_id)
    if kill_after > 0:
        timer = threading.Timer(kill_after, os.kill, (os.getpid(), signal.SIGKILL))
        timer.daemon = True
        timer.start()
    started = time.perf_counter()
    history = team.run_sync(n_round=rounds, idea=simulation.TOPIC)
    wall = time.perf_counter() - started
    team.close()
    for m in history:
        print(json.dumps({"from": m.sent_from, "content": m.content, "to": sorted(m.send_to), "id": m.id}))
    print(json.dumps({"calls": team.cost_manager.total.calls, "wall": wall}))


if __name__ == "__main__":
    main()
