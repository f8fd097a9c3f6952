//! A driver for the registry machine in tests: it plays the broker's part, appending every
//! record the machine asks for to an in-memory `_schemas` log (encoded bytes, as on disk) and
//! reporting it durable, and it can replay that log into a fresh machine.

#![allow(dead_code)]

use minikafka_schema::{
    Registry, RegistryError, RequestId, SchemaInput, SchemaType, WriteReply, WriteRequest,
};

/// The machine plus the log it wrote.
pub struct Harness {
    pub registry: Registry,
    pub log: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    next_request: RequestId,
}

impl Harness {
    pub fn new() -> Self {
        Self {
            registry: Registry::new(),
            log: Vec::new(),
            next_request: 1,
        }
    }

    /// One write, driven to its reply: every append is written to the log and acknowledged.
    pub fn write(&mut self, write: WriteRequest) -> Result<WriteReply, RegistryError> {
        let request = self.next_request;
        self.next_request += 1;
        self.registry.handle_write(request, write);
        loop {
            if let Some(append) = self.registry.poll_append() {
                assert_eq!(append.request, request, "one write in flight");
                assert!(!append.records.is_empty(), "an append carries records");
                for record in &append.records {
                    self.log.push(record.encode());
                }
                self.registry.handle_append_done(request, Ok(()));
                continue;
            }
            let (replied, reply) = self.registry.poll_reply().expect("a write is answered");
            assert_eq!(replied, request);
            assert!(self.registry.poll_append().is_none());
            assert!(self.registry.poll_reply().is_none());
            return reply;
        }
    }

    /// Registers an AVRO schema.
    pub fn register(&mut self, subject: &str, schema: &str) -> Result<(i32, i32), RegistryError> {
        self.register_input(subject, avro(schema))
    }

    pub fn register_input(
        &mut self,
        subject: &str,
        input: SchemaInput,
    ) -> Result<(i32, i32), RegistryError> {
        match self.write(WriteRequest::Register {
            subject: subject.into(),
            input,
            id: None,
            version: None,
        })? {
            WriteReply::Registered { id, version } => Ok((id, version)),
            other => panic!("register answered {other:?}"),
        }
    }

    /// A fresh machine fed this log, as at startup (I50).
    pub fn replayed(&self) -> Registry {
        let mut fresh = Registry::new();
        for (key, value) in &self.log {
            fresh
                .replay(key, value.as_deref())
                .expect("the machine's own records replay");
        }
        fresh
    }

    /// Asserts that replaying the log rebuilds this machine's state exactly (I50).
    pub fn assert_replay_matches(&self) {
        assert_eq!(self.replayed().state(), self.registry.state());
    }
}

pub fn avro(schema: &str) -> SchemaInput {
    SchemaInput {
        schema: schema.into(),
        schema_type: SchemaType::Avro,
        references: vec![],
    }
}

/// A record schema `name` with the given `(field, type, default)` fields.
pub fn record(name: &str, fields: &[(&str, &str, Option<&str>)]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|(field, kind, default)| match default {
            Some(default) => format!(r#"{{"name":"{field}","type":"{kind}","default":{default}}}"#),
            None => format!(r#"{{"name":"{field}","type":"{kind}"}}"#),
        })
        .collect();
    format!(
        r#"{{"type":"record","name":"{name}","fields":[{}]}}"#,
        fields.join(",")
    )
}
