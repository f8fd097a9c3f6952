"""A consumer-group member for the fencing test, run as its own process so the test can
freeze it (SIGSTOP) past its session timeout.

Usage: fenced_member.py BOOTSTRAP GROUP TOPIC PARTITIONS PROTOCOL

Joins GROUP with PROTOCOL (`classic`: range, session.timeout.ms=6000; `consumer`: KIP-848
with the broker's `uniform` assignor and its session timeout), waits until it owns all
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
    bootstrap, group, topic, partitions, protocol = sys.argv[1:6]
    partitions = int(partitions)
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "group.protocol": protocol,
        # Long enough that only the broker's session timeout removes this member.
        "max.poll.interval.ms": 120000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "log_level": 3,
        "enable.metrics.push": False,
    }
    if protocol == "classic":
        conf["partition.assignment.strategy"] = "range"
        conf["session.timeout.ms"] = 6000
        conf["heartbeat.interval.ms"] = 500
    else:
        conf["group.remote.assignor"] = "uniform"
    consumer = Consumer(conf)
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
