"""Calling a firstresult hook implementation by implementation, and naming the plugin that answers
wrong (pluggy alone: no pytest run)."""

from __future__ import annotations

from collections.abc import Generator

import pluggy
import pytest

from pytest_roofline.plugin.hookcalls import HookResultError, first_result, is_device, registering_plugin

spec = pluggy.HookspecMarker("demo")
impl = pluggy.HookimplMarker("demo")


class Spec:
    @spec(firstresult=True)
    def demo_pick(self, x: int) -> object:
        """Pick something."""


def manager(*plugins: tuple[str, object]) -> pluggy.PluginManager:
    pm = pluggy.PluginManager("demo")
    pm.add_hookspecs(Spec)
    for name, plugin in plugins:
        pm.register(plugin, name=name)
    return pm


def says(answer: object, **opts: bool) -> object:
    class Plugin:
        @impl(**opts)
        def demo_pick(self, x: int) -> object:
            return answer

    return Plugin()


def ints(value: object) -> str:
    return "" if isinstance(value, int) else "expected an int"


def test_the_first_answer_in_pluggys_order_wins_as_with_the_hook_itself() -> None:
    pm = manager(
        ("early", says(1)), ("none", says(None)), ("last", says(None)), ("first", says(3, tryfirst=True))
    )
    assert first_result(pm.hook.demo_pick, ints, x=0) == pm.hook.demo_pick(x=0) == 3
    pm = manager(("early", says(1)), ("late", says(2)), ("fallback", says(9, trylast=True)))
    assert first_result(pm.hook.demo_pick, ints, x=0) == pm.hook.demo_pick(x=0) == 2


def test_nobody_answering_is_none() -> None:
    assert first_result(manager(("quiet", says(None))).hook.demo_pick, ints, x=0) is None


def test_a_wrong_answer_names_the_hook_and_the_plugin() -> None:
    pm = manager(("fallback", says(9, trylast=True)), ("my-plugin", says("nine")))
    with pytest.raises(
        HookResultError, match=r"^demo_pick in my-plugin returned 'nine' \(a str\): expected an int$"
    ):
        first_result(pm.hook.demo_pick, ints, x=0)


def test_with_a_wrapper_the_hook_is_called_whole_and_only_the_hook_named() -> None:
    class Wrapper:
        @impl(wrapper=True)
        def demo_pick(self, x: int) -> Generator[None, object, object]:
            answer = yield
            return f"wrapped {answer}"

    pm = manager(("plain", says(1)), ("wrapper", Wrapper()))
    with pytest.raises(HookResultError, match=r"^demo_pick returned 'wrapped 1' \(a str\): expected an int$"):
        first_result(pm.hook.demo_pick, ints, x=0)


def test_is_device() -> None:
    assert is_device("cpu") == "expected a pytest_roofline.Device"


def test_registering_plugin_is_the_file_of_the_hook_on_the_stack() -> None:
    def pytest_roofline_register_ops() -> str:
        return registering_plugin("pytest_roofline_register_ops")

    assert pytest_roofline_register_ops() == __file__
    assert registering_plugin("pytest_roofline_register_ops") == ""
