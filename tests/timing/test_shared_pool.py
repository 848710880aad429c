"""The pool both sides of an A/B comparison carve their copies from (``--roofline-against``)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from pytest_roofline.timing.copies import SHARED_SIDE_BYTES, HostPool, SharedPool

pytestmark = pytest.mark.skipif(not hasattr(os, "memfd_create"), reason="memfd_create (Linux)")

MiB = 2**20


@pytest.fixture
def head() -> Iterator[SharedPool]:
    pool = SharedPool.create()
    assert pool is not None
    yield pool
    SharedPool.active = None
    HostPool.release()
    os.close(pool.fd)


def test_the_heads_allocation_keeps_what_the_follower_wrote_in_its_half(head: SharedPool) -> None:
    base = SharedPool(head.fd, 1, allocates_both=False)
    assert head.reserve(4 * MiB)
    assert base.reserve(4 * MiB)
    base.buffer[: 4 * MiB] = 7
    assert head.reserve(64 * MiB)  # the head allocates both halves in turns: the base's bytes stay
    assert int(base.buffer[: 4 * MiB].min()) == 7
    assert int(head.buffer[: 4 * MiB].max()) == 0  # the halves are apart


def test_rotation_carves_its_copies_from_the_active_pool(head: SharedPool) -> None:
    SharedPool.active = head
    pool = HostPool.get()
    pool.reserve(8 * MiB)
    taken = pool.take(MiB, 4, 0)
    assert head.buffer.ctypes.data <= taken.ctypes.data < head.buffer.ctypes.data + SHARED_SIDE_BYTES
    SharedPool.active = None
    HostPool.release()
    pool = HostPool.get()
    pool.reserve(8 * MiB)
    outside = pool.take(MiB, 4, 0).ctypes.data
    assert not head.buffer.ctypes.data <= outside < head.buffer.ctypes.data + SHARED_SIDE_BYTES


def test_memory_that_runs_short_leaves_the_copies_to_the_process(
    head: SharedPool, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_memory(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    SharedPool.active = head
    pool = HostPool.get()
    pool.reserve(4 * MiB)  # in the shared half, while memory lasts
    monkeypatch.setattr(os, "posix_fallocate", no_memory)
    assert not head.reserve(8 * MiB)
    pool = HostPool.get()
    pool.reserve(8 * MiB)  # a private buffer instead, though the shared half it held is larger
    outside = pool.take(MiB, 4, 0).ctypes.data
    assert not head.buffer.ctypes.data <= outside < head.buffer.ctypes.data + SHARED_SIDE_BYTES
