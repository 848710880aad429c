"""The model: pure arithmetic, importing neither pytest nor CuPy, usable from a notebook.

Nothing here imports a layer above (timing, machine, analysis, output, plugin): those produce the
values this package defines (a :class:`~.measurement.Measurement`) and read what it computes. What
each module holds: docs/architecture.md ("The layers").
"""

from __future__ import annotations
