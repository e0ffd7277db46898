"""The plugin manager: registration paths, isolation of broken plugins,
entry-point discovery (through real dist-info metadata on sys.path), the
autoload switch, the block list and the ``hybrid-remat plugins`` table."""

from __future__ import annotations

import os
import sys
import textwrap
import warnings

import pytest

from hybrid_remat import plugins
from hybrid_remat.errors import PluginError
from hybrid_remat.plugin_report import format_plugin_table, plugin_rows

FIXTURES = os.path.join(os.path.dirname(__file__), "plugins")


def fixture(name: str) -> str:
    return os.path.join(FIXTURES, f"{name}.py")


@pytest.fixture(autouse=True)
def clean_registry(monkeypatch):
    """Each test starts from a fresh manager without third-party entry points."""
    monkeypatch.setenv(plugins.DISABLE_ENV, "1")
    monkeypatch.delenv(plugins.BLOCK_ENV, raising=False)
    plugins.reset()
    yield
    plugins.reset()


def messages(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, plugins.PluginWarning)]


# ------------------------------------------------------------------ built-ins
def test_builtins_register_through_the_hooks():
    regs = plugins.registered()
    assert {r.source for r in regs} == {"builtin"}
    assert "keep_all" in plugins.heuristics()
    assert {"remat-graph", "node-link"} <= set(plugins.loaders())
    assert "profiled" in plugins.cost_models()
    assert plugins.identity("heuristics", "keep_all") == "hybrid_remat.builtin.heuristics:keep_all@1"
    assert plugins.problems() == []


def test_one_builtin_module_per_hook():
    """``builtin/`` says the kind: one module per hook of the contract, named after it, holding only that
    hook, and every registered built-in comes from the module of its kind."""
    import importlib
    import pathlib

    from hybrid_remat import hookspecs

    hooks = sorted(a for a in dir(hookspecs) if a.startswith("hybrid_remat_register_"))
    kinds = [h.removeprefix("hybrid_remat_register_") for h in hooks]
    assert sorted(kinds) == sorted(["heuristics", "bounds", "improvers", "formulations", "cost_models", "loaders"])
    folder = pathlib.Path(hookspecs.__file__).parent / "builtin"
    assert sorted(p.stem for p in folder.glob("*.py") if p.stem != "__init__") == sorted(kinds)
    assert sorted(plugins.DEFAULT_PLUGINS) == sorted(f"hybrid_remat.builtin.{k}" for k in kinds)
    for kind in kinds:
        module = importlib.import_module(f"hybrid_remat.builtin.{kind}")
        assert [a for a in dir(module) if a.startswith("hybrid_remat_")] == [f"hybrid_remat_register_{kind}"]
    for r in plugins.registered():
        assert r.plugin == f"hybrid_remat.builtin.{r.kind}", (r.kind, r.name, r.plugin)


def test_identity_of_unknown_object_is_a_plugin_error():
    with pytest.raises(PluginError, match="no heuristics named 'nope'"):
        plugins.identity("heuristics", "nope")


# ----------------------------------------------------------- run-time / path
def test_register_path_adds_every_kind_with_provenance():
    name = plugins.register_path(fixture("good_plugin"))
    assert name == "good_plugin"
    rows = {(r.kind, r.name): r for r in plugins.registered()}
    for key in [("heuristics", "fixture_reference"), ("formulations", "fixture_echo"),
                ("cost_models", "fixture_unit"), ("loaders", "fixture_edgelist")]:
        assert rows[key].plugin == "good_plugin"
        assert rows[key].source == f"path:{fixture('good_plugin')}"
    assert plugins.identity("formulations", "fixture_echo") == "good_plugin:fixture_echo@1.0"
    plugins.unregister("good_plugin")
    assert "fixture_reference" not in plugins.heuristics()


