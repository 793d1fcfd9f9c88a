"""The built-in calculator: arithmetic evaluated by walking the syntax tree.

:func:`evaluate_arithmetic` / :data:`calculator` take numbers, ``+ - * / // % **``,
unary signs, parentheses and a few ``math`` functions. There is no ``eval``; names,
attributes, subscripts and huge results are refused.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable
from typing import Annotated, Any

from rolecast.errors import ToolError

from .function import Tool

MAX_EXPRESSION_CHARS = 1000
MAX_INT_BITS = 10_000  # about 3000 decimal digits
MAX_FACTORIAL = 1000

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau}


def _factorial(n: Any) -> int:
    if not isinstance(n, int) or n < 0:
        raise ToolError("factorial() needs a non-negative whole number")
    if n > MAX_FACTORIAL:
        raise ToolError(f"factorial() of more than {MAX_FACTORIAL} is refused (too large)")
    return math.factorial(n)


def _round(value: Any, ndigits: Any = None) -> Any:
    if ndigits is None:
        return round(value)
    if not isinstance(ndigits, int) or abs(ndigits) > 100:
        raise ToolError("round() takes a whole number of digits between -100 and 100")
    return round(value, ndigits)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "abs": abs,
    "round": _round,
    "min": min,
    "max": max,
    "sqrt": math.sqrt,
    "exp": math.exp,
    "log": math.log,
    "log10": math.log10,
    "log2": math.log2,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "asin": math.asin,
    "acos": math.acos,
    "atan": math.atan,
    "floor": math.floor,
    "ceil": math.ceil,
    "hypot": math.hypot,
    "factorial": _factorial,
}


def _check_size(value: Any) -> Any:
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ToolError("the result is too large")
    return value


def _power(base: Any, exponent: Any) -> Any:
    # estimate before computing: 10 ** 10 ** 10 must be refused, not attempted
    if isinstance(base, int) and isinstance(exponent, int) and exponent > 0 and abs(base) > 1:
        if exponent * base.bit_length() > MAX_INT_BITS:
            raise ToolError("the exponent is too large")
    if isinstance(exponent, (int, float)) and abs(exponent) > 1_000_000:
        raise ToolError("the exponent is too large")
    return operator.pow(base, exponent)


class _Evaluator:
    """Walks an expression tree, allowing only arithmetic (the safety is in what it refuses)."""

    def visit(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return self.visit(node.body)
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise ToolError(f"only numbers are allowed, not {node.value!r}")
            return node.value
        if isinstance(node, ast.BinOp):
            op = _BINARY.get(type(node.op))
            if op is None:
                hint = " (use ** for powers)" if isinstance(node.op, ast.BitXor) else ""
                raise ToolError(f"operator {type(node.op).__name__} is not allowed{hint}")
            left, right = self.visit(node.left), self.visit(node.right)
            if isinstance(node.op, ast.Pow):
                return _check_size(_power(left, right))
            if isinstance(node.op, ast.Mult) and isinstance(left, int) and isinstance(right, int):
                if left.bit_length() + right.bit_length() > MAX_INT_BITS:
                    raise ToolError("the result is too large")
            return _check_size(op(left, right))
        if isinstance(node, ast.UnaryOp):
            unary = _UNARY.get(type(node.op))
            if unary is None:
                raise ToolError(f"operator {type(node.op).__name__} is not allowed")
            return unary(self.visit(node.operand))
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            raise ToolError(f"unknown name {node.id!r}; only numbers, operators and {_allowed()} are allowed")
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS:
                raise ToolError(f"only these functions are allowed: {', '.join(_FUNCTIONS)}")
            if node.keywords:
                raise ToolError("keyword arguments are not allowed")
            args = [self.visit(a) for a in node.args]
            return _check_size(_FUNCTIONS[node.func.id](*args))
        raise ToolError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _allowed() -> str:
    return ", ".join([*_CONSTANTS, *(f"{f}()" for f in _FUNCTIONS)])


def evaluate_arithmetic(expression: str) -> int | float:
    """Evaluate an arithmetic expression safely (no ``eval``); raise :class:`ToolError` if refused.

    >>> evaluate_arithmetic("2130.23 * (1 + 0.23) - 5")
    2615.1829
    """
    text = expression.strip().rstrip("=").strip()
    if not text:
        raise ToolError("the expression is empty")
    if len(text) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise ToolError(f"not a valid arithmetic expression: {exc.msg}") from None
    except ValueError as exc:
        raise ToolError(f"not a valid arithmetic expression: {exc}") from None
    except (RecursionError, MemoryError):
        raise ToolError("the expression is nested too deeply") from None
    try:
        value = _Evaluator().visit(tree)
    except ZeroDivisionError:
        raise ToolError("division by zero") from None
    except OverflowError:
        raise ToolError("the result is too large") from None
    except RecursionError:
        raise ToolError("the expression is nested too deeply") from None
    except (ValueError, TypeError) as exc:
        raise ToolError(f"math error: {exc}") from None
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        raise ToolError("the expression did not give a number")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number (too large?)")
    return value


def format_number(value: int | float) -> str:
    """A number as text; floats to 15 significant digits (``489.9529``, not ``489.95290000000006``)."""
    if isinstance(value, float):
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return format(value, ".15g")
    return str(value)


def _calculator(
    expression: Annotated[str, "an arithmetic expression, e.g. 2130.23 * 1.23 - 5"],
) -> str:
    """Evaluate an arithmetic expression: numbers, + - * / // % ** and parentheses, plus sqrt, log, sin, cos, round, min, max and other math functions."""  # noqa: E501
    return format_number(evaluate_arithmetic(expression))


#: The calculator tool (name ``calculator``); copy it with ``calculator_tool(name=...)``.
calculator: Tool = Tool.from_function(_calculator, name="calculator", human_name="Calculator")


def calculator_tool(*, name: str = "calculator", return_direct: bool = False) -> Tool:
    """A calculator tool with a name of your choice."""
    return Tool.from_function(_calculator, name=name, human_name="Calculator", return_direct=return_direct)


__all__ = ["calculator", "calculator_tool", "evaluate_arithmetic", "format_number"]
