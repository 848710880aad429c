"""This machine: its measured ceilings and their cache file (:mod:`.calibrate`), the CPU's cache-level
roofs (:mod:`.cachelevels`) and theoretical peak (:mod:`.cpupeak`), which device a spec means
(:mod:`.detect`), and one timing window per device across pytest-xdist workers (:mod:`.devicelock`).

Above :mod:`pytest_roofline.timing` (a calibration times probes), below the plugin.
"""