def test_register_object_at_run_time_and_unregister():
    from hybrid_remat import hookimpl
    from hybrid_remat.interfaces import Heuristic

    class H(Heuristic):
        name = "runtime_h"

        def run(self, problem, *, seed=0):
            return None

    class Plugin:
        @hookimpl
        def hybrid_remat_register_heuristics(self):
            return [H()]

    assert plugins.register(Plugin(), name="mine") == "mine"
    assert "runtime_h" in plugins.heuristics()
    assert [r.source for r in plugins.registered() if r.name == "runtime_h"] == ["runtime"]
    with pytest.raises(PluginError, match="'mine'"):
        plugins.register(Plugin(), name="mine")  # the name is taken
    plugins.unregister("mine")
    assert "runtime_h" not in plugins.heuristics()
    with pytest.raises(PluginError, match="no plugin named 'mine'"):
        plugins.unregister("mine")


# -------------------------------------------------------------- broken plugins
def test_duplicate_object_name_keeps_the_first_and_warns_with_the_plugin_name():
    with pytest.warns(plugins.PluginWarning) as rec:
        plugins.register_path(fixture("duplicate_name"))
        hs = plugins.heuristics()
    assert hs["keep_all"].version == "1"  # the built-in kept its name
    assert "fixture_fresh" in hs  # the plugin's other object is still registered
    msg = " ".join(messages(rec))
    assert "'duplicate_name'" in msg and "'keep_all'" in msg and "already registered" in msg
    assert any("duplicate_name" in m for m in plugins.problems())


def test_wrong_signature_is_refused_naming_the_plugin():
    with pytest.raises(PluginError, match=r"'wrong_signature'.*problem"):
        plugins.register_path(fixture("wrong_signature"))
    assert "keep_all" in plugins.heuristics()


def test_unknown_hook_name_is_refused():
    with pytest.raises(PluginError, match=r"'unknown_hook'.*unknown hook.*hybrid_remat_register_heuristic\b"):
        plugins.register_path(fixture("unknown_hook"))
    assert plugins.get_plugin_manager().get_plugin("unknown_hook") is None


def test_raising_hook_is_skipped_and_the_rest_goes_on():
    plugins.register_path(fixture("raising_hook"))
    with pytest.warns(plugins.PluginWarning, match=r"'raising_hook'.*boom from raising_hook"):
        hs = plugins.heuristics()
    assert "keep_all" in hs
    assert "fixture_zero" in plugins.cost_models()  # its other hook still counts


def test_bad_objects_are_skipped_one_by_one():
    plugins.register_path(fixture("bad_objects"))
    with pytest.warns(plugins.PluginWarning) as rec:
        hs = plugins.heuristics()
    msg = messages(rec)
    assert "fixture_fine" in hs
    assert not {"fixture_no_run", "fixture_string_caps"} & set(hs)
    assert any("has no name" in m and "'bad_objects'" in m for m in msg)
    assert any("'fixture_no_run' lacks run" in m for m in msg)
    assert any("'fixture_string_caps' has capabilities" in m for m in msg)
    assert any("must return a list" in m and "'bad_objects'" in m for m in msg)


def test_wrapper_registration_hook_is_skipped():
    plugins.register_path(fixture("wrapper_hook"))
    with pytest.warns(plugins.PluginWarning, match="'wrapper_hook'.*must not be a wrapper"):
        assert "keep_all" in plugins.heuristics()


def test_plugin_file_that_fails_to_import():
    with pytest.raises(PluginError, match="import failed.*cannot be imported"):
        plugins.register_path(fixture("import_error"))


