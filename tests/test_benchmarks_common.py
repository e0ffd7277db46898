"""benchmarks/_common.py: the Moccasin reference table typed once gives the
values the three scripts typed before; results land where they are named."""

import json

import pytest

from benchmarks import _common as common

# the tables of moccasin_protocol.py (TARGET), heuristics.py (PUBLISHED) and ortools_moccasin.py (RERUN_2CORE)
# before they were merged into _common
OLD_TARGET = {
    ("RLG1", 0.9): 0.79, ("RLG1", 0.8): 2.30, ("RLG2", 0.9): 0.9, ("RLG2", 0.8): 4.9,
    ("RLG4", 0.9): 0.7, ("RLG4", 0.8): 3.4, ("CM1", 0.9): 0.03, ("CM1", 0.8): 0.14,
    ("CM2", 0.9): 0.11, ("CM2", 0.8): 0.28,
}
OLD_HEURISTICS_COLUMN = {
    "rlg_n100": (0.79, 2.30), "rlg_n250": (0.9, 4.9), "rlg_n500": (None, None), "rlg_n1000": (0.7, 3.4),
    "fcn_8_vgg_b32_416x608_train": (0.0, 0.1), "resnet50_b256_224x224_train": (0.2, 0.3),
}
OLD_ORTOOLS_RERUN = {("rlg_n100", 0.9): "0.79", ("rlg_n100", 0.8): "2.30", ("rlg_n250", 0.9): "2.89",
                     ("rlg_n250", 0.8): "none", ("rlg_n500", 0.9): "none", ("rlg_n500", 0.8): "none",
                     ("rlg_n1000", 0.9): "none", ("rlg_n1000", 0.8): "none",
                     ("fcn_8_vgg_b32_416x608_train", 0.9): "0.03", ("fcn_8_vgg_b32_416x608_train", 0.8): "0.14",
                     ("resnet50_b256_224x224_train", 0.9): "0.11", ("resnet50_b256_224x224_train", 0.8): "0.28"}


def test_targets_are_the_better_of_published_and_rerun():
    for iid, _ in common.MOCCASIN_INSTANCES:
        for frac in (0.9, 0.8):
            assert common.moccasin_target(iid, frac) == OLD_TARGET.get((iid, frac)), (iid, frac)


def test_heuristics_and_ortools_columns_are_unchanged():
    for name, (a, b) in OLD_HEURISTICS_COLUMN.items():
        assert (common.moccasin_reported(name, 0.9), common.moccasin_reported(name, 0.8)) == (a, b)
    for (name, frac), cell in OLD_ORTOOLS_RERUN.items():
        assert common.reference_cell(common.moccasin_reference(name, frac).rerun_2core) == cell
    assert common.moccasin_reference("vgg16_b256_224x224_train", 0.9) is None


def test_write_results_names_and_prefixes(tmp_path):
    written = common.write_results("t", markdown="# x", json_doc={"a": 1}, csv_rows=[{"a": 1, "b": 2}],
                                   directory=tmp_path)
    assert sorted(p.name for p in written) == ["t.csv", "t.json", "t.md"]
    assert (tmp_path / "t.md").read_text() == "# x\n"
    assert json.loads((tmp_path / "t.json").read_text()) == {"a": 1}
    assert (tmp_path / "t.csv").read_text().splitlines() == ["a,b", "1,2"]
    common.write_results(str(tmp_path / "sub" / "u"), markdown="y")
    assert (tmp_path / "sub" / "u.md").read_text() == "y\n"


def test_command_and_paths():
    assert common.command("/x/benchmarks/optimality.py", ["--quick"]) == "python -m benchmarks.optimality --quick"
    assert common.stem(common.DATASETS / "resnet18_b64.json.gz") == "resnet18_b64"
    assert "resnet18_b64" in [common.stem(p) for p in common.profiled_graphs()]
    with pytest.raises(SystemExit, match="pip install ./plugins/nope"):
        common.require_plugin("hybrid_remat_no_such_plugin", "nope")


def test_no_benchmark_edits_sys_path_or_finds_the_repository_itself():
    """Scripts run as ``python -m benchmarks.NAME`` and take the repository's places from _common."""
    import pathlib

    here = pathlib.Path(common.__file__).parent
    for path in sorted(here.glob("*.py")):
        if path.name == "_common.py":
            continue
        text = path.read_text()
        assert "sys.path.insert" not in text and "sys.path.append" not in text, path.name
        assert "parents[1]" not in text and "os.path.dirname(HERE)" not in text, path.name
