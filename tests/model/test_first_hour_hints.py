"""The small things a newcomer's first hour tripped on (issue 43, item 8): each mistake's message
names the likely fix."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_roofline.errors import InvalidValueError
from pytest_roofline.model.core import did_you_mean
from pytest_roofline.model.llm import load_config
from pytest_roofline.model.op_registry import get_op
from pytest_roofline.model.verdict import check_fraction

CONFIGS = Path(__file__).resolve().parents[2] / "pytest_roofline" / "configs"


def test_a_prefix_of_three_devices_names_all_three() -> None:
    """``--device h100`` suggested h100-nvl and h100-pcie, not h100-sxm, the one the docs use."""
    assert did_you_mean("h100", ["a100-sxm-80gb", "h100-nvl", "h100-pcie", "h100-sxm", "h200"]) == (
        " (did you mean 'h100-nvl', 'h100-pcie' or 'h100-sxm'?)"
    )
    assert did_you_mean("gemn", ["gemm", "gemv", "copy"]) == " (did you mean 'gemm' or 'gemv'?)"


@pytest.mark.parametrize(("name", "op"), [("matmul", "gemm"), ("SDPA", "attention"), ("mv", "gemv")])
def test_a_libraries_name_for_an_op_suggests_the_catalogues(name: str, op: str) -> None:
    with pytest.raises(ValueError, match=rf"unknown op '{name}' \(did you mean '{op}'\?\); known ops: "):
        get_op(name)


@pytest.mark.parametrize(
    ("value", "hint"),
    [(70, " (did you mean 0.7, 70%?)"), (100, " (did you mean 1, 100%?)"), (250, ""), (0, ""), (-0.5, "")],
)
def test_a_budget_written_as_a_percentage_suggests_the_fraction(value: float, hint: str) -> None:
    with pytest.raises(InvalidValueError) as info:
        check_fraction(value)
    assert str(info.value) == f"min_fraction must be a number in (0, 1]; got {value!r}{hint}"


def test_a_config_json_in_the_working_folder_is_named_after_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``roofline llm config.json`` run in the config's folder printed an empty model name."""
    folder = tmp_path / "Meta-Llama-3-8B"
    folder.mkdir()
    (folder / "config.json").write_text((CONFIGS / "llama-3-8b.json").read_text())
    monkeypatch.chdir(folder)

    assert load_config("config.json").name == "Meta-Llama-3-8B"