def test_warnings_are_listed_in_the_plugin_table():
    plugins.register_path(fixture("good_plugin"))
    plugins.register_path(fixture("raising_hook"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", plugins.PluginWarning)
        table = format_plugin_table()
    lines = table.splitlines()
    assert lines[0].split() == ["kind", "name", "version", "plugin", "source", "capabilities"]
    assert any(ln.split()[:4] == ["heuristic", "fixture_reference", "1.0", "good_plugin"] for ln in lines)
    assert any(ln.startswith("cost_model") and "fixture_unit" in ln and "analytic" in ln for ln in lines)
    assert any(ln.startswith("warning:") and "raising_hook" in ln for ln in lines)
    assert "autoloading is off" in table
    assert len([r for r in plugin_rows() if r["kind"] == "loader"]) == 3


# ---------------------------------------------------------------- entry points
def make_distribution(root, dist: str, ep_name: str, module: str, body: str) -> None:
    """A real installed-looking distribution: dist-info metadata + module on sys.path."""
    info = root / f"{dist.replace('-', '_')}-0.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(f"[hybrid_remat]\n{ep_name} = {module}\n")
    (root / f"{module}.py").write_text(textwrap.dedent(body))


EP_BODY = """
    from hybrid_remat import hookimpl
    from hybrid_remat.interfaces import Heuristic

    class EpHeuristic(Heuristic):
        name = "{name}"
        version = "0.3"

        def run(self, problem, *, seed=0):
            return None

    @hookimpl
    def hybrid_remat_register_heuristics():
        return [EpHeuristic()]
"""


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for mod in [m for m in sys.modules if m.startswith("hrfake_")]:
        del sys.modules[mod]


def test_entry_point_discovery_and_autoload_switch(fake_site, monkeypatch):
    make_distribution(fake_site, "hrfake-one", "one", "hrfake_one", EP_BODY.format(name="ep_heuristic"))
    plugins.reset()
    assert "ep_heuristic" not in plugins.heuristics()  # autoload is off in this test module
    monkeypatch.setenv(plugins.DISABLE_ENV, "0")  # "0" means on
    plugins.reset()
    reg = [r for r in plugins.registered() if r.name == "ep_heuristic"]
    assert len(reg) == 1
    assert reg[0].source == "entrypoint:hrfake-one" and reg[0].dist_version == "0.3"
    assert reg[0].identity == "one:ep_heuristic@0.3"
    assert any("entrypoint:hrfake-one 0.3" in ln for ln in format_plugin_table().splitlines())


def test_blocked_entry_point(fake_site, monkeypatch):
    make_distribution(fake_site, "hrfake-two", "two", "hrfake_two", EP_BODY.format(name="ep_two"))
    monkeypatch.setenv(plugins.DISABLE_ENV, "")
    monkeypatch.setenv(plugins.BLOCK_ENV, "two, other")
    plugins.reset()
    assert "ep_two" not in plugins.heuristics()
    monkeypatch.delenv(plugins.BLOCK_ENV)
    plugins.reset()
    assert "ep_two" in plugins.heuristics()


def test_entry_point_that_fails_to_import_is_skipped(fake_site, monkeypatch):
    make_distribution(fake_site, "hrfake-broken", "broken", "hrfake_broken", "raise RuntimeError('no deps here')\n")
    make_distribution(fake_site, "hrfake-fine", "fine", "hrfake_fine", EP_BODY.format(name="ep_fine"))
    monkeypatch.setenv(plugins.DISABLE_ENV, "")
    plugins.reset()
    with pytest.warns(plugins.PluginWarning, match=r"'broken' \(entrypoint:hrfake-broken\).*no deps here"):
        plugins.get_plugin_manager()
    assert "ep_fine" in plugins.heuristics()
    assert "keep_all" in plugins.heuristics()


def test_entry_point_name_clash_between_distributions(fake_site, monkeypatch, tmp_path_factory):
    make_distribution(fake_site, "hrfake-a", "same", "hrfake_a", EP_BODY.format(name="ep_a"))
    other = tmp_path_factory.mktemp("site2")
    make_distribution(other, "hrfake-b", "same", "hrfake_b", EP_BODY.format(name="ep_b"))
    monkeypatch.syspath_prepend(str(other))
    monkeypatch.setenv(plugins.DISABLE_ENV, "")
    plugins.reset()
    with pytest.warns(plugins.PluginWarning, match="'same'.*already taken"):
        plugins.get_plugin_manager()
    hs = plugins.heuristics()
    assert ("ep_a" in hs) != ("ep_b" in hs)


def test_entry_point_cannot_shadow_a_builtin_module_name(fake_site, monkeypatch):
    make_distribution(fake_site, "hrfake-shadow", "hybrid_remat.builtin.heuristics", "hrfake_shadow",
                      EP_BODY.format(name="ep_shadow"))
    monkeypatch.setenv(plugins.DISABLE_ENV, "")
    plugins.reset()
    with pytest.warns(plugins.PluginWarning, match="already taken by a plugin from builtin"):
        plugins.get_plugin_manager()
    assert "ep_shadow" not in plugins.heuristics()
    assert "keep_all" in plugins.heuristics()
