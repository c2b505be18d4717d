"""The id source: random, unique, shared safely by threads and forked processes; ordered ids
sort as made; ``SequentialIds`` makes both kinds deterministic."""

from __future__ import annotations

import os
import threading

import pytest

from tinyagents import _clock
from tinyagents._clock import RandomIds, SequentialIds, new_id, new_ordered_id, use_ids


def test_ids_are_prefixed_48_bit_hex_and_unique() -> None:
    ids = [new_id("c") for _ in range(5_000)]  # many pool refills
    assert len(set(ids)) == len(ids)
    assert all(i.startswith("c-") and len(i) == 14 and int(i[2:], 16) >= 0 for i in ids)


def test_threads_drawing_from_one_source_never_get_the_same_id() -> None:
    source = RandomIds()
    drawn: list[list[str]] = [[] for _ in range(4)]

    def draw(out: list[str]) -> None:
        out.extend(source.new("c") for _ in range(3_000))

    threads = [threading.Thread(target=draw, args=(out,)) for out in drawn]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    every = [i for out in drawn for i in out]
    assert len(set(every)) == len(every) == 12_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_does_not_hand_out_the_ids_its_parent_will() -> None:
    source = RandomIds()
    source.new("c")  # the pool now holds the parent's next 255 ids
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its next ids and leave at once
        os.close(read)
        os.write(write, " ".join(source.new("c") for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [source.new("c") for _ in range(10)]
    assert len(child) == 10
    assert not set(child) & set(parent)


def test_ordered_ids_sort_as_made_even_when_the_wall_clock_stands_still_or_steps_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    times = iter([5_000_000_000, *[1_000_000_000] * 999, *[9_000_000_000] * 2_000])
    monkeypatch.setattr(_clock.time, "time_ns", lambda: next(times))
    source = RandomIds()
    ids = [source.new_ordered("ck") for _ in range(3_000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert all(len(i) == len("ck-") + 13 + 1 + 12 for i in ids)


def test_ordered_ids_of_the_default_source_are_prefixed_and_ordered() -> None:
    ids = [new_ordered_id("ck") for _ in range(1_000)]
    assert ids == sorted(ids) and all(i.startswith("ck-") for i in ids)


def test_sequential_ids_make_ordered_ids_from_the_same_counter() -> None:
    with use_ids(SequentialIds()):
        assert [new_id("ck"), new_ordered_id("ck"), new_ordered_id("fr")] == [
            "ck-0001",
            "ck-0002",
            "fr-0001",
        ]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_makes_other_ordered_ids_than_its_parent() -> None:
    source = RandomIds()
    source.new_ordered("ck")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        os.write(write, " ".join(source.new_ordered("ck") for _ in range(10)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = pipe.read().split()
    os.waitpid(pid, 0)
    parent = [source.new_ordered("ck") for _ in range(10)]
    assert len(child) == 10
    # compare the random parts: the time parts of the two processes may differ anyway
    assert not {i.rsplit("-", 1)[1] for i in child} & {i.rsplit("-", 1)[1] for i in parent}
