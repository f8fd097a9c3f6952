#!/usr/bin/env python3
"""How often a librdkafka transactional producer's AddPartitionsToTxn is refused
CONCURRENT_TRANSACTIONS (read from librdkafka's `eos` debug log) over N transactions of one
record each, with the transactions per second and the commit p50 (I134: the next
transaction's add waits for the previous one's Complete record instead).

    python3 benches/scripts/txn-concurrent-count.py HOST:PORT [N=200]

Start the broker yourself, e.g. with `flush.policy=fsync` and, for Kafka's behaviour,
`transaction.hold.while.completing.ms=0`; alternate the two brokers. A count, not a timing:
the figures depend on the machine's load (print `uptime` beside them).
"""
import logging
import sys
import time
import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

bootstrap = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 200
topic = "txn-cc-" + uuid.uuid4().hex[:8]
admin = AdminClient({"bootstrap.servers": bootstrap})
admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()

lines = []
logger = logging.getLogger("librdkafka")
logger.setLevel(logging.DEBUG)
handler = logging.Handler()
handler.emit = lambda record: lines.append(record.getMessage())
logger.addHandler(handler)

producer = Producer(
    {
        "bootstrap.servers": bootstrap,
        "transactional.id": topic,
        "debug": "eos",
        "socket.nagle.disable": True,
    },
    logger=logger,
)
producer.init_transactions(60)
start = time.time()
commits = []
for _ in range(n):
    producer.begin_transaction()
    producer.produce(topic, b"x", partition=0)
    c = time.time()
    producer.commit_transaction(60)
    commits.append(time.time() - c)
elapsed = time.time() - start
producer.poll(0)
refused = sum(
    1 for l in lines if "AddPartitionsToTxn response" in l and "concurrent operation" in l
)
commits.sort()
print(
    f"{n} transactions in {elapsed:.2f} s = {n / elapsed:.1f}/s; "
    f"commit p50 {commits[n // 2] * 1e3:.1f} ms; "
    f"AddPartitionsToTxn refused CONCURRENT_TRANSACTIONS: {refused}"
)
