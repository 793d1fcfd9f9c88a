"""The code sandbox: model-written Python runs in a limited subprocess, never in this process."""

from __future__ import annotations

import ast
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

import pytest

from actions.tools import sandbox
from actions.tools.sandbox import PythonSession, run_python
from rolecast.errors import SandboxError

posix_only = pytest.mark.skipif(os.name != "posix", reason="resource limits and process groups are POSIX")
ROOT = Path(__file__).resolve().parents[1]


async def test_runs_code_and_returns_stdout():
    result = await run_python("print(6 * 7)")
    assert result.ok and result.returncode == 0
    assert result.stdout == "42\n"
    assert result.observation() == "42"
    assert result.duration > 0


async def test_an_exception_reports_its_last_line_with_the_output_before_it():
    result = await run_python("print('before')\nfibonacci(10)")
    assert not result.ok and result.returncode == 1
    assert result.error == "NameError: name 'fibonacci' is not defined"
    assert result.observation() == "before\nNameError: name 'fibonacci' is not defined"
    # the traceback names the cell, not the bootstrap that ran it
    assert 'File "main.py", line 2' in result.stderr
    assert "bootstrap" not in result.stderr and "<string>" not in result.stderr


async def test_a_syntax_error_is_reported():
    result = await run_python("def broken(:\n    pass")
    assert not result.ok
    assert result.error.startswith("SyntaxError")


async def test_code_runs_in_another_process_in_isolated_mode():
    code = "import os, sys\nprint(os.getpid(), sys.flags.isolated, sys.flags.no_user_site)"
    result = await run_python(code)
    pid, isolated, no_user_site = result.stdout.split()
    assert int(pid) != os.getpid()
    assert isolated == "1" and no_user_site == "1"


async def test_the_parents_environment_does_not_reach_the_code(monkeypatch):
    monkeypatch.setenv("ROLECAST_TEST_SECRET", "s3cr3t-value-do-not-leak")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-for-the-sandbox")
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else")
    result = await run_python("import os, sys\nprint(dict(os.environ))\nprint(sys.path)")
    assert result.ok
    assert "s3cr3t-value-do-not-leak" not in result.stdout
    assert "sk-test-not-for-the-sandbox" not in result.stdout
    assert "/somewhere/else" not in result.stdout
    assert "'PATH'" in result.stdout


async def test_only_the_whitelist_and_explicit_variables_are_passed():
    result = await run_python("import os\nprint(sorted(os.environ))", env={"GREETING": "hi"})
    names = set(ast.literal_eval(result.stdout))
    assert names <= {"PATH", "SYSTEMROOT", "LANG", "LC_ALL", "HOME", "TMPDIR", "GREETING"}
    assert "GREETING" in names


@posix_only
async def test_an_infinite_loop_is_killed_at_the_timeout():
    started = time.monotonic()
    result = await run_python("while True:\n    pass", timeout=1)
    assert time.monotonic() - started < 5
    assert result.timed_out and not result.ok
    assert result.returncode < 0
    assert "TimeoutError" in result.observation() and "1 s" in result.observation()


async def _stops_growing(path: Path, settle: float = 0.3, attempts: int = 40) -> bool:
    """True once ``path`` stops growing: whatever appended to it is dead.

    PIDs printed inside the sandbox are namespace-local, so liveness is checked by
    a heartbeat file instead.
    """
    for _ in range(attempts):
        before = path.stat().st_size if path.exists() else 0
        await asyncio.sleep(settle)
        if (path.stat().st_size if path.exists() else 0) == before:
            return True
    return False


HEARTBEAT = "import os, time\nwhile True:\n    open(os.environ['BEAT'], 'a').write('.')\n    time.sleep(0.02)\n"


@posix_only
async def test_a_timeout_kills_the_whole_process_group(tmp_path):
    beat = tmp_path / "beat"
    code = (
        "import subprocess, sys, time\n"
        f"child = subprocess.Popen([sys.executable, '-c', {HEARTBEAT!r}])\n"
        "time.sleep(60)\n"
    )
    started = time.monotonic()
    result = await run_python(code, timeout=2, env={"BEAT": str(beat)}, write_paths=[tmp_path])
    assert time.monotonic() - started < 6
    assert result.timed_out
    assert beat.exists() and beat.stat().st_size > 0  # the grandchild did run
    assert await _stops_growing(beat)  # and died with its parent


@posix_only
async def test_cancelling_the_call_kills_the_process(tmp_path):
    beat = tmp_path / "beat"
    task = asyncio.ensure_future(run_python(HEARTBEAT, timeout=60, env={"BEAT": str(beat)}, write_paths=[tmp_path]))
    for _ in range(200):
        if beat.exists() and beat.stat().st_size > 2:
            break
        await asyncio.sleep(0.05)
    assert beat.exists()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await _stops_growing(beat)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="namespaces are Linux only")
