"""The README's Python examples, saved as a script (no ``__main__`` guard,
as written there) and run: they finish, once (issue 23.1: a ``spawn`` pool
re-ran the script in every worker, for ever)."""

import os
import re
import subprocess
import sys

import pytest

from hybrid_remat.plugins import DISABLE_ENV

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def readme_python_blocks() -> list[str]:
    with open(os.path.join(ROOT, "README.md")) as f:
        text = f.read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_the_readme_examples_run_as_a_saved_script(tmp_path):
    pytest.importorskip("matplotlib")
    blocks = readme_python_blocks()
    assert len(blocks) >= 2 and any("hr.sweep(" in b for b in blocks)
    # the same script with short limits (the structure, not the figures, is what is tested)
    script = "\n".join(re.sub(r"time_limit=\d+(\.\d+)?", "time_limit=2", b) for b in blocks)
    assert "__main__" not in script
    path = tmp_path / "readme_example.py"
    path.write_text(script)
    env = {**os.environ, "PYTHONPATH": ROOT, DISABLE_ENV: "1", "TMPDIR": str(tmp_path), "MPLBACKEND": "Agg"}
    out = subprocess.run([sys.executable, str(path)], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=600)  # a guard against the endless re-runs, not a speed test
    assert out.returncode == 0, out.stderr[-3000:]
    assert len(out.stdout.strip().splitlines()) == 1, out.stdout  # the top level ran once: no worker re-ran it
    assert "Traceback" not in out.stderr, out.stderr[-3000:]
    for name in ("resnet50.plan.json", "timeline.png", "sweep.csv", "pareto.png"):
        assert (tmp_path / name).exists(), name
