"""What a run has gathered for its end: its records, its device records, its notes and why it stopped.

The session fills a :class:`RunState` (measurements through the pipeline, reports through the
transport, hooks for the rest); the JSON file, the gate and the terminal summary read it. It is a
plain object, not the session, so that what reads it depends on it alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..output.records import DeviceRecord, Record
    from .against import Against, Follower
    from .gate import Gate
    from .options import SessionSettings


@dataclass(slots=True)
class RunState:
    """The run's results as the process that holds it knows them (a pytest-xdist worker: its own)."""

    settings: SessionSettings
    #: the baseline comparison, and the outputs CI reads (save, step summary, plot)
    gate: Gate
    #: every record of the run, as the reports bring them (on a worker: its own)
    records: list[Record] = field(default_factory=list)
    #: every device record, by key and figures (``DeviceRecord.version``): a device measured
    #: again during the run has one per set of figures, so each row's judge stays on record
    device_records: dict[str, DeviceRecord] = field(default_factory=dict)
    #: what the terminal summary says beside the table (calibration's warnings, a loaded machine)
    notes: list[str] = field(default_factory=list)
    #: node ids of the tests that failed as expected (xfail)
    xfailed: set[str] = field(default_factory=set)
    #: node ids of the tests deselected (``-k``, ``-m``, a shard's selection): not run, not vanished
    deselected: set[str] = field(default_factory=set)
    #: why the run stopped early (^C, -x, a pytest-xdist worker that went down), None if it did not
    interruption: str | None = None
    #: why the JSON file could not be written, None if it was (or none was asked for)
    json_error: str | None = None
    #: how the pytest-xdist workers were spread over the GPUs, one line ("" when not said)
    spread: str = ""
    #: this process's side of an A/B comparison (``--roofline-against``): the head's partner, or, in
    #: the base's process, the follower; None without one
    against: Against | Follower | None = None
    #: the base's tests this run does not have (``--roofline-against``): gone
    gone_from_head: tuple[str, ...] = ()
    #: the topics of the notes said once a run, however often their cause comes back
    _said: set[str] = field(default_factory=set, init=False, repr=False)

    def say_once(self, topic: str, note: str) -> None:
        """Add ``note`` unless a note on ``topic`` was added already: every measurement would repeat it."""
        if topic not in self._said:
            self._said.add(topic)
            self.notes.append(note)

    def partner(self) -> Against | None:
        """The head's partner in an A/B comparison; None without one, and in the base's process."""
        return None if self.against is None or self.against.follows else self.against
