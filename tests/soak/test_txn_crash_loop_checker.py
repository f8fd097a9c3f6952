"""Unit checks of the transaction crash loop's checker (txn_crash_loop.check): it must flag each
kind of fault it exists to catch.

A kill -9 of a broker with ``flush.policy=fsync`` cannot be made to lose or duplicate on
purpose, so the checker is verified here on doctored outputs instead: a duplicate, a loss, a
wrong committed offset, an aborted record made visible, part of a transaction visible, a
committed transaction lost, and records no transaction wrote.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from txn_crash_loop import check, transform  # noqa: E402


def sound():
    """Six inputs over two partitions; t0 committed r0 r1 r2; t1 aborted r3 r4 r5; t2 redid them
    and committed; t3 wrote nothing visible and its outcome is unknown."""
    inputs = {b"r0": 0, b"r1": 1, b"r2": 0, b"r3": 1, b"r4": 0, b"r5": 1}
    txns = {
        0: ("committed", [b"r0", b"r1", b"r2"]),
        1: ("aborted", [b"r3", b"r4", b"r5"]),
        2: ("committed", [b"r3", b"r4", b"r5"]),
        3: ("unknown", [b"r3"]),
    }
    output = []
    offsets = {0: 0, 1: 0}
    for txn in (0, 2):
        for source in txns[txn][1]:
            p = inputs[source]
            output.append((p, offsets[p], transform(source, txn)))
            offsets[p] += 1
    ends = {0: 3, 1: 3}
    return inputs, txns, output, dict(ends), ends


def test_sound_run_passes():
    assert check(*sound()) == []


def test_unknown_outcome_that_committed_whole_passes():
    # A kill before commit_transaction returned; the broker committed it: sound, if whole.
    inputs, txns, output, committed, ends = sound()
    txns[2] = ("unknown", txns[2][1])
    assert check(inputs, txns, output, committed, ends) == []


def test_duplicate_is_caught():
    inputs, txns, output, committed, ends = sound()
    txns[4] = ("committed", [b"r1"])
    output.append((1, 9, transform(b"r1", 4)))  # processed again after a lost commit
    problems = check(inputs, txns, output, committed, ends)
    assert any(p.startswith("duplicate:") and "r1" in p for p in problems), problems


def test_loss_is_caught():
    inputs, txns, output, committed, ends = sound()
    inputs[b"r6"] = 0  # an input no transaction carried to the output
    problems = check(inputs, txns, output, committed, ends)
    assert any(p.startswith("lost:") and "r6" in p for p in problems), problems


def test_wrong_committed_offset_is_caught():
    inputs, txns, output, committed, ends = sound()
    committed[1] = 2  # one input record short of the end
    problems = check(inputs, txns, output, committed, ends)
    assert problems == ["committed offset: input partition 1 committed at 2, its end is 3"], problems


def test_missing_committed_offset_is_caught():
    inputs, txns, output, committed, ends = sound()
    del committed[0]
    problems = check(inputs, txns, output, committed, ends)
    assert any("partition 0 committed at -1" in p for p in problems), problems


def test_aborted_record_visible_is_caught():
    inputs, txns, output, committed, ends = sound()
    output.append((0, 9, transform(b"r4", 1)))  # a record of the aborted t1 read committed
    problems = check(inputs, txns, output, committed, ends)
    assert any(p.startswith("aborted record visible: transaction t1") for p in problems), problems


def test_part_of_a_transaction_visible_is_caught():
    inputs, txns, output, committed, ends = sound()
    output = [r for r in output if r[2] != transform(b"r4", 2)]
    problems = check(inputs, txns, output, committed, ends)
    assert any(p.startswith("part of a transaction visible: t2") for p in problems), problems
    assert any(p.startswith("lost:") and "r4" in p for p in problems), problems


def test_committed_transaction_lost_is_caught():
    inputs, txns, output, committed, ends = sound()
    output = [r for r in output if not r[2].endswith(b"|t0")]
    problems = check(inputs, txns, output, committed, ends)
    assert any(p.startswith("committed transaction lost: t0") for p in problems), problems


def test_records_no_transaction_wrote_are_caught():
    inputs, txns, output, committed, ends = sound()
    output.append((0, 10, transform(b"r0", 99)))
    output.append((0, 11, b"garbage"))
    output.append((1, 12, transform(b"r9", 0)))
    problems = check(inputs, txns, output, committed, ends)
    assert any("t99 is visible but the application never began it" in p for p in problems), problems
    assert any(p.startswith("foreign record:") for p in problems), problems
    assert any(p.startswith("invented record:") for p in problems), problems


def test_record_in_the_wrong_partition_is_caught():
    inputs, txns, output, committed, ends = sound()
    p, o, v = output[0]
    output[0] = (1 - p, o, v)
    problems = check(inputs, txns, output, committed, ends)
    assert any(q.startswith("wrong partition:") for q in problems), problems
