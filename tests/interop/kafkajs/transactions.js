// kafkajs transactions against one broker: `node transactions.js HOST:PORT`.
//
// Run by tests/interop/test_kafkajs.py, which asserts on what this prints (one JSON object on
// the last line of stdout); this script only drives kafkajs and reports what it saw:
// - `committed`/`uncommitted`: the values a read_committed (kafkajs's default) and a
//   read_uncommitted consumer read from `kjs-txn` after three transactions: j0 j1 committed,
//   jx aborted, j2 committed;
// - `offsetsAfterCommit`/`offsetsAfterAbort`: the group `kjs-ctp`'s committed offset of
//   `kjs-in` partition 0 (admin fetchOffsets) after a transaction that wrote `o0` to `kjs-out`
//   and sent offset 3 with sendOffsets, committed; then after one that wrote `ox` and sent
//   offset 5, aborted;
// - `out`: what a read_committed consumer reads from `kjs-out`.
// Every wait is bounded (LIMIT_MS); a consumer stops at the last committed value it expects,
// which the log holds after the aborted ones.
const { Kafka, logLevel } = require("kafkajs");

const LIMIT_MS = 30000;
const broker = process.argv[2];
const kafka = new Kafka({ clientId: "kjs-interop", brokers: [broker], logLevel: logLevel.ERROR });

function withLimit(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${LIMIT_MS} ms`)), LIMIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

// Reads `topic` from the beginning until `last` arrives; returns the values in order.
async function readUntil(topic, last, readUncommitted) {
  const consumer = kafka.consumer({
    groupId: `kjs-reader-${topic}-${readUncommitted ? "ru" : "rc"}`,
    readUncommitted,
  });
  const seen = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await withLimit(new Promise((resolve, reject) => {
      consumer.run({
        autoCommit: false,
        eachMessage: async ({ message }) => {
          seen.push(message.value.toString());
          if (message.value.toString() === last) resolve();
        },
      }).catch(reject);
    }), `reading ${topic} up to ${last} (seen ${seen})`);
  } finally {
    await consumer.disconnect();
  }
  return seen;
}

async function groupOffset(admin, groupId, topic) {
  const [entry] = await admin.fetchOffsets({ groupId, topics: [topic] });
  return entry.partitions.find((p) => p.partition === 0).offset;
}

async function main() {
  const admin = kafka.admin();
  await admin.connect();
  const report = {};
  try {
    await admin.createTopics({
      waitForLeaders: true,
      topics: ["kjs-txn", "kjs-in", "kjs-out"].map((topic) => ({ topic, numPartitions: 1 })),
    });

    const producer = kafka.producer({
      transactionalId: `kjs-tx-${process.pid}`,
      idempotent: true,
      maxInFlightRequests: 1,
    });
    await producer.connect();
    try {
      for (const [values, commit] of [[["j0", "j1"], true], [["jx"], false], [["j2"], true]]) {
        const txn = await producer.transaction();
        await txn.send({ topic: "kjs-txn", messages: values.map((value) => ({ value, partition: 0 })) });
        await (commit ? txn.commit() : txn.abort());
      }

      // Plain (non-transactional) input for the group's offsets to point into.
      const plain = kafka.producer();
      await plain.connect();
      await plain.send({
        topic: "kjs-in",
        messages: ["i0", "i1", "i2", "i3", "i4", "i5"].map((value) => ({ value, partition: 0 })),
      });
      await plain.disconnect();

      const offsets = (offset) => ({
        consumerGroupId: "kjs-ctp",
        topics: [{ topic: "kjs-in", partitions: [{ partition: 0, offset }] }],
      });
      let txn = await producer.transaction();
      await txn.send({ topic: "kjs-out", messages: [{ value: "o0", partition: 0 }] });
      await txn.sendOffsets(offsets("3"));
      await txn.commit();
      report.offsetsAfterCommit = await groupOffset(admin, "kjs-ctp", "kjs-in");

      txn = await producer.transaction();
      await txn.send({ topic: "kjs-out", messages: [{ value: "ox", partition: 0 }] });
      await txn.sendOffsets(offsets("5"));
      await txn.abort();
      report.offsetsAfterAbort = await groupOffset(admin, "kjs-ctp", "kjs-in");

      // A last committed record, so a read_committed reader knows where to stop.
      txn = await producer.transaction();
      await txn.send({ topic: "kjs-out", messages: [{ value: "o1", partition: 0 }] });
      await txn.commit();
    } finally {
      await producer.disconnect();
    }

    report.committed = await readUntil("kjs-txn", "j2", false);
    report.uncommitted = await readUntil("kjs-txn", "j2", true);
    report.out = await readUntil("kjs-out", "o1", false);
  } finally {
    await admin.disconnect();
  }
  console.log(JSON.stringify(report));
}

main().then(
  () => process.exit(0),
  (e) => {
    console.error(e && e.stack ? e.stack : e);
    process.exit(1);
  },
);
