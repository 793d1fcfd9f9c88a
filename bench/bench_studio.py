"""The studio under a hostile load (issue 32: items 3, 4 and 5), before and after, on this machine.

    python bench/bench_studio.py compare [--sizes 2000,4000,8000,16000] [--old-up-to 4000]
    python bench/bench_studio.py post [--mb 100]
    python bench/bench_studio.py runs [--runs 400 --events 1000]

* ``compare``: two runs of N near-identical messages (five texts repeated, one message in 100
  changed): the comparison's alignment, the old way (``difflib`` on the whole, ``autojunk=False``,
  up to ``--old-up-to`` messages: it is quadratic) and the new (:mod:`rolecast.studio.align`), then
  the whole ``/compare`` page over HTTP from a studio on 127.0.0.1 with its size;
* ``post``: a POST of ``--mb`` megabytes with ``Origin: null`` and no CSRF token to a studio started
  in a child process: its answer and the child's peak memory (``ru_maxrss``) before and after;
* ``runs``: a store of ``--runs`` runs of ``--events`` events: the runs list with a filter
  (``/?q=…``, what an open tab asks each second), first and then again, and the studio's memory.
"""

from __future__ import annotations

import argparse
import difflib
import http.client
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent), str(HERE.parent / "tests")]


def near_identical(n: int) -> tuple[list[tuple[str, tuple[str, ...], str]], list[tuple[str, tuple[str, ...], str]]]:
    left = [("Ada" if i % 2 else "Ben", ("Ben" if i % 2 else "Ada",), f"I agree {i % 5}.") for i in range(n)]
    right = list(left)
    for k in range(0, n, 100):
        right[k] = (right[k][0], right[k][1], f"I changed my mind ({k}).")
    return left, right


