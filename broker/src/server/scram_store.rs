//! The SCRAM credentials (SCRAM-SHA-256/512), stored in the data directory.
//!
//! Contract:
//! - A credential is Kafka's salted, iterated form (salt, StoredKey, ServerKey, iterations),
//!   never a password (I41): AlterUserScramCredentials brings a SaltedPassword the client
//!   computed, from which the keys are derived before anything is stored.
//! - Stored in `<data>/`[`SCRAM_CREDENTIALS_FILE`]: a header line, then one line per
//!   credential, `<mechanism> <Kafka's credential text> <username>` (the username last, so it
//!   may hold spaces; control characters are refused). Written whole, durably (temp file,
//!   sync, rename, directory sync) before an alteration is answered or takes effect (I46).
//! - Loaded at startup (shard 0) into [`Shared`](super::shared::Shared), an immutable
//!   snapshot replaced whole; a file that does not parse stops the broker, naming it.

use std::collections::BTreeMap;
use std::path::Path;

use minikafka_core::auth::scram::{ScramCredential, ScramMechanism};
use minikafka_core::backend::Backend;

use crate::log::atomic_file::{read_bounded, tmp_path, write_atomically, ReadError};

/// The file in the data directory.
pub const SCRAM_CREDENTIALS_FILE: &str = "scram-credentials";
/// The largest credentials file read back.
pub const MAX_SCRAM_FILE_BYTES: u64 = 16 * 1024 * 1024;
/// The first line of the file.
const HEADER: &str = "# minikafka SCRAM credentials v1";
/// The longest username accepted (Kafka's own limit is its ZooKeeper/KRaft record size).
pub const MAX_USERNAME_BYTES: usize = 1024;

/// Every user's credentials, by username then mechanism.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScramStore {
    users: BTreeMap<String, BTreeMap<&'static str, ScramCredential>>,
}

/// Whether `name` may be a SCRAM username: not empty, bounded, no control characters.
pub fn valid_username(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_USERNAME_BYTES && !name.chars().any(char::is_control)
}

impl ScramStore {
    /// The credential of `user` for `mechanism`.
    pub fn get(&self, user: &str, mechanism: ScramMechanism) -> Option<&ScramCredential> {
        self.users.get(user)?.get(mechanism.name())
    }

    /// `user`'s mechanisms and their iterations, in Kafka's order.
    pub fn describe(&self, user: &str) -> Option<Vec<(ScramMechanism, u32)>> {
        let creds = self.users.get(user)?;
        Some(
            ScramMechanism::ALL
                .into_iter()
                .filter_map(|m| creds.get(m.name()).map(|c| (m, c.iterations)))
                .collect(),
        )
    }

    /// Every username, sorted.
    pub fn usernames(&self) -> impl Iterator<Item = &str> {
        self.users.keys().map(String::as_str)
    }

    /// Adds or replaces `user`'s credential for `mechanism`.
    pub fn upsert(&mut self, user: &str, mechanism: ScramMechanism, credential: ScramCredential) {
        self.users
            .entry(user.to_string())
            .or_default()
            .insert(mechanism.name(), credential);
    }

    /// Removes `user`'s credential for `mechanism`; whether there was one.
    pub fn delete(&mut self, user: &str, mechanism: ScramMechanism) -> bool {
        let Some(creds) = self.users.get_mut(user) else {
            return false;
        };
        let removed = creds.remove(mechanism.name()).is_some();
        if creds.is_empty() {
            self.users.remove(user);
        }
        removed
    }

