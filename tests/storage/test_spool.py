"""The spool on disk: what it answered durable is read back in order, across segments, after its process was
SIGKILLed; a live process's spool is never taken by another (a forked child of it included); a torn tail or zeros
end what is read; a failed write loses only its own batch; the acknowledged position is never half written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from audit.storage import spool as spooling
from audit.storage.spool import Spool
from audit.storage.spool_files import HEADER, orphans_claim
from serving.config import BASE_DIR


def payloads_of(files) -> list[bytes]:
    frames = []
    while batch := files.frames_read(limit=50, until=None):
        frames += batch
    return [f.payload for f in frames]


def test_what_was_synced_is_read_back_in_order_across_segments(tmp_path, monkeypatch):
    monkeypatch.setattr(spooling, "SEGMENT_BYTES", 200)
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert all(spool.append(f"record {i}".encode()).result(timeout=5) for i in range(40))  # one sync each
    assert len(spool.files.segments()) > 1
    frames = spool.files.frames_read(limit=100, until=spool.synced)
    assert [f.payload for f in frames] == [f"record {i}".encode() for i in range(40)]
    spool.acknowledged(frames[9].end, released=0, frames=10)
    spool.stop(timeout=5)
    spool.close()

    (claimed, fd), *others = orphans_claim(directory=tmp_path, exclude=set())
    assert others == []
    assert payloads_of(claimed) == [f"record {i}".encode() for i in range(10, 40)]  # from the acknowledged position
    os.close(fd)


def test_a_live_spool_is_never_claimed_by_another(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert spool.append(b"x").result(timeout=5)
    assert orphans_claim(directory=tmp_path, exclude=set()) == []
    spool.stop(timeout=5)
    spool.close()


def test_a_torn_tail_ends_what_is_read(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert all(spool.append(p).result(timeout=5) for p in (b"one", b"two"))
    spool.stop(timeout=5)
    spool.close()
    with spool.files.segment_path(0).open("ab") as file:
        file.write(HEADER.pack(100, 0, 0.0) + b"half a fra")
    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    assert payloads_of(claimed) == [b"one", b"two"]
    os.close(fd)


def test_a_full_spool_refuses_what_does_not_fit(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=40, encode=lambda item: item)
    assert spool.append(b"a" * 10).result(timeout=5)
    with pytest.raises(spooling.SpoolFull):
        spool.append(b"b" * 30).result(timeout=5)
    spool.stop(timeout=5)
    spool.close()


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from audit.storage.spool import Spool
    spool = Spool(directory=Path(sys.argv[1]), max_bytes=1 << 30, encode=lambda item: item)
    i = 0
    while True:
        if spool.append(str(i).encode()).result(timeout=5):
            print(i, flush=True)
        i += 1
    """
)


@pytest.mark.servers
def test_a_sigkilled_process_loses_nothing_it_answered_durable(tmp_path):
    process = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(tmp_path)], cwd=BASE_DIR, stdout=subprocess.PIPE, text=True
    )
    assert process.stdout is not None
    durable = [int(process.stdout.readline()) for _ in range(500)]
    process.send_signal(signal.SIGKILL)
    process.wait(10)
    durable += [int(line) for line in process.stdout.read().split()]

    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    found = [int(p) for p in payloads_of(claimed)]
    assert found[: len(durable)] == durable  # every one answered durable, in order (and perhaps a few more)
    os.close(fd)


def test_a_failed_write_fails_its_batch_and_the_frames_after_it_are_still_read(tmp_path, monkeypatch):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert spool.append(b"before").result(timeout=5)
    real_write = os.write

    def half_then_full_disk(fd, data):
        real_write(fd, bytes(data)[: len(data) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(spooling.os, "write", half_then_full_disk)
    with pytest.raises(spooling.SpoolFull):
        spool.append(b"lost: never answered durable").result(timeout=5)
    monkeypatch.setattr(spooling.os, "write", real_write)
    assert spool.append(b"after").result(timeout=5)
    spool.stop(timeout=5)
    spool.close()

    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    assert payloads_of(claimed) == [b"before", b"after"]
    os.close(fd)


def test_a_waiter_that_gave_up_still_has_its_record_written_and_the_spool_goes_on(tmp_path):
    gate = threading.Event()

    def slow_encode(item):
        gate.wait(5)
        return item

    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=slow_encode)
    first = spool.append(b"taken")  # the thread holds it, encoding
    abandoned = spool.append(b"abandoned")  # waiting behind it
    assert abandoned.cancel()  # its client went away
    gate.set()
    assert first.result(timeout=5)
    assert spool.append(b"next").result(timeout=5)  # the thread lives on
    spool.stop(timeout=5)
    spool.close()
    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    assert payloads_of(claimed) == [b"taken", b"abandoned", b"next"]
    os.close(fd)


def test_zeros_a_crash_left_after_the_last_frame_end_what_is_read(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert spool.append(b"one").result(timeout=5)
    spool.stop(timeout=5)
    spool.close()
    with spool.files.segment_path(0).open("ab") as file:
        file.write(bytes(4096))
    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    assert payloads_of(claimed) == [b"one"]
    os.close(fd)


def test_the_acknowledged_position_is_replaced_whole_so_a_kill_mid_write_leaves_the_last_one(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert all(spool.append(p).result(timeout=5) for p in (b"one", b"two", b"three"))
    frames = spool.files.frames_read(limit=10, until=spool.synced)
    spool.acknowledged(frames[0].end, released=0, frames=1)
    spool.stop(timeout=5)
    spool.close()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # nothing left aside
    (tmp_path / f".{spool.owner}.ack").write_text("0 1")  # a later ack, killed before its rename: half written

    (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
    assert payloads_of(claimed) == [b"two", b"three"]  # from the last whole position
    os.close(fd)


@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_does_not_keep_its_parents_spool_from_being_claimed(tmp_path):
    spool = Spool(directory=tmp_path, max_bytes=1 << 20, encode=lambda item: item)
    assert spool.append(b"parent's").result(timeout=5)
    ready, told = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only sleeps, holding whatever it inherited
        os.write(told, b"x")  # the fork's hooks have run
        time.sleep(5)
        os._exit(0)
    os.close(told)
    assert os.read(ready, 1) == b"x"
    os.close(ready)
    try:
        spool.stop(timeout=5)
        spool.close()  # the parent's spool is an orphan now, though its child lives on
        (claimed, fd), *_ = orphans_claim(directory=tmp_path, exclude=set())
        assert payloads_of(claimed) == [b"parent's"]
        os.close(fd)
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)


@pytest.mark.servers
def test_of_processes_sharing_the_folder_only_the_dead_ones_spool_is_claimed(tmp_path):
    started = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], cwd=BASE_DIR, stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for process in started:
        assert process.stdout is not None
        [process.stdout.readline() for _ in range(50)]
    dead, alive = started
    dead.send_signal(signal.SIGKILL)
    dead.wait(10)
    try:
        claimed = orphans_claim(directory=tmp_path, exclude=set())
        assert [files.owner.rsplit("-", 1)[1] for files, _ in claimed] == [str(dead.pid)]
        for _, fd in claimed:
            os.close(fd)
    finally:
        alive.kill()
        alive.wait(10)