def write_runs(path: Path, n: int) -> tuple[str, str]:
    from rolecast.runs import MESSAGE, RUN_STARTED, RUN_STOPPED, RunEvent, SQLiteRunStore

    store = SQLiteRunStore(path)
    ids = []
    try:
        for name, messages in zip(("left", "right"), near_identical(n), strict=True):
            run_id = f"cmp-{name}-{n}"
            now = time.time()
            batch = [RunEvent(run_id, RUN_STARTED, {"team": "T", "idea": "compare", "roles": [
                {"name": "Ada"}, {"name": "Ben"}]}, 0, "", ts=now)]
            for i, (sender, to, text) in enumerate(messages):
                batch.append(RunEvent(run_id, MESSAGE, {"message": {
                    "id": f"m{i}", "content": text, "role": sender, "cause_by": "x.Speak", "sent_from": sender,
                    "send_to": list(to), "metadata": {}}}, 1 + i // 2, sender, ts=now + i))
            batch.append(RunEvent(run_id, RUN_STOPPED, {"reason": "n_round"}, n // 2, "", ts=now + n))
            store.extend(batch)
            ids.append(run_id)
    finally:
        store.close()
    return ids[0], ids[1]


def align_seconds(n: int) -> float:
    """Seconds the studio's alignment takes on two runs of ``n`` near-identical messages."""
    from rolecast.studio.align import opcodes

    left, right = near_identical(n)
    start = time.perf_counter()
    opcodes(left, right)
    return time.perf_counter() - start


def bench_compare(sizes: list[int], old_up_to: int) -> None:
    import studio_runs

    for n in sizes:
        left, right = near_identical(n)
        new = align_seconds(n)
        old = "-"
        if n <= old_up_to:
            start = time.perf_counter()
            difflib.SequenceMatcher(a=left, b=right, autojunk=False).get_opcodes()
            old = f"{time.perf_counter() - start:.2f} s"
        print(f"compare {n:>6} messages: alignment old {old:>9}, new {new:.3f} s", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "runs.db"
        pairs = {n: write_runs(path, n) for n in sizes}
        served = studio_runs.serve(path)
        try:
            for n, (a, b) in pairs.items():
                start = time.perf_counter()
                page = studio_runs.get(served, f"/compare?a={a}&b={b}", timeout=600)
                took = time.perf_counter() - start
                print(f"GET /compare, two runs of {n:>6} messages: HTTP {page.status} in {took:.2f} s "
                      f"(first read of both runs included), {len(page.body) / 1e6:.2f} MB of HTML", flush=True)
        finally:
            served.stop()


SERVE = """
import asyncio, sys
from rolecast.studio.server import serve
from rolecast.studio.source import RunSource
asyncio.run(serve(RunSource(sys.argv[1]), port=0, on_ready=lambda url: print(url, flush=True)))
"""


def start_studio(store: Path, pythonpath: str) -> tuple[subprocess.Popen[str], int]:
    """A studio in a child process on a free port of 127.0.0.1 (``pythonpath``: which rolecast it runs)."""
    child = subprocess.Popen([sys.executable, "-c", SERVE, str(store)], stdout=subprocess.PIPE, text=True,
                             cwd=store.parent, env={**os.environ, "PYTHONPATH": pythonpath})
    assert child.stdout is not None
    url = child.stdout.readline().strip()
    return child, int(url.rstrip("/").rsplit(":", 1)[1])


def memory_mb(pid: int) -> tuple[float, float]:
    """A process's resident memory now and at its peak (MB), from /proc."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def hostile_post(port: int, megabytes: int, chunked: bool) -> str:
    """``megabytes`` of form data with ``Origin: null`` and no CSRF token; the answer's status line."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    piece = b"a" * (1 << 20)
    try:
        conn.putrequest("POST", "/runs/x/fork", skip_host=True)
        conn.putheader("Host", f"127.0.0.1:{port}")
        conn.putheader("Origin", "null")
        conn.putheader("Content-Type", "application/x-www-form-urlencoded")
        if chunked:
            conn.putheader("Transfer-Encoding", "chunked")
        else:
            conn.putheader("Content-Length", str(megabytes << 20))
        conn.endheaders()
        try:
            for _ in range(megabytes):
                conn.send(b"%x\r\n%s\r\n" % (len(piece), piece) if chunked else piece)
            if chunked:
                conn.send(b"0\r\n\r\n")
        except OSError as exc:  # refused before it was all sent: the server closed the connection
            return f"(the server stopped reading: {type(exc).__name__})"
        response = conn.getresponse()
        return f"HTTP {response.status} {response.read()[:80]!r}"
    finally:
        conn.close()


def bench_post(megabytes: int, old: str | None) -> None:
    from rolecast.runs import SQLiteRunStore

    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.db"
        SQLiteRunStore(store).close()
        (Path(tmp) / "x").touch()
        for label, path in (("before", old), ("after", str(HERE.parent))):
            if path is None:
                continue
            for chunked in (False, True):
                child, port = start_studio(store, path)
                try:
                    time.sleep(1.0)
                    idle = memory_mb(child.pid)[0]
                    answer = hostile_post(port, megabytes, chunked)
                    _, peak = memory_mb(child.pid)
                    how = "chunked" if chunked else "Content-Length"
                    print(f"{label}: POST of {megabytes} MB ({how}), Origin: null, no CSRF token: {answer}; "
                          f"studio {idle:.0f} MB idle, peak {peak:.0f} MB", flush=True)
                finally:
                    child.terminate()
                    child.wait(10)


def write_many(path: Path, runs: int, events: int, prefix: str) -> None:
    """``runs`` runs of ``events`` events each (per round: a model call, a message of 600 characters)."""
    from rolecast.runs import LLM_CALL, MESSAGE, RUN_STARTED, RUN_STOPPED, RunEvent, SQLiteRunStore

    store = SQLiteRunStore(path)
    try:
        for r in range(runs):
            run_id, now = f"{prefix}-{r:04d}", time.time() - 86400 + r
            batch = [RunEvent(run_id, RUN_STARTED, {"team": "T", "idea": f"idea {r}", "roles": [
                {"name": "Ada"}, {"name": "Ben"}]}, 0, "", ts=now)]
            for i in range((events - 2) // 2):
                who = "Ada" if i % 2 == 0 else "Ben"
                batch.append(RunEvent(run_id, LLM_CALL, {"action": "Speak", "model": "m", "fingerprint": f"{i:032x}",
                                                         "response": {"text": "x", "usage": {"prompt_tokens": 50,
                                                                                            "completion_tokens": 9}},
                                                         "cost": 0.0, "latency": 0.1}, i + 1, who, ts=now + i))
                batch.append(RunEvent(run_id, MESSAGE, {"message": {
                    "id": f"m{i}", "content": f"{who}, turn {i}: " + "words " * 100, "role": who, "cause_by": "x.Speak",
                    "sent_from": who, "send_to": ["Ben" if who == "Ada" else "Ada"], "metadata": {}}},
                    i + 1, who, ts=now + i))
            batch.append(RunEvent(run_id, RUN_STOPPED, {"reason": "n_round"}, events // 2, "", ts=now + events))
            store.extend(batch)
    finally:
        store.close()


def timed_get(port: int, path: str) -> tuple[int, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    try:
        start = time.perf_counter()
        conn.request("GET", path, headers={"Host": f"127.0.0.1:{port}"})
        response = conn.getresponse()
        response.read()
        return response.status, time.perf_counter() - start
    finally:
        conn.close()


def bench_runs(runs: int, events: int, big: int, big_events: int, old: str | None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = Path(tmp) / "runs.db"
        start = time.perf_counter()
        write_many(store, runs, events, "many")
        print(f"wrote {runs} runs of {events} events in {time.perf_counter() - start:.0f} s", flush=True)
        for label, path in (("before", old), ("after", str(HERE.parent))):
            if path is None:
                continue
            child, port = start_studio(store, path)
            try:
                took = [timed_get(port, "/?q=no-such-run")[1] for _ in range(5)]
                rss, peak = memory_mb(child.pid)
                print(f"{label}: the runs list with a filter (/?q=no-such-run), {runs} runs of {events} events: "
                      f"first {took[0]:.2f} s, then {', '.join(f'{t:.2f}' for t in took[1:])} s; "
                      f"studio {rss:.0f} MB (peak {peak:.0f})", flush=True)
            finally:
                child.terminate()
                child.wait(10)
        if not big:
            return
        bigs = Path(tmp) / "big.db"
        start = time.perf_counter()
        write_many(bigs, big, big_events, "big")
        print(f"wrote {big} runs of {big_events} events in {time.perf_counter() - start:.0f} s", flush=True)
        for label, path in (("before", old), ("after", str(HERE.parent))):
            if path is None:
                continue
            child, port = start_studio(bigs, path)
            try:
                idle = memory_mb(child.pid)[0]
                for r in range(big):
                    timed_get(port, f"/runs/big-{r:04d}")
                took = [timed_get(port, "/?q=no-such-run")[1] for _ in range(3)]
                rss, peak = memory_mb(child.pid)
                print(f"{label}: {big} runs of {big_events} events, each page opened, then the filtered list "
                      f"({', '.join(f'{t:.2f}' for t in took)} s): studio {idle:.0f} MB -> {rss:.0f} MB "
                      f"(peak {peak:.0f})", flush=True)
            finally:
                child.terminate()
                child.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("what", choices=["compare", "post", "runs"])
    parser.add_argument("--sizes", default="2000,4000,8000,16000")
    parser.add_argument("--old-up-to", type=int, default=4000)
    parser.add_argument("--mb", type=int, default=100)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--big", type=int, default=5, help="runs of --big-events events (0: none)")
    parser.add_argument("--big-events", type=int, default=40_000)
    parser.add_argument("--old", help="a copy of an older rolecast (its PYTHONPATH) to measure beside this one")
    args = parser.parse_args()
    if args.what == "compare":
        bench_compare([int(s) for s in args.sizes.split(",")], args.old_up_to)
    elif args.what == "post":
        bench_post(args.mb, args.old)
    else:
        bench_runs(args.runs, args.events, args.big, args.big_events, args.old)


if __name__ == "__main__":
    main()
