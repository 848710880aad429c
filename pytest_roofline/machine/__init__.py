"""This machine: its measured ceilings and cache roofs, the CPU's theoretical peak, which device a spec
means, the public ``estimate()``, one timing window per device, and the plugin's own files.

Above :mod:`pytest_roofline.timing` (a calibration times probes), below the plugin: docs/architecture.md.
"""
