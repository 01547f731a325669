"""The component registry: custom and entry-point components, duplicates, errors, light imports."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path
from typing import Iterator, Mapping

import numpy as np
import pytest

import rewardkit.registry as registry
from rewardkit import BaseReward, ConfigError, Param, RewardComposer, get_component_class, register, registered
from rewardkit.components import Linear


class Doubler(BaseReward):
    """factor*x: a test component."""

    inputs = {"x": 0}
    params = {"factor": Param.positive(2.0, "multiplier")}

    def compute(self, x: Mapping[str, np.ndarray], terminated: np.ndarray, truncated: np.ndarray) -> np.ndarray:
        return self.factor * x["x"]


@pytest.fixture
def doubler() -> Iterator[type[BaseReward]]:
    """``Doubler`` registered as ``test_doubler`` for the duration of a test."""
    register("test_doubler")(Doubler)
    try:
        yield Doubler
    finally:
        registry._REGISTRY.pop("test_doubler", None)


def test_custom_component_in_a_config(doubler):
    assert "test_doubler" in registered()
    assert get_component_class("test_doubler") is doubler
    c = RewardComposer.from_dict({"version": 1, "components": {
        "twice": {"type": "test_doubler", "params": {"factor": 3}, "weight": 0.5, "inputs": {"x": "signal"}},
    }})
    assert c({"signal": 2.0}).total == 3.0
    np.testing.assert_array_equal(c({"signal": np.array([1.0, -1.0])}).total, [1.5, -1.5])
    assert c.to_dict()["components"]["twice"] == {"type": "test_doubler", "params": {"factor": 3.0},
                                                  "inputs": {"x": "signal"}, "weight": 0.5}
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"t": {"type": "test_doubler",
                                                                     "params": {"factor": -1}}}})
    assert str(info.value) == "<dict>: components.t.params.factor: expected a positive number, got -1"


def test_registration_is_removed_after_the_fixture():
    assert "test_doubler" not in registered()


def test_duplicate_name_raises(doubler):
    class Other(Doubler):
        """another."""

    with pytest.raises(ValueError, match="component name 'test_doubler' is already registered to Doubler"):
        register("test_doubler")(Other)
    with pytest.raises(ValueError, match="component name 'linear' is already registered to Linear"):
        register("linear")(Other)
    assert get_component_class("linear") is Linear
    register("test_doubler")(Doubler)  # the same class again is harmless
    register("test_doubler", replace=True)(Other)
    assert get_component_class("test_doubler") is Other


@pytest.mark.parametrize("name", ["", "group", None])
def test_reserved_or_empty_names_raise(name):
    with pytest.raises(ValueError, match="component name must be a non-empty string other than 'group'"):
        register(name)


def test_only_base_reward_subclasses_register():
    with pytest.raises(TypeError, match=r"@register\('x_not_a_reward'\) needs a BaseReward subclass"):
        register("x_not_a_reward")(dict)
    assert "x_not_a_reward" not in registry._REGISTRY


def test_unknown_type_lists_registered_names(doubler):
    with pytest.raises(ConfigError) as info:
        get_component_class("nope")
    names = registered()
    assert "test_doubler" in names and "logistic_latency" in names
    assert str(info.value) == "expected a registered component type, got 'nope'; registered: " + ", ".join(names)
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "nope"}}})
    assert str(info.value).startswith("<dict>: components.a.type: expected a registered component type, got 'nope'; "
                                      "registered: ")
    assert str(info.value).endswith(", ".join(names))


PLUGIN = '''
import numpy as np
from rewardkit import BaseReward, Param


class Offset(BaseReward):
    """x + offset: a component shipped by another package."""

    inputs = {"x": 0}
    params = {"offset": Param.number(1.0, "added to x")}

    def compute(self, x, terminated, truncated):
        return x["x"] + self.offset
'''


@pytest.fixture
def plugin_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """A package on sys.path that declares ``plugin_offset`` through the entry-point group."""
    module = "rk_test_plugin_pkg"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(PLUGIN), encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    calls: list[str] = []
    real = metadata.entry_points

    def fake_entry_points(**kwargs):
        group = kwargs.get("group")
        calls.append(group)
        if group != registry.ENTRY_POINT_GROUP:
            return real(**kwargs)
        return metadata.EntryPoints([
            metadata.EntryPoint(name="plugin_offset", value=f"{module}:Offset", group=group),
            # a name that is already registered is left alone (built-ins win)
            metadata.EntryPoint(name="linear", value=f"{module}:Offset", group=group),
        ])

    monkeypatch.setattr(registry.metadata, "entry_points", fake_entry_points)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        yield calls
    finally:
        registry._REGISTRY.pop("plugin_offset", None)
        sys.modules.pop(module, None)


def test_entry_point_component_is_discovered(plugin_entry_point):
    assert "plugin_offset" not in registry._REGISTRY
    with pytest.warns(registry.PluginWarning, match="skipped component plugin 'linear'.*already registered by "
                                                     "rewardkit.components"):
        cls = get_component_class("plugin_offset")
    assert plugin_entry_point == [registry.ENTRY_POINT_GROUP]
    assert cls.__name__ == "Offset" and cls.type_name == "plugin_offset"
    assert get_component_class("linear") is Linear
    assert "plugin_offset" in registered()
    assert plugin_entry_point == [registry.ENTRY_POINT_GROUP]  # entry points are read once
    c = RewardComposer.from_dict({"version": 1, "components": {
        "o": {"type": "plugin_offset", "params": {"offset": 0.5}}}})
    assert c({"x": 2.0}).total == 2.5


def test_entry_points_are_read_for_a_config_naming_a_plugin(plugin_entry_point):
    with pytest.warns(registry.PluginWarning, match="'linear'"):
        c = RewardComposer.from_dict({"version": 1, "components": {"o": {"type": "plugin_offset"}}})
    assert c({"x": 1.0}).total == 2.0
    assert plugin_entry_point == [registry.ENTRY_POINT_GROUP]


def test_import_rewardkit_stays_light():
    code = ("import sys, rewardkit, rewardkit.composer, rewardkit.config, rewardkit.schedules; "
            "heavy = ('torch', 'optuna', 'gymnasium', 'vidur', 'pandas', 'matplotlib'); "
            "print(','.join(m for m in heavy if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == ""


# ---- broken plugins and typos -------------------------------------------------------------------
@pytest.fixture
def broken_entry_points(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Three plugins: one whose module fails to import, one that is not a component, one that works."""
    module = "rk_test_broken_plugin"
    (tmp_path / f"{module}.py").write_text(textwrap.dedent(PLUGIN) + "\nNOT_A_COMPONENT = 3\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    group = registry.ENTRY_POINT_GROUP

    def fake_entry_points(**kwargs):
        if kwargs.get("group") != group:
            return metadata.entry_points(**kwargs)
        return metadata.EntryPoints([
            metadata.EntryPoint(name="plugin_missing", value="rk_no_such_module_anywhere:Thing", group=group),
            metadata.EntryPoint(name="plugin_wrong", value=f"{module}:NOT_A_COMPONENT", group=group),
            metadata.EntryPoint(name="plugin_good", value=f"{module}:Offset", group=group),
        ])

    monkeypatch.setattr(registry.metadata, "entry_points", fake_entry_points)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        yield
    finally:
        for name in ("plugin_missing", "plugin_wrong", "plugin_good"):
            registry._REGISTRY.pop(name, None)
        sys.modules.pop(module, None)


def test_broken_plugin_is_a_warning_naming_its_entry_point(broken_entry_points):
    with pytest.warns(registry.PluginWarning) as record:
        names = registered()
    messages = [str(w.message) for w in record]
    assert len(messages) == 2
    assert messages[0].startswith("rewardkit: skipped component plugin 'plugin_missing' (entry point "
                                  "'rk_no_such_module_anywhere:Thing' in group 'rewardkit.components'): "
                                  "ModuleNotFoundError: No module named 'rk_no_such_module_anywhere'")
    assert "'plugin_wrong'" in messages[1] and "needs a BaseReward subclass" in messages[1]
    assert "plugin_good" in names and "plugin_missing" not in names
    c = RewardComposer.from_dict({"version": 1, "components": {"o": {"type": "plugin_good"}}})
    assert c({"x": 1.0}).total == 2.0


def test_a_plugin_calling_sys_exit_at_import_is_a_warning_not_the_end_of_the_process(tmp_path, monkeypatch):
    (tmp_path / "rk_exiting_plugin.py").write_text("import sys\nsys.exit('no GPU here')\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    group = registry.ENTRY_POINT_GROUP

    def fake_entry_points(**kwargs):
        if kwargs.get("group") != group:
            return metadata.entry_points(**kwargs)
        return metadata.EntryPoints([metadata.EntryPoint(name="plugin_exit", value="rk_exiting_plugin:X", group=group)])

    monkeypatch.setattr(registry.metadata, "entry_points", fake_entry_points)
    monkeypatch.setattr(registry, "_entry_points_loaded", False)
    try:
        with pytest.warns(registry.PluginWarning, match="'plugin_exit'.*SystemExit: no GPU here"):
            with pytest.raises(ConfigError, match="expected a registered component type, got 'no_such_type'"):
                get_component_class("no_such_type")
    finally:
        sys.modules.pop("rk_exiting_plugin", None)


def test_type_typo_suggests_the_closest_names(doubler):
    with pytest.raises(ConfigError) as info:
        RewardComposer.from_dict({"version": 1, "components": {"a": {"type": "logistc_latency"}}})
    message = str(info.value)
    assert message.startswith("<dict>: components.a.type: expected a registered component type, got "
                              "'logistc_latency' (did you mean 'logistic_latency'")
    assert message.endswith("registered: " + ", ".join(registered()))
    with pytest.raises(ConfigError, match=r"got 'test_doubel' \(did you mean 'test_doubler'\?\)"):
        get_component_class("test_doubel")


# ---- checks at registration ---------------------------------------------------------------------
def _component(**attrs) -> type[BaseReward]:
    base = {"__doc__": "test component.", "inputs": {"x": 0},
            "compute": lambda self, x, terminated, truncated: x["x"]}
    return type("Checked", (BaseReward,), {**base, **attrs})


@pytest.mark.parametrize("attrs, problem", [
    ({"monotone": {"y": "increasing"}}, "monotone names 'y', which is not a declared input (x)"),
    ({"monotone": {"x": "up"}}, "monotone['x'] must be 'increasing' or 'decreasing', got 'up'"),
    ({"inputs": {"x": "scalar"}}, "inputs must map input names to numbers of axes"),
    ({"inputs": {"x": True}}, "inputs must map input names to numbers of axes"),
    ({"optional_inputs": frozenset({"z"})}, "optional_inputs must be a set of declared inputs (x)"),
    ({"params": {"k": 2.0}}, "params['k'] must be a Param, got 2.0"),
    ({"params": {"name": Param.number(1.0)}}, "parameter name 'name' must be an identifier that is not a "
                                              "BaseReward attribute"),
    ({"params": {"not-valid": Param.number(1.0)}}, "parameter name 'not-valid' must be an identifier"),
    ({"params": {"k": Param.positive(-1.0)}}, "params['k'] default -1.0 fails its own check (expected a positive "
                                              "number)"),
    ({"output_range": (1.0, 0.0)}, "output_range must be (low, high) numbers with low <= high, got (1.0, 0.0)"),
    ({"output_range": [0.0, 1.0]}, "output_range must be (low, high) numbers"),
    ({"stateful": "yes"}, "stateful must be True or False, got 'yes'"),
    ({"compute": BaseReward.compute}, "must implement compute()"),
])
def test_register_checks_the_declarations(attrs, problem):
    cls = _component(**attrs)
    with pytest.raises(TypeError) as info:
        register("x_checked")(cls)
    assert str(info.value).startswith("@register('x_checked'): Checked ")
    assert problem in str(info.value)
    assert "x_checked" not in registry._REGISTRY


def test_register_reports_every_problem_at_once():
    cls = _component(monotone={"y": "up"}, stateful=1)
    with pytest.raises(TypeError) as info:
        register("x_checked")(cls)
    assert str(info.value).count(";") == 2  # three problems


def test_well_declared_component_registers():
    cls = _component(monotone={"x": "increasing"}, params={"k": Param.positive(1.0)}, output_range=(-1.0, 1.0))
    try:
        assert register("x_checked")(cls) is cls
        assert cls.type_name == "x_checked"
    finally:
        registry._REGISTRY.pop("x_checked", None)


def test_builtins_pass_the_checks():
    for name in registered():
        assert registry.declaration_problems(get_component_class(name)) == [], name


def test_one_class_under_two_names_is_refused(doubler):
    with pytest.raises(ValueError, match=r"^Doubler is already registered as 'test_doubler'; register a subclass "
                                         r"to offer it under 'test_doubler_2' too$"):
        register("test_doubler_2")(Doubler)
    assert "test_doubler_2" not in registry._REGISTRY
    assert Doubler.type_name == "test_doubler"

    class Alias(Doubler):
        """the same maths under a second name."""

    try:
        register("test_doubler_2")(Alias)
        assert get_component_class("test_doubler_2") is Alias and Doubler.type_name == "test_doubler"
    finally:
        registry._REGISTRY.pop("test_doubler_2", None)
