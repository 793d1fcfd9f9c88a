"""The package layering of architecture.md, and what importing the framework may not do."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = {"rolecast": 0, "memory": 1, "actions": 2, "roles": 3, "environment": 4}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found & set(LAYERS)


def test_imports_flow_one_way_only():
    violations = []
    for package, rank in LAYERS.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for imported in _imports(path):
                if LAYERS[imported] > rank:
                    violations.append(f"{path.relative_to(ROOT)} imports {imported}")
    assert violations == [], "imports against architecture.md's DAG:\n" + "\n".join(violations)


def test_the_layers_are_all_there():
    for package in LAYERS:
        assert (ROOT / package / "__init__.py").is_file()


def test_importing_the_framework_is_light_and_has_no_side_effects(tmp_path):
    code = (
        "import sys\n"
        "import roles, actions, environment, memory, rolecast\n"
        "heavy = [m for m in ('openai', 'llama_cpp', 'networkx', 'yaml', 'json5', 'defusedxml') "
        "if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = {
        "PATH": "/usr/bin:/bin",
        # a broken configuration must not matter until a model is needed
        "ROLECAST_CONFIG": str(tmp_path / "missing.yaml"),
        "ROLECAST_PROVIDER": "nonsense",
        "PYTHONPATH": str(ROOT),
    }
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "", f"imported at import time: {out.stdout.strip()}"
    assert out.stderr == ""  # loguru is disabled in the library: nothing is logged


def test_every_error_derives_from_the_root():
    import rolecast.errors as errors

    for name in errors.__all__:
        cls = getattr(errors, name)
        assert issubclass(cls, errors.RolecastError), name
