"""The default id source: random, unique, shared safely by threads and forked processes."""

from __future__ import annotations

import os
import threading

import pytest

from tinyagents._clock import RandomIds, new_id


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
