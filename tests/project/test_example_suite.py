"""The example project's conftest: a bad variant (``@misses_roofline``) ends as designed whatever its
verdict. A miss xfails; a pass fails (its budget no longer tells it from the good variant); an
inconclusive verdict, a busy machine's, skips saying why, where the strict xfail alone failed it."""

from __future__ import annotations

import shutil

import pytest
from conftest import COPY, REPO_ROOT, fake_conftest

EXAMPLE = REPO_ROOT / "example_project"

_NOISY_BACKEND = """

from fakes import FakeBackend

# 2.4 and 2.6 ms in turn: the median's interval never narrows below ±4%, around 80% attained
BACKEND = FakeBackend(lambda i: 2.4e-3 if i % 2 else 2.6e-3, resolution_s=1e-9)


def pytest_roofline_backend(config, device, spec):
    return BACKEND
"""


@pytest.mark.parametrize(
    ("budget", "outcome"),
    [(0.95, {"xfailed": 1}), (0.8, {"skipped": 1}), (0.5, {"failed": 1})],
    ids=["miss", "inconclusive", "pass"],
)
def test_a_bad_variant_ends_as_designed(
    pytester: pytest.Pytester, budget: float, outcome: dict[str, int]
) -> None:
    pytester.makeconftest(fake_conftest(backend=False, extra=_NOISY_BACKEND))
    example = pytester.mkdir("example")  # the example's conftest, and what it imports
    for name in ("conftest.py", "budgets.py"):
        shutil.copy(EXAMPLE / name, example / name)
    shutil.copytree(EXAMPLE / "kernels", example / "kernels")
    (example / "test_bad.py").write_text(
        "from budgets import misses_roofline\n\n\n"
        '@misses_roofline("a bad variant")\n'
        "def test_bad(roofline):\n"
        f'    roofline(lambda: None, op="copy", {COPY}, dtype="fp32", min_fraction={budget})\n'
    )
    result = pytester.runpytest_subprocess("example", "-rsx", "-W", "default")
    result.assert_outcomes(**outcome)
    if "skipped" in outcome:
        result.stdout.fnmatch_lines(
            ["SKIPPED*a bad variant whose verdict is inconclusive shows no miss: copy[[]n=25000000 fp32[]] is"
             " inconclusive*", "*straddles the budget*"]
        )  # fmt: skip
