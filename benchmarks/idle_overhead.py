"""What does the plugin cost a test run that never uses it?

A suite of trivial tests (2000 by default) runs in fresh ``python -m pytest`` processes, with the
plugin loaded and with ``-p no:roofline``, in interleaved pairs whose order alternates (on/off,
off/on, ...), so a machine whose speed drifts slows both halves of a pair alike. For each pair the
ratio on/off is taken; the script prints the median ratio with a distribution-free confidence
interval for it (the sign-test interval: order statistics of the ratios, coverage from the
binomial distribution, at least 95%), and the median difference in milliseconds.

Two bytecode modes, interleaved pair by pair, each with its own copy of the package placed first
on ``PYTHONPATH`` and one ``PYTHONPYCACHEPREFIX`` shared by both:

- ``bytecode``: everything has bytecode (the prefix is filled by a warm-up run of each side);
- ``no bytecode``: the plugin's copy never has bytecode (``PYTHONDONTWRITEBYTECODE=1``, and its
  path is not in the warmed prefix), so it is compiled in every run while pytest and the standard
  library still load theirs: the cost of a plugin installed without ``.pyc`` files.

Then the evidence for where the time goes, per mode:

- imports: ``-X importtime`` runs of both sides; the modules only the plugin-on run imports, with
  their summed self time (median of three runs). CPython logs no module loaded through
  ``importlib.import_module``, which is how pytest loads the entry point, so ``pytest_roofline``
  and ``.plugin`` themselves are missing there; the next section times that import;
- in-process, in fresh processes (median of ``--hook-runs``): ``import pytest_roofline.plugin``
  timed, then every ``pytest_*`` function of ``plugin.py`` (and of ``RooflineSession``, should the
  run make one: an unused plugin makes none) wrapped with a timer and the suite run with
  ``pytest.main``; the hooks' total and split, less the timer's own cost, and which of the
  package's modules, and of the session, ``devices``, ``ops``, ``model``, the timing modules,
  numpy and tabulate, are loaded at exit. Pluggy's cost of calling one more
  implementation is not in the total (the end-to-end pairs have it);
- ``--profile``: one extra in-process run under cProfile, its ``pytest_roofline`` entries by
  cumulative time (cProfile slows what it profiles: compare the entries, not the totals).

Run from the repository root: ``python benchmarks/idle_overhead.py [--tests 2000] [--pairs 15]``.
``--package DIR`` measures another checkout's ``pytest_roofline`` package (before and after a
change). Targets (issue 9): hooks under 5 ms per run, end to end at most 1.01×.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import inspect
import json
import math
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from pathlib import Path
from typing import Any

#: what an unused plugin must not import (issue 9's acceptance, and the timing engine)
HEAVY = ("pytest_roofline.plugin.session", "pytest_roofline.model.devices", "pytest_roofline.model.ops",
         "pytest_roofline.model.core", "pytest_roofline.timing", "numpy", "tabulate")  # fmt: skip
TESTS_PER_FILE = 100
PYTEST_ARGS = ("-q", "-p", "no:cacheprovider")  # no cache directory written: less disk noise per run
CONFIDENCE = 0.95


# -- the suite and the environments ------------------------------------------------------------------


def write_suite(root: Path, tests: int) -> Path:
    suite = root / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: no repository conftest or addopts
    for start in range(0, tests, TESTS_PER_FILE):
        count = min(TESTS_PER_FILE, tests - start)
        body = "".join(f"def test_{start + i}():\n    pass\n\n\n" for i in range(count))
        (suite / f"test_trivial_{start // TESTS_PER_FILE:03d}.py").write_text(body)
    return suite


def package_dir(given: str | None) -> Path:
    if given is not None:
        return Path(given).resolve()
    spec = importlib.util.find_spec("pytest_roofline")  # finds it without importing it
    if spec is None or spec.origin is None:
        sys.exit("pytest_roofline is not installed: pip install -e . first")
    return Path(spec.origin).parent


def environments(root: Path, package: Path) -> dict[str, dict[str, str]]:
    """One environment per bytecode mode, each importing its own copy of the package first."""
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    base["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
    envs = {}
    for mode in ("bytecode", "no bytecode"):
        src = root / mode.replace(" ", "-")
        shutil.copytree(package, src / "pytest_roofline", ignore=ignore)
        paths = [str(src), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = dict(base, PYTHONPATH=os.pathsep.join(paths))
        if mode == "no bytecode":
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        envs[mode] = env
    return envs


def run_suite(
    suite: Path, env: dict[str, str], plugin: bool, tests: int, *python: str, more: Sequence[str] = ()
) -> tuple[float, str, float]:
    """Wall seconds of one run, its stderr, and the CPU seconds (user + system) the process used; a
    run that does not pass every test stops the script.

    ``python``: interpreter options (``-X importtime``); ``more``: pytest options. CPU time is the
    steadier figure on a shared machine: a neighbour that takes the core delays the process
    without adding to its CPU time.
    """
    off = () if plugin else ("-p", "no:roofline")
    command = [sys.executable, *python, "-m", "pytest", *PYTEST_ARGS, *off, *more, str(suite)]
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=suite, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - used.ru_utime) + (after.ru_stime - used.ru_stime)
    if done.returncode != 0 or f"{tests} passed" not in done.stdout:
        side = "on" if plugin else "off"
        sys.exit(f"the suite did not pass (plugin {side}):\n{done.stdout}\n{done.stderr}")
    return wall, done.stderr, cpu


# -- statistics --------------------------------------------------------------------------------------


def binomial_cdf(k: int, n: int) -> float:
    """P(B <= k) for B ~ Binomial(n, 1/2)."""
    return sum(math.comb(n, i) for i in range(k + 1)) / 2**n


def median_interval(values: Sequence[float]) -> tuple[float, float, float]:
    """The sign-test confidence interval for the median: (low, high, its exact coverage).

    ``[x(k), x(n+1-k)]`` of the sorted values covers the median with probability
    ``1 - 2 P(B <= k-1)``; k is the largest for which that is at least :data:`CONFIDENCE` (or 1,
    the whole range, when too few values allow that).
    """
    xs, n = sorted(values), len(values)
    k = 1
    while k < n // 2 and 1 - 2 * binomial_cdf(k, n) >= CONFIDENCE:
        k += 1
    return xs[k - 1], xs[n - k], 1 - 2 * binomial_cdf(k - 1, n)


# -- imports -----------------------------------------------------------------------------------------

IMPORTTIME = re.compile(r"import time:\s+(\d+) \|\s+\d+ \|( *)(\S+)")


def imported(stderr: str) -> dict[str, int]:
    """``-X importtime`` output: module -> self time in µs."""
    return {m[3]: int(m[1]) for line in stderr.splitlines() if (m := IMPORTTIME.match(line))}


def import_report(suite: Path, env: dict[str, str], tests: int) -> tuple[float, list[tuple[str, float]]]:
    """Median total self time of the modules only the plugin-on run imports, and each one's median."""
    runs: list[dict[str, int]] = []
    for _ in range(3):
        on = imported(run_suite(suite, env, True, tests, "-X", "importtime")[1])
        off = imported(run_suite(suite, env, False, tests, "-X", "importtime")[1])
        runs.append({name: us for name, us in on.items() if name not in off})
    names = sorted(set().union(*runs))
    per_module = [(name, statistics.median(r.get(name, 0) for r in runs) / 1e3) for name in names]
    return statistics.median(sum(r.values()) for r in runs) / 1e3, per_module


