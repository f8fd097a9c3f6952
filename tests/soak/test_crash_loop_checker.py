"""Unit checks of the crash loop's checker: it must flag each kind of fault it exists to catch.

A kill -9 of a broker with ``flush.policy=fsync`` cannot be made to lose data on purpose, so
the checker is verified here instead on doctored acknowledged lists and stored logs.
"""

import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from crash_loop import check, check_commits, check_group_read  # noqa: E402


def sound():
    """Two partitions, three records each, all acknowledged."""
    stored = {
        0: [(0, b"k1", b"c0-r0"), (1, b"k1", b"c0-r2"), (2, b"k3", b"c1-r0")],
        1: [(0, b"k2", b"c0-r1"), (1, b"k4", b"c0-r3"), (2, b"k2", b"c1-r1")],
    }
    acked = [(p, o, k, v) for p, records in stored.items() for (o, k, v) in records]
    return acked, stored


def test_sound_log_passes():
    acked, stored = sound()
    assert check(acked, stored) == []


def test_unacknowledged_extra_record_is_allowed():
    # A record whose ack was lost in a kill may be stored; that is not a fault.
    acked, stored = sound()
    stored[0].append((3, b"k9", b"c1-r9"))
    assert check(acked, stored) == []


def test_lost_acknowledged_record_is_caught():
    acked, stored = sound()
    stored[1].pop()  # the tail an unsynced write would lose
    problems = check(acked, stored)
    assert any(p.startswith("lost:") and "c1-r1" in p for p in problems), problems


def test_duplicate_is_caught():
    acked, stored = sound()
    stored[0].append((3, b"k1", b"c0-r2"))  # a retry stored a second time
    problems = check(acked, stored)
    assert any(p.startswith("duplicate:") and "c0-r2" in p for p in problems), problems


def test_record_at_wrong_offset_is_caught():
    acked, stored = sound()
    p, o, k, v = acked[1]
    acked[1] = (p, o + 1, k, v)  # acknowledged at one offset, stored at another
    problems = check(acked, stored)
    assert any(q.startswith("wrong record:") for q in problems), problems


def test_gap_in_offsets_is_caught():
    acked, stored = sound()
    stored[0][2] = (3, b"k3", b"c1-r0")
    acked = [a for a in acked if a[2:] != (b"k3", b"c1-r0")]
    problems = check(acked, stored)
    assert any("not dense" in p for p in problems), problems


def test_offset_acknowledged_twice_is_caught():
    acked, stored = sound()
    acked.append((0, 0, b"k5", b"c2-r0"))
    problems = check(acked, stored)
    assert any("acknowledged twice" in p for p in problems), problems


def test_changed_value_is_caught():
    acked, stored = sound()
    stored[1][0] = (0, b"k2", b"corrupt")
    problems = check(acked, stored)
    assert any(p.startswith("wrong record:") for p in problems), problems


def test_last_acknowledged_commit_or_one_sent_after_it_passes():
    # Equal: the acknowledged commit survived; 35: one in flight at the kill was stored; a
    # lower later commit (the consumer re-read after a rejoin) is allowed when it was sent.
    assert check_commits({0: 40, 1: 20}, {1: {35}}, {0: 40, 1: 35}) == []
    assert check_commits({0: 40}, {0: {31}}, {0: 31}) == []


def test_commit_replaced_by_an_older_one_is_caught():
    # 39 was never sent after the acknowledged 40: the broker lost 40 or replayed an old one.
    problems = check_commits({0: 40, 1: 20}, {}, {0: 39, 1: 20})
    assert len(problems) == 1 and problems[0].startswith("commit lost: partition 0"), problems


def test_commit_missing_after_a_restart_is_caught():
    problems = check_commits({0: 40}, {}, {})
    assert problems and "committed offset -1" in problems[0], problems


def test_invented_commit_is_caught():
    problems = check_commits({}, {}, {2: 7})
    assert problems and "partition 2" in problems[0], problems


def group_read(acked):
    """What a group member that read every acknowledged record consumed."""
    return {(p, o): v for (p, o, _, v) in acked}


def test_group_that_read_every_acknowledged_record_passes():
    acked, _ = sound()
    consumed = group_read(acked)
    consumed[(0, 3)] = b"c1-r9"  # an unacknowledged record it also read is no fault
    assert check_group_read(acked, consumed) == []


def test_group_that_consumed_nothing_is_caught():
    acked, _ = sound()
    problems = check_group_read(acked, {})
    assert len(problems) == 1 and "consumed nothing" in problems[0], problems


def test_group_that_skipped_a_record_is_caught():
    acked, _ = sound()
    consumed = group_read(acked)
    del consumed[(1, 1)]  # a commit past a record the member never read
    problems = check_group_read(acked, consumed)
    assert problems == ["group missed: acknowledged b'c0-r3' at partition 1 offset 1"], problems


def test_group_that_read_another_value_is_caught():
    acked, _ = sound()
    consumed = group_read(acked)
    consumed[(0, 2)] = b"c9-r9"
    problems = check_group_read(acked, consumed)
    assert len(problems) == 1 and "acknowledged b'c1-r0'" in problems[0], problems