async def test_the_code_cannot_see_the_framework_process_or_the_network():
    if not await sandbox._namespace_prefix(False):
        pytest.skip("unshare is not allowed on this machine")
    code = (
        "import os, socket\n"
        "print(os.getppid(), sorted(p for p in os.listdir('/proc') if p.isdigit()))\n"
        "try:\n"
        "    socket.create_connection(('127.0.0.1', 9), timeout=1)\n"
        "except OSError as exc:\n"
        "    print(type(exc).__name__)\n"
    )
    result = await run_python(code)
    assert result.ok, result.stderr
    first, second = result.stdout.splitlines()
    # the parent is the sandbox's supervisor, PID 1 of its own namespace; only the sandbox's processes exist
    assert first == "1 ['1', '2']" and str(os.getpid()) not in first.split(" ", 1)[1]
    assert "Error" in second  # no network, not even the parent's loopback


async def test_runs_in_a_temporary_directory_that_is_removed_afterwards():
    code = "import os\nopen('left-behind.txt', 'w').write('x')\nprint(os.getcwd())\nprint(os.environ['HOME'])"
    result = await run_python(code)
    workdir, home = result.stdout.split()
    assert workdir == home
    _assert_removed_temporary_directory(workdir)


def _assert_removed_temporary_directory(workdir: str) -> None:
    path = Path(workdir).resolve()
    assert path.is_relative_to(Path(tempfile.gettempdir()).resolve())
    assert path != Path.cwd().resolve()
    assert not path.exists()


async def test_output_is_capped():
    result = await run_python("print('x' * 100_000)\nprint('done')", max_output=1000)
    assert result.ok and result.truncated
    assert len(result.stdout) == 1000
    assert result.observation().endswith("[output truncated]")


@posix_only
async def test_an_endless_flood_of_output_stays_capped_and_stops_at_the_timeout():
    result = await run_python("while True:\n    print('y' * 1000)", timeout=1, max_output=2000)
    assert result.timed_out and result.truncated
    assert len(result.stdout) <= 2000


async def test_stderr_keeps_its_end_where_the_exception_is():
    code = "import sys\nsys.stderr.write('noise\\n' * 5000)\nraise ValueError('the real problem')"
    result = await run_python(code, max_output=500)
    assert result.truncated
    assert result.error == "ValueError: the real problem"


@posix_only
async def test_memory_is_limited():
    result = await run_python("block = bytearray(2 * 1024 ** 3)\nprint('allocated')", memory_mb=256)
    assert not result.ok
    assert "allocated" not in result.stdout
    assert "MemoryError" in result.observation()


@posix_only
async def test_file_size_is_limited():
    code = "with open('big.bin', 'wb') as f:\n    f.write(b'0' * (4 * 1024 * 1024))"
    result = await run_python(code, max_file_mb=1)
    assert not result.ok
    assert "File too large" in result.observation() or "OSError" in result.observation()


async def test_stdin_is_closed():
    result = await run_python("input('? ')")
    assert result.error.startswith("EOFError")


async def test_echo_last_expression_prints_a_trailing_value_like_a_repl():
    assert (await run_python("x = 6\nx * 7", echo_last_expression=True)).stdout == "42\n"
    assert (await run_python("x = 6\nx * 7")).stdout == ""
    assert (await run_python("print('only once')", echo_last_expression=True)).stdout == "only once\n"


async def test_an_invalid_timeout_is_a_sandbox_error():
    with pytest.raises(SandboxError):
        await run_python("print(1)", timeout=0)


async def test_a_session_keeps_definitions_by_replaying_successful_cells():
    session = PythonSession()
    first = await session.run("fibonacci(10)")
    assert first.error == "NameError: name 'fibonacci' is not defined"
    define = await session.run(
        "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)\nprint('defined')"
    )
    assert define.stdout == "defined\n"
    call = await session.run("print(fibonacci(10))")
    # the replayed cell's output is not repeated
    assert call.stdout == "55\n"
    assert len(session.cells) == 2  # the failed first cell was not kept


async def test_a_session_shares_one_namespace_across_cells():
    session = PythonSession()
    await session.run("def area(r):\n    return scale * r * r")
    await session.run("scale = 3")
    assert (await session.run("print(area(2))")).stdout == "12\n"


async def test_sessions_are_independent_and_can_be_reset():
    one, two = PythonSession(), PythonSession()
    await one.run("secret = 1")
    assert (await two.run("print(secret)")).error.startswith("NameError")
    one.reset()
    assert (await one.run("print(secret)")).error.startswith("NameError")


def test_no_exec_or_eval_in_framework_code():
    """Model-written code never runs in-process: no exec/eval calls outside the tests."""
    offenders = []
    for package in ("rolecast", "memory", "actions", "roles", "environment"):
        for path in (ROOT / package).rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
            for node in ast.walk(tree):
                func = node.func if isinstance(node, ast.Call) else None
                if isinstance(func, ast.Name) and func.id in ("exec", "eval"):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    # the child's bootstrap is text run in the subprocess; it does not call exec either
    assert "exec(" not in sandbox._BOOTSTRAP and "eval(" not in sandbox._BOOTSTRAP
    assert offenders == []


def test_the_bootstrap_compiles():
    compile(sandbox._BOOTSTRAP, "<bootstrap>", "exec")
    assert sys.executable
