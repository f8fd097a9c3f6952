// @kafkajs/confluent-schema-registry against the built-in registry and one broker:
// `node schema_registry.js HOST:PORT http://REGISTRY`.
//
// Run by tests/interop/test_kafkajs.py, which asserts on what this prints (one JSON object on
// the last line of stdout); this script only drives the clients and reports what it saw:
// - `id`, `again`: the id `register` got for an Avro schema under `kjs-users-value`, and the id
//   a second `register` of the same schema got;
// - `latest`: `getLatestSchemaId("kjs-users-value")`;
// - `wireIds`: the schema id each produced value carries (magic byte 0, then 4 bytes);
// - `decoded`: what `decode` gave for each value read back from `kjs-users`;
// - `v2`, `incompatible`: the id of an allowed evolution, and the HTTP status of a refused
//   (BACKWARD-incompatible) one.
// Every wait is bounded (LIMIT_MS).
const { Kafka, logLevel } = require("kafkajs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");

const LIMIT_MS = 30000;
const [broker, registryUrl] = process.argv.slice(2);
const kafka = new Kafka({ clientId: "kjs-registry", brokers: [broker], logLevel: logLevel.ERROR });
const registry = new SchemaRegistry({ host: registryUrl });

const USER_V1 = {
  type: "record", name: "User", namespace: "kjs",
  fields: [{ name: "name", type: "string" }, { name: "favorite", type: "int" }],
};
const USER_V2 = {
  ...USER_V1,
  fields: [...USER_V1.fields, { name: "email", type: ["null", "string"], default: null }],
};
const USER_BREAKING = {
  ...USER_V1,
  fields: [...USER_V1.fields, { name: "country", type: "string" }],
};
const USERS = [{ name: "ada", favorite: 7 }, { name: "grace", favorite: 42 }];

function withLimit(promise, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${LIMIT_MS} ms`)), LIMIT_MS);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

async function main() {
  const report = {};
  const avro = (schema) => ({ type: SchemaType.AVRO, schema: JSON.stringify(schema) });
  const subject = { subject: "kjs-users-value" };
  report.id = (await registry.register(avro(USER_V1), subject)).id;
  report.again = (await registry.register(avro(USER_V1), subject)).id;
  report.latest = await registry.getLatestSchemaId("kjs-users-value");

  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (const user of USERS) {
    messages.push({ value: await registry.encode(report.id, user) });
  }
  await producer.send({ topic: "kjs-users", messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: "kjs-registry-reader" });
  const raw = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: "kjs-users", fromBeginning: true });
    await withLimit(new Promise((resolve, reject) => {
      consumer.run({
        eachMessage: async ({ message }) => {
          raw.push(message.value);
          if (raw.length === USERS.length) resolve();
        },
      }).catch(reject);
    }), "reading kjs-users");
  } finally {
    await consumer.disconnect();
  }
  report.wireIds = raw.map((value) => (value[0] === 0 ? value.readInt32BE(1) : -1));
  report.decoded = [];
  for (const value of raw) {
    report.decoded.push(await registry.decode(value));
  }

  report.v2 = (await registry.register(avro(USER_V2), subject)).id;
  try {
    await registry.register(avro(USER_BREAKING), subject);
    report.incompatible = "registered";
  } catch (e) {
    report.incompatible = e.status ?? e.message;
  }
  console.log(JSON.stringify(report));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
