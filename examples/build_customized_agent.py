"""One role that writes code and then runs it, in order (MetaGPT's RunnableCoder).

    python examples/build_customized_agent.py "compute the 10th fibonacci number"

The written code runs in rolecast's sandbox: a separate ``python -I`` process with a
timeout, memory and output limits, a temporary working directory and a scrubbed
environment — never in this process. ``--scripted`` uses a canned model.
"""

from __future__ import annotations

import argparse

from loguru import logger

from actions import Action, parse_code
from actions.tools.sandbox import run_python
from memory import Message
from rolecast import enable_logging
from rolecast.observe.console import run_script
from rolecast.testing import FunctionLLM
from roles import Role


class SimpleWriteCode(Action):
    PROMPT_TEMPLATE: str = """
Write a python function that can {instruction}, then one line that calls it and prints the result.
Return ```python your_code_here ``` with NO other texts,
your code:
"""
    name: str = "SimpleWriteCode"

    async def run(self, instruction: str) -> str:
        rsp = await self._aask(self.PROMPT_TEMPLATE.format(instruction=instruction))
        return parse_code(rsp)


class SimpleRunCode(Action):
    name: str = "SimpleRunCode"
    timeout: float = 10.0

    async def run(self, code_text: str) -> str:
        result = await run_python(code_text, timeout=self.timeout, memory_mb=256, max_output=4000)
        logger.info("sandbox: exit {} in {:.2f}s", result.returncode, result.duration)
        return result.observation() or "(the code printed nothing)"


class RunnableCoder(Role):
    name: str = "Alice"
    profile: str = "RunnableCoder"

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.set_actions([SimpleWriteCode, SimpleRunCode])
        self._set_react_mode(react_mode="by_order")

    async def _act(self) -> Message:
        logger.info(f"{self._setting}: to do {self.rc.todo}({self.rc.todo.name})")
        todo = self.rc.todo
        msg = self.get_memories(k=1)[0]  # the requirement, then the code written
        result = await todo.run(msg.content)
        msg = Message(content=result, role=self.profile, cause_by=type(todo))
        self.rc.memory.add(msg)
        return msg


# What the scripted model knows how to write: (keywords in the instruction, code that prints the answer).
CANNED = [
    (("fibonacci",), "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n"
     "    return a\n\nprint(fib(10))"),
    (("factorial",), "import math\n\nprint(math.factorial(10))"),
    (("prime",), "def is_prime(n):\n    return n > 1 and all(n % d for d in range(2, int(n ** 0.5) + 1))\n\n"
     "print([n for n in range(2, 30) if is_prime(n)])"),
]


def scripted_model(instruction: str) -> FunctionLLM:
    """A canned model that writes code for ``instruction`` when it is one it knows (Fibonacci, a
    factorial, primes), and otherwise code that says it cannot."""
    code = next((c for keys, c in CANNED if any(k in instruction.lower() for k in keys)), None)
    if code is None:
        code = f"print({('the scripted model cannot write code to ' + instruction)!r})"
    return FunctionLLM(lambda messages: f"```python\n{code}\n```")


async def main(instruction: str, scripted: bool = False) -> Message | None:
    role = RunnableCoder(llm=scripted_model(instruction) if scripted else None)
    result = await role.run(instruction)
    for msg in role.get_memories():
        print(f"--- {msg.role} ({msg.cause_by.rsplit('.', 1)[-1]})\n{msg.content}\n")
    return result


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("instruction", nargs="?", default="compute the 10th fibonacci number")
    parser.add_argument("--scripted", action="store_true", help="use a canned model")
    args = parser.parse_args()
    enable_logging("INFO")
    run_script(main(args.instruction, args.scripted))
