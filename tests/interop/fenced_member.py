"""A consumer-group member for the fencing test, run as its own process so the test can
freeze it (SIGSTOP) past its session timeout.

Usage: fenced_member.py BOOTSTRAP GROUP TOPIC PARTITIONS

Joins GROUP (classic protocol, range, session.timeout.ms=6000), waits until it owns all
PARTITIONS and has read each to its end, commits, and prints `READY {partition: offset}`.
Then it waits for a line on stdin and commits offsets one past the high watermarks of every
partition it still thinks it owns, printing `FAILED <error name>` or `COMMITTED`. Every wait is
bounded; it exits without leaving the group (a frozen member does not say goodbye either).
"""

import json
import os
import sys
import time

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

LIMIT_S = 30


def main():
    bootstrap, group, topic, partitions = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    consumer = Consumer({
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        # Long enough that only the broker's session timeout removes this member.
        "max.poll.interval.ms": 120000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "log_level": 3,
        "enable.metrics.push": False,
    })
    consumer.subscribe([topic])
    at_end = set()
    deadline = time.monotonic() + LIMIT_S
    while len(at_end) < partitions or len(consumer.assignment()) < partitions:
        if time.monotonic() > deadline:
            print(f"TIMEOUT assignment={consumer.assignment()} at_end={at_end}", flush=True)
            os._exit(1)
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        if msg.error() is not None:
            if msg.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(msg.partition())
                continue
            print(f"ERROR {msg.error()}", flush=True)
            os._exit(1)
    consumer.commit(asynchronous=False)
    positions = {tp.partition: tp.offset for tp in consumer.position(consumer.assignment())}
    print("READY " + json.dumps(positions), flush=True)

    sys.stdin.readline()
    stale = [TopicPartition(topic, p, o + 1) for p, o in positions.items()]
    try:
        result = consumer.commit(offsets=stale, asynchronous=False)
    except KafkaException as e:
        print(f"FAILED {e.args[0].name()}", flush=True)
    else:
        errors = [tp.error.name() for tp in result if tp.error is not None]
        print(f"FAILED {errors[0]}" if errors else "COMMITTED", flush=True)
    os._exit(0)


if __name__ == "__main__":
    main()