    /// The file's text.
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER}\n");
        for (user, creds) in &self.users {
            for (mechanism, credential) in creds {
                out.push_str(&format!(
                    "{mechanism} {} {user}\n",
                    credential.to_kafka_string()
                ));
            }
        }
        out
    }

    /// Reads the file's text; an error names the line.
    pub fn decode(text: &str) -> Result<ScramStore, String> {
        let mut lines = text.lines();
        if lines.next() != Some(HEADER) {
            return Err("missing header line".into());
        }
        let mut store = ScramStore::default();
        for (n, line) in lines.enumerate() {
            let bad = |why: &str| format!("line {}: {why}", n + 2);
            let mut parts = line.splitn(3, ' ');
            let (Some(mechanism), Some(credential), Some(user)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return Err(bad("expected `<mechanism> <credential> <user>`"));
            };
            let mechanism =
                ScramMechanism::from_name(mechanism).ok_or_else(|| bad("unknown mechanism"))?;
            if !valid_username(user) {
                return Err(bad("bad username"));
            }
            let credential = ScramCredential::from_kafka_string(mechanism, credential)
                .map_err(|e| bad(&e.to_string()))?;
            store.upsert(user, mechanism, credential);
        }
        Ok(store)
    }
}

/// Loads the stored credentials of `data_dir` (none when no file), removing a leftover
/// temporary file.
pub async fn load<B: Backend>(backend: &B, data_dir: &Path) -> Result<ScramStore, String> {
    let path = data_dir.join(SCRAM_CREDENTIALS_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    match backend.remove_file(&tmp_path(&path)).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(what(e.to_string())),
        _ => {}
    }
    let bytes = match read_bounded(backend, &path, MAX_SCRAM_FILE_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(ScramStore::default()),
        Err(ReadError::Io(e)) => return Err(what(e.to_string())),
        Err(e) => return Err(what(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| what("not UTF-8".into()))?;
    ScramStore::decode(&text).map_err(what)
}

/// Stores `store` in `data_dir` durably (I46).
pub async fn save<B: Backend>(
    backend: &B,
    data_dir: &Path,
    store: &ScramStore,
) -> std::io::Result<()> {
    let path = data_dir.join(SCRAM_CREDENTIALS_FILE);
    write_atomically(backend, data_dir, &path, store.encode().into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credential(m: ScramMechanism, password: &str) -> ScramCredential {
        ScramCredential::from_password(m, password, b"salt-salt-salt", 4096).expect("ok")
    }

    #[test]
    fn encode_decode_round_trip_without_passwords() {
        let mut store = ScramStore::default();
        store.upsert(
            "alice",
            ScramMechanism::Sha512,
            credential(ScramMechanism::Sha512, "s3cret"),
        );
        store.upsert(
            "bob smith",
            ScramMechanism::Sha256,
            credential(ScramMechanism::Sha256, "pw"),
        );
        store.upsert(
            "alice",
            ScramMechanism::Sha256,
            credential(ScramMechanism::Sha256, "s3cret"),
        );
        let text = store.encode();
        assert!(!text.contains("s3cret"), "{text}");
        assert_eq!(ScramStore::decode(&text).expect("decodes"), store);
        assert_eq!(
            store.describe("alice").expect("alice"),
            [
                (ScramMechanism::Sha256, 4096),
                (ScramMechanism::Sha512, 4096)
            ]
        );
        assert!(store.delete("bob smith", ScramMechanism::Sha256));
        assert!(!store.delete("bob smith", ScramMechanism::Sha256));
        assert_eq!(store.usernames().collect::<Vec<_>>(), ["alice"]);
    }

    #[test]
    fn bad_files_are_refused_naming_the_line() {
        assert!(ScramStore::decode("").is_err());
        let ok = format!("{HEADER}\n");
        assert_eq!(
            ScramStore::decode(&ok).expect("empty"),
            ScramStore::default()
        );
        let err = ScramStore::decode(&format!("{HEADER}\nSCRAM-SHA-1 x y\n")).expect_err("bad");
        assert!(err.starts_with("line 2"), "{err}");
        let weak = format!("{HEADER}\nSCRAM-SHA-256 salt=c2FsdA==,stored_key=AA==,server_key=AA==,iterations=1 u\n");
        assert!(ScramStore::decode(&weak).is_err());
        assert!(!valid_username(""));
        assert!(!valid_username("a\nb"));
    }
}