# -- hooks, timed in-process (the --_hooks child) ----------------------------------------------------


class HookTimer:
    """Wraps hook implementations so each call adds its own wall time to a per-hook total."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self.calls: dict[str, int] = {}
        #: timed stretches, each paying the clock once (a wrapper hook has two per call)
        self.stretches = 0

    def wrap(self, fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        self.seconds.setdefault(label, 0.0)
        self.calls.setdefault(label, 0)
        clock = time.perf_counter

        if inspect.isgeneratorfunction(fn):  # a wrapper=True hook: time both halves, not the yield

            @functools.wraps(fn)  # keeps the signature and the hookimpl options pluggy reads
            def timed_gen(*args: Any) -> Generator[Any, Any, Any]:
                self.calls[label] += 1
                self.stretches += 2
                start = clock()
                gen = fn(*args)
                first = next(gen)
                self.seconds[label] += clock() - start
                try:
                    sent = yield first
                except BaseException as exc:
                    start = clock()
                    try:
                        gen.throw(exc)
                    except StopIteration as stop:
                        return stop.value
                    finally:
                        self.seconds[label] += clock() - start
                    raise RuntimeError(f"{label} yielded twice") from None
                start = clock()
                try:
                    gen.send(sent)
                except StopIteration as stop:
                    return stop.value
                finally:
                    self.seconds[label] += clock() - start
                raise RuntimeError(f"{label} yielded twice")

            return timed_gen

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            self.calls[label] += 1
            self.stretches += 1
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds[label] += clock() - start

        return timed


def timer_cost() -> float:
    """Seconds a wrapped call adds to its own measured time (the clock read inside it)."""
    probe = HookTimer()
    noop = probe.wrap(lambda: None, "noop")
    for _ in range(20000):
        noop()
    return probe.seconds["noop"] / probe.calls["noop"]


def time_hooks(suite: str) -> None:
    """The child: time the plugin's import, wrap every roofline hook, run the suite in-process, and
    print as JSON the timings and which of the package's (and the heavy) modules are loaded at exit."""
    import pytest

    clock = time.perf_counter
    start = clock()
    import pytest_roofline.plugin as plugin

    plugin_import = clock() - start
    timer = HookTimer()
    for name, fn in list(vars(plugin).items()):
        if name.startswith("pytest_") and inspect.isfunction(fn):
            setattr(plugin, name, timer.wrap(fn, f"plugin.{name}"))
    make_session = plugin.session_of

    def session_of(config: Any) -> Any:
        """The plugin's own, but the session's hooks are timed too once a run makes one."""
        import pytest_roofline.plugin.session as session

        cls = session.RooflineSession
        for name, fn in list(vars(cls).items()):
            if name.startswith("pytest_") and inspect.isfunction(fn) and not hasattr(fn, "__wrapped__"):
                setattr(cls, name, timer.wrap(fn, f"session.{name}"))
        return make_session(config)

    plugin.session_of = session_of  # type: ignore[assignment]
    code = pytest.main([*PYTEST_ARGS, suite])
    if code != 0:
        sys.exit(f"in-process run failed: {code}")
    loaded = sorted(m for m in sys.modules if m.startswith(("pytest_roofline", *HEAVY)))
    result = {"seconds": timer.seconds, "calls": timer.calls, "stretches": timer.stretches, "loaded": loaded}
    result["plugin_file"] = plugin.__file__ or "?"
    imports = {"plugin_import_s": plugin_import}
    print(json.dumps({**result, **imports, "timer_s": timer_cost()}))


