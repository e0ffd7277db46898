"""Test the plugin's code in this checkout (its src/ first on sys.path), with
its entry point from the pip-installed distribution."""

import pathlib
import sys

SRC = str(pathlib.Path(__file__).resolve().parents[1] / "src")
if SRC not in sys.path:
    sys.path.insert(0, SRC)
