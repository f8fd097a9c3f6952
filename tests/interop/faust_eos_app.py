"""A faust-streaming application in exactly-once mode, run unchanged by test_frameworks.py.

``python faust_eos_app.py worker`` with ``BOOTSTRAP`` (host:port), ``FAUST_APP_ID`` and
``WORKER_RUN`` in the environment. One agent reads ``eos-in`` and writes ``T(<value>)|w<run>``
to ``eos-out``, in the same partition. With ``processing_guarantee="exactly_once"`` faust runs one transactional producer
per assigned partition (aiokafka), writes the output and the consumer's offsets in the same
transaction and commits every ``broker_commit_every`` records or ``broker_commit_interval``
seconds. The agent sleeps a little per record (the "work"), so a kill lands mid-stream.
"""

import asyncio
import os

import faust

# Which start of the worker wrote an output record (the test's WORKER_RUN).
RUN = os.environ.get("WORKER_RUN", "0").encode()

app = faust.App(
    os.environ["FAUST_APP_ID"],
    broker=f"kafka://{os.environ['BOOTSTRAP']}",
    processing_guarantee="exactly_once",
    store="memory://",
    web_enabled=False,
    producer_acks=-1,
    topic_replication_factor=1,
    topic_partitions=2,
    broker_commit_every=20,
    broker_commit_interval=0.5,
    # A killed worker's member stays in the group until its session times out, and the
    # restarted one's rebalance waits for it: the shortest session a broker allows by default
    # (group.min.session.timeout.ms, 6 s) rather than faust's 60 s.
    broker_session_timeout=6.0,
    broker_heartbeat_interval=1.0,
)
source = app.topic("eos-in", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")
sink = app.topic("eos-out", key_type=bytes, value_type=bytes, key_serializer="raw", value_serializer="raw")


@app.agent(source)
async def transform(stream):
    async for event in stream.events():
        await asyncio.sleep(0.005)
        await sink.send(key=event.key, value=b"T(" + event.value + b")|w" + RUN, partition=event.message.partition)


@app.agent(sink)
async def sink_metadata(stream):
    """Consumes its own output and does nothing with it. Without it faust-streaming 0.15.3
    writes the output outside the transaction: its TransactionManager picks the transactional
    producer from the consumer's metadata (``key_partition``), which knows only subscribed
    topics, and falls back to the plain producer for any other (seen in the log: the output
    batches had no transactional bit, producer id 0). Subscribed, ``eos-out`` joins ``eos-in``'s
    co-partitioned topic group, so the record for input partition p goes through the producer
    whose transaction also commits p's offset."""
    async for _ in stream:
        pass


if __name__ == "__main__":
    app.main()
