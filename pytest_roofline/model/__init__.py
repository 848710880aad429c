"""The model: pure arithmetic, importing neither pytest nor CuPy, usable from a notebook.

Core types (:mod:`.core`: precisions, units, devices, costs, the estimate); the op catalogue
(:mod:`.ops`, loaded: the registry and its types in :mod:`.op_registry`, operand storage in
:mod:`.operands`, the catalogues :mod:`.builtin_ops`, :mod:`.llm_ops` and :mod:`.llm_op` over the
step model :mod:`.llm`); the device table (:mod:`.devices`); ``estimate()`` (:mod:`.estimate`, with
the choice of compute unit in :mod:`.unit_choice`); statistics over samples (:mod:`.stats`); what a
measurement found (:mod:`.measurement`), under which settings (:mod:`.policy`) and conditions
(:mod:`.conditions`); ceilings measured beside a kernel (:mod:`.paired_ceilings`); base and head
measured in turns (:mod:`.pairing`); user peaks files (:mod:`.peaks`); the verdict (:mod:`.verdict`)
and the units reports print (:mod:`.units`).

Nothing here imports a layer above (timing, machine, analysis, output, plugin): those produce the
values this package defines (a :class:`~.measurement.Measurement`) and read what it computes.
"""

from __future__ import annotations
