"""This machine: its measured ceilings (:mod:`.calibrate`: measured by :mod:`.cpu_ceilings` for the CPU,
kept in the cache file of :mod:`.calibration_cache`, printed by :mod:`.calibration_report`), the CPU's
cache-level roofs (:mod:`.cachelevels`) and theoretical peak (:mod:`.cpupeak`), which device a spec
means (:mod:`.detect`), the public ``estimate()`` on this machine's devices (:mod:`.public_estimate`),
one timing window per device across pytest-xdist workers (:mod:`.devicelock`), and the plugin's own
files: the cache folder, atomic writes and file locks (:mod:`.files`).

Above :mod:`pytest_roofline.timing` (a calibration times probes), below the plugin.
"""
