"""A team hiring a remote A2A agent, for the serving tests: ``python hire_remote.py URL STORE RUN_ID``.
Prints the history as JSON lines (tests/serve_teams.py:hiring has the team)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.serve_teams import hiring


def main() -> int:
    url, store, run_id = sys.argv[1:4]
    history = hiring(url, store, run_id).run_sync(n_round=4, idea="a poem about rivers")
    for m in history:
        print(json.dumps({"from": m.sent_from, "content": m.content}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
