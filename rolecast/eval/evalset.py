"""An evalset file: a team, the ideas it is given (cases), and the checks each run must pass.

YAML or JSON, read strictly: an unknown key or check is an :class:`~rolecast.errors.EvalsetError`
naming the closest known one ("did you mean"), a value of the wrong kind says what it takes.
The README's *Evaluating a team* section documents every key; :data:`CHECKS` lists the checks
and the arguments each takes.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..core.files import read_at_most
from ..errors import EvalsetError
from ..observe.printable import printable
from .cases_file import file_cases

#: the keys of the evalset and of a case
EVALSET_KEYS = ("name", "team", "repeat", "threshold", "n_round", "investment", "description", "cases",
                "cases_file")
CASE_KEYS = ("id", "idea", "n_round", "investment", "expect")
CHECKS: dict[str, tuple[str, ...]] = {
    "contains": ("text", "role", "case_sensitive"),
    "roles_spoke": ("roles", "order"),
    "actions_ran": ("actions", "order"),
    "python_runs": ("role", "action", "timeout"),
    "tests_pass": ("code_from", "code", "tests_from", "tests", "tests_file", "timeout"),
    "judge": ("rubric", "model", "samples", "role"),
    "python": ("function", "threshold"),
    "max_calls": (),
    "max_cost": (),
}
"""Each check → its arguments (required ones first, in :data:`REQUIRED`); a scalar check takes one value."""
REQUIRED: dict[str, tuple[str, ...]] = {
    "contains": ("text",), "roles_spoke": ("roles",), "actions_ran": ("actions",),
    "judge": ("rubric",), "python": ("function",),
}
#: where a ``tests_pass`` check finds the code: a role's last message, or the evalset author's correct solution
#: (``code:``, to measure the tests a team wrote: do they pass against code known to be right?)
CODE_SOURCES = ("code_from", "code")
#: where a ``tests_pass`` check finds its tests: written by the team (a role's last message), or by the
#: evalset's author (the reference tests, in the evalset or a file beside it)
TESTS_SOURCES = ("tests_from", "tests", "tests_file")
#: the largest reference tests file (``tests_file:``)
MAX_TESTS_BYTES = 2**20
#: the checks that take one value (``- max_calls: 12``), not a mapping
SCALAR_CHECKS = ("max_calls", "max_cost")
ORDERS = ("exact", "in_order", "any_order")
#: a case id is part of its runs' ids (``EVAL_ID.CASE.N``): letters, digits, ``_`` and ``-``
CASE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,47}")
#: the evalset's name, in its evals' ids
_SLUG = re.compile(r"[^A-Za-z0-9_-]+")
MAX_BYTES = 4 * 2**20
#: a ``python`` check's function: ``module:attr``, the module a file in the evalset's folder (dotted: in a subfolder)
FUNCTION = re.compile(r"([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*):([A-Za-z_][A-Za-z0-9_]*)")
#: the most values an evalset may hold once its YAML aliases are expanded, and how deep they may nest: a
#: 587-byte file of nested aliases (a "billion laughs") expands to billions, which every later walk of the
#: data (checking it, digesting a check, showing a value in an error) would go through
MAX_NODES = 200_000
MAX_DEPTH = 64
#: the most runs an eval may plan (cases x repeat): the plan is a list of runs
MAX_RUNS = 100_000


def _short(value: Any, limit: int = 60) -> str:
    shown = repr(value)
    return shown if len(shown) <= limit else shown[: limit - 4] + "…" + shown[-3:]


@dataclass(frozen=True)
class Check:
    """One expectation of a case: its kind (a key of :data:`CHECKS`) and its arguments."""

    kind: str
    args: dict[str, Any]

    @property
    def label(self) -> str:
        """The check as a reader names it: ``contains(text='def add', role='Alice')``."""
        # (a tests_file's text is in the check, under ``tests``: the label names the file)
        shown = ", ".join(f"{k}={_short(v)}" for k, v in self.args.items()
                          if not (k == "tests" and "tests_file" in self.args))
        return f"{self.kind}({shown})"

    @property
    def key(self) -> str:
        """A stable digest of the check (a judge's calls are logged under it: a changed rubric asks anew)."""
        text = json.dumps({"kind": self.kind, "args": self.args}, sort_keys=True, default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:12]


@dataclass(frozen=True)
class Case:
    """One idea given to the team, the rounds it gets, and what its runs must show."""

    id: str
    idea: str
    n_round: int
    investment: float | None
    expect: tuple[Check, ...]


@dataclass
class Evalset:
    """A parsed evalset file (see the module docstring)."""

    name: str
    team: str
    cases: list[Case]
    repeat: int = 1
    threshold: float = 1.0
    path: Path | None = None
    description: str = ""

    @property
    def folder(self) -> Path:
        """Where the team's module is imported from: the evalset's folder."""
        return self.path.parent if self.path is not None else Path.cwd()

    @property
    def slug(self) -> str:
        """The name as it appears in eval ids."""
        return _SLUG.sub("-", self.name).strip("-")[:40] or "eval"

    def plan_key(self, repeat: int) -> str:
        """A digest of what the runs are (team, ideas, rounds, repeats), not of the checks: an eval
        interrupted and started again with the same plan resumes, whatever its checks say now."""
        plan = [self.team, repeat, [(c.id, c.idea, c.n_round, c.investment) for c in self.cases]]
        return hashlib.sha256(json.dumps(plan, default=str).encode()).hexdigest()[:8]

    def case(self, case_id: str) -> Case:
        for case in self.cases:
            if case.id == case_id:
                return case
        known = [c.id for c in self.cases]
        raise EvalsetError(f"no case {case_id!r} in evalset {self.name!r}{_suggest(case_id, known)}")


def _suggest(word: str, known: list[str]) -> str:
    close = difflib.get_close_matches(word, known, n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _unknown(where: str, given: dict[str, Any], known: tuple[str, ...]) -> None:
    for key in given:
        if key not in known:
            raise EvalsetError(f"{where}: unknown key {key!r}{_suggest(str(key), list(known))}; "
                               f"it takes {', '.join(known)}")


def _number(where: str, value: Any, *, whole: bool = False, low: float = 0.0, high: float | None = None) -> Any:
    kind = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or value < low or (high is not None and value > high):
        rng = f">= {low}" + (f" and <= {high}" if high is not None else "")
        raise EvalsetError(f"{where} is {'a whole number' if whole else 'a number'} {rng}, not {value!r}")
    return value


def _text(where: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise EvalsetError(f"{where} is a text, not {value!r:.80}")
    return value


def _names(where: str, value: Any) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, str) and v for v in value):
        raise EvalsetError(f"{where} is a list of names, not {value!r:.80}")
    return list(value)


def parse_check(where: str, item: Any, folder: Path | None = None) -> Check:
    """One item of a case's ``expect`` list: ``{check: arguments}`` (see :data:`CHECKS`); a ``tests_file``
    is read from ``folder`` (the evalset's), its text kept in the check (a changed file is a changed check)."""
    if not isinstance(item, dict) or len(item) != 1:
        raise EvalsetError(f"{where}: a check is one key, the check's name, such as `- max_calls: 12` or "
                           f"`- contains: {{text: ...}}`; not {item!r:.80}")
    kind, args = next(iter(item.items()))
    if kind not in CHECKS:
        raise EvalsetError(f"{where}: unknown check {kind!r}{_suggest(str(kind), list(CHECKS))}; "
                           f"the checks are {', '.join(CHECKS)}")
    where = f"{where} ({kind})"
    if kind in SCALAR_CHECKS:
        value = _number(where, args, whole=kind == "max_calls")
        return Check(kind, {"limit": value})
    if kind == "contains" and isinstance(args, str):
        args = {"text": args}
    if kind == "python_runs" and isinstance(args, str):
        args = {"role": args}
    if not isinstance(args, dict):
        raise EvalsetError(f"{where} takes a mapping of {', '.join(CHECKS[kind])}; not {args!r:.80}")
    _unknown(where, args, CHECKS[kind])
    missing = [k for k in REQUIRED.get(kind, ()) if k not in args]
    if missing:
        raise EvalsetError(f"{where} needs {', '.join(missing)}")
    args = _check_args(where, kind, dict(args), folder)
    if kind == "tests_pass":
        args = _tests_source(where, args, folder)
    return Check(kind, args)


def _one_of(where: str, args: dict[str, Any], sources: tuple[str, ...], what: str) -> None:
    given = [k for k in sources if k in args]
    if len(given) != 1:
        raise EvalsetError(f"{where} takes one of {', '.join(sources)} ({what}); "
                           f"{'not ' + ' and '.join(given) if given else 'none was given'}")


def _tests_source(where: str, args: dict[str, Any], folder: Path | None) -> dict[str, Any]:
    _one_of(where, args, CODE_SOURCES, "whose code the tests run against")
    if "code" in args:
        args["code"] = _text(f"{where} code", args["code"])
    _one_of(where, args, TESTS_SOURCES, "whose tests to run")
    if "tests" in args:
        args["tests"] = _text(f"{where} tests", args["tests"])
    if "tests_file" in args:
        name = _text(f"{where} tests_file", args["tests_file"])
        file = (folder or Path.cwd()) / name
        try:
            data = read_at_most(file, MAX_TESTS_BYTES)
        except OSError as exc:
            raise EvalsetError(f"{where} tests_file {name!r}: cannot read {file}: {exc.strerror or exc}") from exc
        if data is None:
            raise EvalsetError(f"{where} tests_file {name!r} is larger than {MAX_TESTS_BYTES // 1024} KiB")
        try:
            args["tests"] = _text(f"{where} tests_file {name!r}", data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise EvalsetError(f"{where} tests_file {name!r} is not UTF-8 text") from exc
    return args


def _python_args(where: str, args: dict[str, Any], folder: Path | None) -> None:
    """``function: module:attr`` names a file of the evalset's folder (never a module found on ``sys.path``)."""
    function = args["function"]
    match = FUNCTION.fullmatch(function) if isinstance(function, str) else None
    if match is None:
        raise EvalsetError(f"{where} function is `module:function`, the module a .py file in the evalset's "
                           f"folder (such as `scorers:exact_match` for scorers.py); not {function!r:.80}")
    file = (folder or Path.cwd()).resolve() / (match.group(1).replace(".", "/") + ".py")
    if not file.is_file():
        raise EvalsetError(f"{where} function {function!r}: there is no {file} (the module is a file of the "
                           f"evalset's folder)")
    args["file"] = str(file)
    args["threshold"] = float(_number(f"{where} threshold", args.get("threshold", 1.0), high=1.0))


def _check_args(where: str, kind: str, args: dict[str, Any], folder: Path | None = None) -> dict[str, Any]:
    if kind == "contains":
        args["text"] = _text(f"{where} text", args["text"])
    if kind in ("roles_spoke", "actions_ran"):
        listed = "roles" if kind == "roles_spoke" else "actions"
        args[listed] = _names(f"{where} {listed}", args[listed])
        order = args.setdefault("order", "in_order" if kind == "roles_spoke" else "any_order")
        if order not in ORDERS:
            raise EvalsetError(f"{where} order is one of {', '.join(ORDERS)}; not {order!r}"
                               f"{_suggest(str(order), list(ORDERS))}")
    if kind == "python":
        _python_args(where, args, folder)
    if kind == "python_runs" and "role" not in args and "action" not in args:
        raise EvalsetError(f"{where} needs the role (or the action) whose last message holds the code")
    for name in ("role", "action", "code_from", "tests_from", "model"):
        if name in args:
            args[name] = _text(f"{where} {name}", args[name])
    if "timeout" in args:
        _number(f"{where} timeout", args["timeout"], low=0.1)
    if kind == "judge":
        args["rubric"] = _text(f"{where} rubric", args["rubric"])
        samples = _number(f"{where} samples", args.setdefault("samples", 1), whole=True, low=1, high=15)
        if samples % 2 == 0:
            raise EvalsetError(f"{where} samples is odd (a majority of {samples} can tie); not {samples}")
    return args


def _parse_case(where: str, raw: Any, defaults: dict[str, Any], folder: Path | None = None) -> Case:
    if not isinstance(raw, dict):
        raise EvalsetError(f"{where} is a mapping with id, idea and expect; not {raw!r:.80}")
    _unknown(where, raw, CASE_KEYS)
    case_id = raw.get("id")
    if not isinstance(case_id, str) or not CASE_ID.fullmatch(case_id):
        raise EvalsetError(f"{where} id is 1 to 48 letters, digits, '_' or '-' (it names the case's runs); "
                           f"not {case_id!r}")
    where = f"case {case_id!r}"
    idea = _text(f"{where} idea", raw.get("idea"))
    n_round = _number(f"{where} n_round", raw.get("n_round", defaults["n_round"]), whole=True, low=1)
    investment = raw.get("investment", defaults.get("investment"))
    if investment is not None:
        _number(f"{where} investment", investment)
    expect = raw.get("expect", [])
    if not isinstance(expect, list):
        raise EvalsetError(f"{where} expect is a list of checks; not {expect!r:.80}")
    checks = tuple(parse_check(f"{where} check {i + 1}", item, folder) for i, item in enumerate(expect))
    return Case(case_id, idea, n_round, investment, checks)


def parse_evalset(raw: Any, path: Path | None = None) -> Evalset:
    """An :class:`Evalset` from the file's parsed content (a mapping)."""
    where = f"evalset {path}" if path is not None else "the evalset"
    if not isinstance(raw, dict):
        raise EvalsetError(f"{where} is a mapping with name, team and cases; not {type(raw).__name__}")
    _bounded(where, raw)  # first: every later step walks the values
    _unknown(where, raw, EVALSET_KEYS)
    for key in ("name", "team"):
        if key not in raw:
            raise EvalsetError(f"{where} needs {key!r}")
    if "cases" not in raw and "cases_file" not in raw:
        raise EvalsetError(f"{where} needs 'cases' (or 'cases_file')")
    name = _text(f"{where} name", raw["name"])
    team = _text(f"{where} team", raw["team"])
    if team.count(":") != 1 or not all(team.split(":")):
        raise EvalsetError(f"{where} team is `module:callable` (a factory returning a Team, or a Team), "
                           f"such as `my_team:build_team`; not {team!r}")
    defaults = {"n_round": raw.get("n_round", 5), "investment": raw.get("investment")}
    cases_raw = raw.get("cases", [])
    if not isinstance(cases_raw, list) or ("cases" in raw and not cases_raw):
        raise EvalsetError(f"{where} cases is a non-empty list")
    folder = path.parent if path is not None else None
    if "cases_file" in raw:
        cases_raw = [*cases_raw, *file_cases(f"{where} cases_file", raw["cases_file"], folder or Path.cwd(),
                                             defaults["n_round"])]
    cases = [_parse_case(f"{where} case {i + 1}", c, defaults, folder) for i, c in enumerate(cases_raw)]
    seen: set[str] = set()
    for case in cases:
        if case.id in seen:
            raise EvalsetError(f"{where}: two cases have the id {case.id!r}")
        seen.add(case.id)
    repeat = _number(f"{where} repeat", raw.get("repeat", 1), whole=True, low=1)
    check_plan_size(where, len(cases), repeat)
    return Evalset(
        name=name, team=team, cases=cases, path=path, repeat=repeat,
        threshold=float(_number(f"{where} threshold", raw.get("threshold", 1.0), high=1.0)),
        description=str(raw.get("description", "")),
    )


def check_plan_size(where: str, cases: int, repeat: int) -> None:
    """An :class:`EvalsetError` when ``cases`` x ``repeat`` runs are more than :data:`MAX_RUNS`."""
    if cases * repeat > MAX_RUNS:
        raise EvalsetError(f"{where}: {cases} case(s) x repeat {repeat} is {cases * repeat:,} runs, more than "
                           f"an eval plans ({MAX_RUNS:,}); lower repeat")


def _bounded(where: str, raw: Any) -> None:
    """An :class:`EvalsetError` when ``raw`` holds more than :data:`MAX_NODES` values once its shared parts
    (YAML aliases) are counted at each place they appear, nests deeper than :data:`MAX_DEPTH`, or holds
    itself. Each distinct container is visited once (its expanded size is remembered), so a file of
    nested aliases is measured in time linear in the file, never expanded."""
    sizes: dict[int, int] = {}
    visiting: set[int] = set()

    def size(value: Any, depth: int) -> int:
        if not isinstance(value, (dict, list)):
            return 1
        key = id(value)
        if key in sizes:
            return sizes[key]
        if depth > MAX_DEPTH:
            raise EvalsetError(f"{where} nests deeper than {MAX_DEPTH} levels")
        if key in visiting:
            raise EvalsetError(f"{where} holds itself (a YAML alias inside its own anchor)")
        visiting.add(key)
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        total = 1
        for item in items:
            total += size(item, depth + 1)
            if total > MAX_NODES:
                raise EvalsetError(f"{where} holds more than {MAX_NODES:,} values once its YAML aliases are "
                                   f"expanded (nested aliases: a \"billion laughs\"); write the values out")
        visiting.discard(key)
        sizes[key] = total
        return total

    size(raw, 0)


def load_evalset(path: str | Path) -> Evalset:
    """Read and check an evalset file (``.yaml``/``.yml`` or ``.json``)."""
    file = Path(path)
    try:
        data = read_at_most(file, MAX_BYTES)
    except OSError as exc:
        raise EvalsetError(f"cannot read the evalset {file}: {exc.strerror or exc}") from exc
    if data is None:
        raise EvalsetError(f"the evalset {file} is larger than {MAX_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
        raw = json.loads(text) if file.suffix.lower() == ".json" else yaml.safe_load(text)
    except (UnicodeDecodeError, ValueError, yaml.YAMLError) as exc:
        raise EvalsetError(f"the evalset {file} is not valid {'JSON' if file.suffix == '.json' else 'YAML'}: "
                           f"{printable(exc)[:500]}") from exc
    except RecursionError as exc:  # the parsers recurse on nesting
        raise EvalsetError(f"the evalset {file} nests too deeply") from exc
    return parse_evalset(raw, file.resolve())


__all__ = ["CHECKS", "Case", "Check", "Evalset", "load_evalset", "parse_check", "parse_evalset"]
