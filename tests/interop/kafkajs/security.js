// kafkajs over TLS and SASL: `node security.js HOST:PORT TOPIC VALUE SECURITY_JSON`.
//
// Run by tests/interop/test_security.py, which asserts on what this prints (one JSON object on
// the last line of stdout); this script only drives kafkajs and reports what it saw:
// - `produced`: true once the producer's send of VALUE to TOPIC partition 0 was acknowledged;
// - `seen`: the values a consumer (a fresh group, from the beginning) read from TOPIC up to
//   VALUE;
// - on failure, `error` (the kafkajs error's name and message) and exit status 1.
// SECURITY_JSON says how to connect, in kafkajs's own terms: `{"ca": PATH}` turns TLS on with
// that CA file; `{"sasl": {"mechanism": "plain"|"scram-sha-512"|..., "username", "password"}}`
// adds SASL; `{"sasl": {"mechanism": "oauthbearer", "token": JWT}}` sends that token.
// Every wait is bounded (LIMIT_MS).
const fs = require("fs");
const { Kafka, logLevel } = require("kafkajs");

const LIMIT_MS = 30000;
const [broker, topic, value, securityJson] = process.argv.slice(2);
const security = JSON.parse(securityJson || "{}");

function kafkaConfig() {
  const config = {
    clientId: "kjs-security",
    brokers: [broker],
    logLevel: logLevel.NOTHING,
    connectionTimeout: 10000,
    authenticationTimeout: 10000,
    retry: { retries: 2 },
  };
  if (security.ca) {
    config.ssl = { ca: [fs.readFileSync(security.ca, "utf-8")] };
  }
  if (security.sasl) {
    const { mechanism, username, password, token } = security.sasl;
    config.sasl = mechanism === "oauthbearer"
      ? { mechanism, oauthBearerProvider: async () => ({ value: token }) }
      : { mechanism, username, password };
  }
  return config;
}

function withLimit(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${LIMIT_MS} ms`)), LIMIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function main(report) {
  const kafka = new Kafka(kafkaConfig());
  const producer = kafka.producer();
  await withLimit(producer.connect(), "producer connect");
  try {
    await withLimit(producer.send({ topic, messages: [{ value, partition: 0 }] }), "send");
    report.produced = true;
  } finally {
    await producer.disconnect();
  }
  const consumer = kafka.consumer({ groupId: `kjs-security-${process.pid}-${Date.now()}` });
  await withLimit(consumer.connect(), "consumer connect");
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await withLimit(new Promise((resolve, reject) => {
      consumer.run({
        eachMessage: async ({ message }) => {
          report.seen.push(message.value.toString());
          if (message.value.toString() === value) resolve();
        },
      }).catch(reject);
    }), `reading ${topic} up to ${value}`);
  } finally {
    await consumer.disconnect();
  }
}

const report = { produced: false, seen: [] };
main(report).then(
  () => {
    console.log(JSON.stringify(report));
    process.exit(0);
  },
  (e) => {
    report.error = `${e && e.name}: ${e && e.message}`;
    console.error(e && e.stack ? e.stack : e);
    console.log(JSON.stringify(report));
    process.exit(1);
  },
);