def in_process(suite: Path, env: dict[str, str], runs: int) -> list[dict[str, Any]]:
    """The child's JSON, from ``runs`` fresh processes."""
    results = []
    for _ in range(runs):
        done = subprocess.run([sys.executable, __file__, "--_hooks", str(suite)], cwd=suite, env=env,
                              capture_output=True, text=True, check=False)  # fmt: skip
        if done.returncode != 0:
            sys.exit(f"hook timing failed:\n{done.stdout}\n{done.stderr}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    return results


def profile_report(suite: Path, env: dict[str, str]) -> str:
    code = (
        "import cProfile, pstats, sys, pytest\n"
        "prof = cProfile.Profile()\n"
        f"prof.enable(); code = pytest.main({[*PYTEST_ARGS, str(suite)]!r}); prof.disable()\n"
        "stats = pstats.Stats(prof, stream=sys.stderr).sort_stats('cumulative')\n"
        "stats.print_stats('pytest_roofline', 15)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=suite, env=env, capture_output=True, text=True,
                          check=False)  # fmt: skip
    lines = done.stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if "ncalls" in line), 0)
    return "\n".join(line for line in lines[start:] if line.strip())


# -- the report --------------------------------------------------------------------------------------


def median_ms(values: Iterable[float]) -> float:
    return statistics.median(values) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    add = parser.add_argument
    add("--tests", type=int, default=2000, help="trivial tests in the suite (default: 2000)")
    add("--pairs", type=int, default=15, help="interleaved on/off pairs per mode (default: 15)")
    add("--hook-runs", type=int, default=5, help="processes timing hooks per mode (default: 5)")
    add("--package", help="the pytest_roofline package directory to measure (default: the installed one)")
    add("--profile", action="store_true", help="also print a cProfile of the roofline entries")
    add("--_hooks", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._hooks:
        time_hooks(args._hooks)
        return

    root = Path(tempfile.mkdtemp(prefix="idle-overhead-"))
    try:
        report(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(root: Path, args: argparse.Namespace) -> None:
    package = package_dir(args.package)
    suite = write_suite(root, args.tests)
    envs = environments(root, package)
    print(f"idle overhead: {args.tests} trivial tests, {args.pairs} interleaved pairs a mode; {package}")
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; pytest {' '.join(PYTEST_ARGS)}; "
          f"on = plugin loaded, off = -p no:roofline")  # fmt: skip
    for plugin in (True, False):  # fills the bytecode prefix (the no-bytecode copy writes none)
        for env in envs.values():  # and an option of the plugin's proves it is loaded when on
            run_suite(suite, env, plugin, args.tests, more=["--roofline-mode=enforce"] if plugin else [])

    walls: dict[str, dict[bool, list[float]]] = {mode: {True: [], False: []} for mode in envs}
    cpus: dict[str, dict[bool, list[float]]] = {mode: {True: [], False: []} for mode in envs}
    for i in range(args.pairs):
        for mode, env in envs.items():
            for plugin in (True, False) if i % 2 == 0 else (False, True):
                wall, _, cpu = run_suite(suite, env, plugin, args.tests)
                walls[mode][plugin].append(wall)
                cpus[mode][plugin].append(cpu)

    for title, figures in (("wall time", walls), ("CPU time (user + system)", cpus)):
        print(f"\n== end to end: {title} of each process, ratio on/off per pair")
        for mode, w in figures.items():
            ratios = [on / off for on, off in zip(w[True], w[False], strict=True)]
            diffs = [(on - off) * 1e3 for on, off in zip(w[True], w[False], strict=True)]
            low, high, coverage = median_interval(ratios)
            dlow, dhigh, _ = median_interval(diffs)
            verdict = "target met" if high <= 1.01 else "target missed" if low > 1.01 else "undecided"
            on, off = (statistics.median(w[side]) * 1e3 for side in (True, False))
            ratio, diff = statistics.median(ratios), statistics.median(diffs)
            print(f"{mode:>12}: on {on:7.1f} ms, off {off:7.1f} ms; ratio median {ratio:.4f},"
                  f" {coverage:.1%} CI [{low:.4f}, {high:.4f}] (sign test); <= 1.01x: {verdict}")  # fmt: skip
            print(f"{'':>14}on - off: median {diff:+.1f} ms, CI [{dlow:+.1f}, {dhigh:+.1f}]")
            print(f"{'':>14}ratios: {' '.join(f'{r:.3f}' for r in ratios)}")

    print("\n== modules only the plugin-on run imports: -X importtime self times, median of 3 runs a side")
    print("   (CPython does not log modules loaded by importlib.import_module: the entry point itself,")
    print("   pytest_roofline and its .plugin, is timed in-process below)")
    for mode, env in envs.items():
        total, modules = import_report(suite, env, args.tests)
        print(f"{mode:>12}: {total:6.1f} ms in {len(modules)} modules")
        for name, ms in sorted(modules, key=lambda m: -m[1])[:8]:
            print(f"{'':>14}{ms:6.2f} ms  {name}")

    print(f"\n== in-process, median of {args.hook_runs} fresh processes: the plugin's import, then its hooks")
    print("   (each pytest_* function of plugin.py, and of a session if one is made, timed;")
    print("   less the timer's own cost)")
    for mode, env in envs.items():
        results = in_process(suite, env, args.hook_runs)
        loaded = results[0]["loaded"]
        heavy = [m for m in loaded if m.startswith(HEAVY)]
        plugin_import = median_ms(r["plugin_import_s"] for r in results)
        print(f"{mode:>12}: import pytest_roofline.plugin {plugin_import:.2f} ms")
        print(f"{'':>14}the plugin: {results[0]['plugin_file']}")
        print(f"{'':>14}loaded at exit: {', '.join(loaded)}")
        print(f"{'':>14}{'HEAVY: ' + ', '.join(heavy) if heavy else 'none of: ' + ', '.join(HEAVY)}")
        total = median_ms(sum(r["seconds"].values()) for r in results)
        cost = median_ms(r["timer_s"] * r["stretches"] for r in results)
        print(f"{'':>14}hooks {total - cost:.2f} ms ({total:.2f} measured, {cost:.2f} the timer's); "
              f"{'under' if total - cost < 5 else 'over'} the 5 ms target")  # fmt: skip
        per_hook = {name: median_ms(r["seconds"][name] for r in results) for name in results[0]["seconds"]}
        for name, ms in sorted(per_hook.items(), key=lambda h: -h[1]):
            if results[0]["calls"][name]:
                print(f"{'':>14}{ms:6.2f} ms {results[0]['calls'][name]:6d} calls  {name}")

    if args.profile:
        print("\n== cProfile of one in-process run (bytecode), pytest_roofline entries by cumulative time")
        print(profile_report(suite, envs["bytecode"]))


if __name__ == "__main__":
    main()
