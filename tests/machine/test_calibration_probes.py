"""A cache that never gets worse by accident: the better figure kept on a forced calibration, the
sanity rules that measure an impossible calibration again, and the probes measured beside each figure."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from fake_calibration import FakeMeasure, cached_payload, private_cache

from pytest_roofline.errors import RooflineWarning
from pytest_roofline.machine import calibrate, cpupeak
from pytest_roofline.machine.cachelevels import level_details
from pytest_roofline.machine.calibrate import calibrate_cpu
from pytest_roofline.machine.calibration_cache import Ceilings
from pytest_roofline.model.core import Figure, Precision, Source, Unit

P, V = Precision, Unit.VECTOR


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return private_cache(tmp_path, monkeypatch)


@pytest.fixture
def fake() -> FakeMeasure:
    return FakeMeasure()


def with_probes(fake: FakeMeasure, *, rate: float = 10e9) -> FakeMeasure:
    from pytest_roofline.model.paired_ceilings import ProbeReference

    c = fake.ceilings
    fake.ceilings = dataclasses.replace(
        c,
        probes={
            "bandwidth": ProbeReference("bandwidth", "copy", 2**26, c.bandwidth.value, rate, rate, "2026-11"),
            "fp64": ProbeReference("fp64", "matmul", 256, c.peaks[(P.FP64, V)].value, 1e9, 1e9, "2026-11-01"),
        },
    )
    return fake


def test_probes_travel_through_the_cache(cache: Path) -> None:
    first = calibrate_cpu(measure=with_probes(FakeMeasure()))
    again = calibrate_cpu(measure=FakeMeasure())
    assert again.from_cache
    assert again.probes == first.probes
    assert again.probes["bandwidth"].name == "copy 2×64 MiB"


def test_force_keeps_the_better_figure_and_warns_naming_the_lower_ones(cache: Path) -> None:
    calibrate_cpu(measure=with_probes(FakeMeasure(bandwidth=20e9, fp64=100e9, fp32=200e9)))
    busy = with_probes(FakeMeasure(bandwidth=5e9, fp64=110e9, fp32=150e9), rate=2e9)
    lower = r"much lower than .* for bandwidth 5.0 GB/s \(cached 20.0 GB/s\)"
    with pytest.warns(RooflineWarning, match=lower):
        cal = calibrate_cpu(force=True, measure=busy)
    assert cal.device.bandwidth.value == 20e9  # kept, with the probe measured beside it
    assert cal.probes["bandwidth"].rate == 10e9
    assert cal.device.peaks[(P.FP64, V)].value == 110e9  # the new, higher figure wins
    assert cal.device.peaks[(P.FP32, V)].value == 200e9  # 25% lower: kept, and named
    assert calibrate_cpu().device.bandwidth.value == 20e9  # what was written is the best


def test_a_slightly_lower_figure_is_kept_without_a_warning(
    cache: Path, recwarn: pytest.WarningsRecorder
) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=20e9))
    cal = calibrate_cpu(force=True, measure=FakeMeasure(bandwidth=18e9))
    assert cal.device.bandwidth.value == 20e9
    assert not [w for w in recwarn if issubclass(w.category, RooflineWarning)]


def test_reset_forgets_the_cached_figures(cache: Path) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=20e9))
    cal = calibrate_cpu(reset=True, measure=FakeMeasure(bandwidth=5e9))
    assert cal.device.bandwidth.value == 5e9
    assert calibrate_cpu().device.bandwidth.value == 5e9


def test_the_best_probe_rate_survives_a_new_calibration(cache: Path) -> None:
    calibrate_cpu(measure=with_probes(FakeMeasure(bandwidth=20e9), rate=12e9))
    cal = calibrate_cpu(force=True, measure=with_probes(FakeMeasure(bandwidth=30e9), rate=11e9))
    probe = cal.probes["bandwidth"]
    assert (probe.figure, probe.rate) == (30e9, 11e9)  # the new pair: its figure is higher
    assert probe.best_rate == 12e9  # but the best the probe ever ran is remembered


#: 150 GFLOP/s fp64, 300 fp32
PEAK_150 = cpupeak.CpuPeak(
    cores=2, clock_hz=3.75e9, clock_source="test", isa="AVX2+FMA", fp64_per_cycle=20, fp32_per_cycle=40
)


class Sequenced:
    """A measure_cpu that returns each of ``ceilings`` in turn (the last one repeats)."""

    def __init__(self, *fakes: FakeMeasure) -> None:
        self.fakes = list(fakes)
        self.calls = 0

    def __call__(self) -> Ceilings:
        fake = self.fakes[min(self.calls, len(self.fakes) - 1)]
        self.calls += 1
        return fake()


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (FakeMeasure(fp64=100e9, fp32=90e9), r"fp32 90.0 GFLOP/s below fp64 100.0 GFLOP/s"),
        (FakeMeasure(fp64=200e9, fp32=400e9), r"above this CPU's theoretical peak"),
    ],
)
def test_an_impossible_calibration_is_measured_again_with_a_warning(
    cache: Path, bad: FakeMeasure, message: str
) -> None:
    good = FakeMeasure(fp64=100e9, fp32=200e9)
    measure = Sequenced(bad, good)
    with pytest.warns(RooflineWarning, match=rf"CPU calibration rejected \(.*{message}.*measuring again"):
        cal = calibrate_cpu(measure=measure, peak=PEAK_150)
    assert measure.calls == 2
    assert cal.device.peaks[(P.FP32, V)].value == 200e9


def test_rounds_that_disagree_widely_are_rejected_and_a_second_failure_is_said(cache: Path) -> None:
    bad = FakeMeasure()
    bad.ceilings = dataclasses.replace(
        bad.ceilings, details={"matmul_round1_fp64": 10e9, "matmul_round2_fp64": 100e9}
    )
    with pytest.warns(RooflineWarning) as caught:
        calibrate_cpu(measure=Sequenced(bad), peak=None)
    texts = [str(w.message) for w in caught]
    assert any("fp64 matmul rounds disagree (10.0 vs 100.0 GFLOP/s)" in t for t in texts)
    assert any("still fails its checks" in t and "suspect" in t for t in texts)


def test_probe_best_rates_are_only_ever_raised(cache: Path) -> None:
    from pytest_roofline.machine.calibrate import raise_probe_bests

    calibrate_cpu(measure=with_probes(FakeMeasure(), rate=10e9))
    assert raise_probe_bests({"bandwidth": 9e9}) is False  # slower: nothing written
    assert raise_probe_bests({"bandwidth": 12e9, "fp32": 1e20}) is True  # fp32 has no probe here
    calibrate._cpu_memo.clear()
    probe = calibrate_cpu(measure=FakeMeasure()).probes["bandwidth"]
    assert probe.best_rate == 12e9
    assert probe.rate == 10e9  # the pair measured beside the figure is left as it was
    assert raise_probe_bests({"bandwidth": 1e9}, cache_dir=cache / "elsewhere") is False  # no cache


def test_a_kept_figure_never_goes_with_a_probe_measured_beside_another(cache: Path) -> None:
    calibrate_cpu(measure=FakeMeasure(bandwidth=30e9))  # an old calibration: no probes
    with pytest.warns(RooflineWarning, match="much lower"):
        cal = calibrate_cpu(force=True, measure=with_probes(FakeMeasure(bandwidth=10e9)))
    assert cal.device.bandwidth.value == 30e9
    assert "bandwidth" not in cal.probes  # so bandwidth is judged against the cached figure alone
    assert cal.probes["fp64"].figure == cal.device.peaks[(P.FP64, V)].value


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"size": 0}, "bad kind or size"),
        ({"size": -8}, "bad kind or size"),
        ({"size": True}, "bad kind or size"),
        ({"size": 2**40}, "bad kind or size"),
        ({"kind": "triad"}, "bad kind or size"),
        ({"figure": 1.0}, "measured beside another figure"),
        ({"rate": 0}, "must be a positive number"),
    ],
)
def test_a_cache_whose_probes_cannot_be_used_is_recalibrated(
    cache: Path, change: dict[str, object], why: str
) -> None:
    fake = with_probes(FakeMeasure())
    path, payload = cached_payload(cache, fake)
    payload["probes"]["bandwidth"].update(change)
    path.write_text(json.dumps(payload))
    with pytest.warns(RooflineWarning, match=f"does not match the cache schema.*{why}"):
        cal = calibrate_cpu(measure=fake)
    assert not cal.from_cache


def test_a_figure_and_probe_that_ran_under_different_loads_are_rejected(cache: Path) -> None:
    bad = FakeMeasure()
    bad.ceilings = dataclasses.replace(bad.ceilings, details={"probe_ratio_bandwidth": 14.0})
    with pytest.warns(RooflineWarning, match=r"bandwidth figure / probe ratio 14.00 is outside 0.5-10"):
        calibrate_cpu(measure=Sequenced(bad, FakeMeasure()), peak=None)


def test_a_forced_calibration_keeps_the_better_cache_level_roofs() -> None:
    from pytest_roofline.machine.cachelevels import rates_from_details

    old = Ceilings(
        Figure(2e10, Source.MEASURED), {(Precision.FP32, Unit.VECTOR): Figure(1e11, Source.MEASURED)},
        details=level_details({"l1": (2e11, "copy 24 KiB"), "l2": (1e11, "dot 1 MiB")}),
    )  # fmt: skip
    new = dataclasses.replace(
        old, details=level_details({"l1": (1.5e11, "add 24 KiB"), "l2": (1.2e11, "dot 1 MiB")})
    )
    kept = rates_from_details(calibrate.keep_best(old, new).details)
    assert kept == {"l1": (2e11, "copy 24 KiB"), "l2": (1.2e11, "dot 1 MiB")}
