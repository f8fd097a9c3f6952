//! Durable topic metadata: name, partition count and configuration overrides, one small text
//! file per topic in `<data>/topics/<name>.meta`.
//!
//! Contract:
//! - Format: UTF-8 lines `key=value`; a first line `# minikafka topic v1`; keys `name`,
//!   `partition_count`, and `config.<kafka key>` for each override. Parsed defensively: a
//!   missing or repeated key, a bad number, an unknown key or a file over [`MAX_META_BYTES`]
//!   is a [`LogError::BadMetadata`] naming the line, never a panic.
//! - Writes are atomic: a `.tmp` file written and synced, renamed over the old file, the
//!   directory synced. Startup removes leftover `.tmp` files.
//! - Never: stores a name or value that could break the format (newlines, `=` in keys), or a
//!   topic name Kafka would refuse.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

use minikafka_core::backend::Backend;

use super::segment::TMP_SUFFIX;
use super::{LogError, Result};

/// Largest metadata file read back (I10: the read is sized by the file, so bound it).
pub const MAX_META_BYTES: u64 = 1 << 20;
/// Extension of topic metadata files.
pub const META_SUFFIX: &str = "meta";
const HEADER_LINE: &str = "# minikafka topic v1";
const CONFIG_PREFIX: &str = "config.";

/// What is stored about one topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicMeta {
    /// The topic's name (Kafka's rules: 1..=249 of `[A-Za-z0-9._-]`, not `.` or `..`).
    pub name: String,
    /// Number of partitions.
    pub partition_count: i32,
    /// Topic-level configuration overrides, by Kafka key (`retention.ms`, …).
    pub config: BTreeMap<String, String>,
}

impl TopicMeta {
    /// Encodes the metadata file's text. Fails on a name, key or value that cannot be stored.
    pub fn encode(&self) -> Result<String> {
        validate_topic_name(&self.name)?;
        if self.partition_count <= 0 {
            return Err(LogError::InvalidName {
                name: self.partition_count.to_string(),
                reason: "partition count must be positive",
            });
        }
        let mut out = format!(
            "{HEADER_LINE}\nname={}\npartition_count={}\n",
            self.name, self.partition_count
        );
        for (key, value) in &self.config {
            if key.is_empty() || key.contains(['=', '\n', '\r']) || key.trim() != key {
                return Err(LogError::InvalidName {
                    name: key.clone(),
                    reason:
                        "configuration keys must be non-empty, without '=', newlines or edge spaces",
                });
            }
            if value.contains(['\n', '\r']) {
                return Err(LogError::InvalidName {
                    name: value.clone(),
                    reason: "configuration values must not contain newlines",
                });
            }
            out.push_str(&format!("{CONFIG_PREFIX}{key}={value}\n"));
        }
        Ok(out)
    }

    /// Parses a metadata file's text; `path` is only for error messages.
    pub fn decode(text: &str, path: &Path) -> Result<Self> {
        let bad = |line: usize, reason: String| LogError::BadMetadata {
            path: path.to_path_buf(),
            line,
            reason,
        };
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER_LINE)) => {}
            _ => return Err(bad(1, format!("first line is not {HEADER_LINE:?}"))),
        }
        let mut name = None;
        let mut partition_count = None;
        let mut config = BTreeMap::new();
        for (i, line) in lines {
            let line_no = i + 1;
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, value)) = line.split_once('=') else {
                return Err(bad(line_no, "not a key=value line".into()));
            };
            let duplicate = match key {
                "name" => name.replace(value.to_string()).is_some(),
                "partition_count" => {
                    let count: i32 = value
                        .parse()
                        .map_err(|_| bad(line_no, format!("bad partition count {value:?}")))?;
                    if count <= 0 {
                        return Err(bad(
                            line_no,
                            format!("partition count {count} is not positive"),
                        ));
                    }
                    partition_count.replace(count).is_some()
                }
                _ => match key.strip_prefix(CONFIG_PREFIX) {
                    Some(k) if !k.is_empty() && k.trim() == k && !value.contains('\r') => {
                        config.insert(k.to_string(), value.to_string()).is_some()
                    }
                    _ => return Err(bad(line_no, format!("unknown key {key:?}"))),
                },
            };
            if duplicate {
                return Err(bad(line_no, format!("key {key:?} repeated")));
            }
        }
        let name = name.ok_or_else(|| bad(0, "no name".into()))?;
        validate_topic_name(&name).map_err(|e| bad(0, e.to_string()))?;
        let partition_count = partition_count.ok_or_else(|| bad(0, "no partition_count".into()))?;
        Ok(TopicMeta {
            name,
            partition_count,
            config,
        })
    }
}

/// Checks a topic name against Kafka's rules.
pub fn validate_topic_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > 249 {
        "longer than 249 characters"
    } else if name == "." || name == ".." {
        "'.' and '..' are reserved"
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
    {
        "only ASCII letters, digits, '.', '_' and '-' are allowed"
    } else {
        return Ok(());
    };
    Err(LogError::InvalidName {
        name: name.to_string(),
        reason,
    })
}

/// The topic metadata files of one data directory.
pub struct TopicStore<B: Backend> {
    backend: B,
    dir: PathBuf,
}

impl<B: Backend> TopicStore<B> {
    /// Opens the store in `<data_dir>/topics`, creating it, and removes leftover `.tmp` files.
    pub async fn open(backend: B, data_dir: &Path) -> Result<Self> {
        let dir = data_dir.join("topics");
        super::create_dir_durably(&backend, &dir).await?;
        for path in backend.list_dir(&dir).await? {
            if path.extension().and_then(|e| e.to_str()) == Some(TMP_SUFFIX) {
                backend.remove_file(&path).await?;
            }
        }
        Ok(TopicStore { backend, dir })
    }

    /// The directory holding the files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.{META_SUFFIX}"))
    }

    /// Saves (creates or replaces) a topic's metadata atomically
    /// ([`write_atomically`](super::atomic_file::write_atomically)).
    pub async fn save(&self, meta: &TopicMeta) -> Result<()> {
        let text = meta.encode()?;
        let path = self.path_of(&meta.name);
        super::atomic_file::write_atomically(&self.backend, &self.dir, &path, text.into_bytes())
            .await?;
        Ok(())
    }

    /// Loads one topic's metadata; `None` when it has none.
    pub async fn load(&self, name: &str) -> Result<Option<TopicMeta>> {
        validate_topic_name(name)?;
        let path = self.path_of(name);
        match self.read_file(&path).await {
            Ok(meta) => Ok(Some(meta)),
            Err(LogError::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Loads every topic's metadata, sorted by name.
    pub async fn load_all(&self) -> Result<Vec<TopicMeta>> {
        let mut out = Vec::new();
        for path in self.backend.list_dir(&self.dir).await? {
            if path.extension().and_then(|e| e.to_str()) != Some(META_SUFFIX) {
                continue;
            }
            let meta = self.read_file(&path).await?;
            let expected = self.path_of(&meta.name);
            if expected != path {
                return Err(LogError::BadMetadata {
                    path,
                    line: 0,
                    reason: format!("names topic {:?}, not its file name", meta.name),
                });
            }
            out.push(meta);
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(out)
    }

    /// Removes a topic's metadata (absent is fine).
    pub async fn remove(&self, name: &str) -> Result<()> {
        validate_topic_name(name)?;
        match self.backend.remove_file(&self.path_of(name)).await {
            Err(e) if e.kind() != io::ErrorKind::NotFound => return Err(e.into()),
            _ => {}
        }
        self.backend.sync_dir(&self.dir).await?;
        Ok(())
    }

    async fn read_file(&self, path: &Path) -> Result<TopicMeta> {
        let bad = |reason: String| LogError::BadMetadata {
            path: path.to_path_buf(),
            line: 0,
            reason,
        };
        let bytes =
            match super::atomic_file::read_bounded(&self.backend, path, MAX_META_BYTES).await {
                Ok(Some(bytes)) => bytes,
                Ok(None) => return Err(io::Error::from(io::ErrorKind::NotFound).into()),
                Err(super::atomic_file::ReadError::Io(e)) => return Err(e.into()),
                Err(e) => return Err(bad(e.to_string())),
            };
        let text = String::from_utf8(bytes).map_err(|_| bad("not UTF-8".into()))?;
        TopicMeta::decode(&text, path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TopicMeta {
        let mut config = BTreeMap::new();
        config.insert("retention.ms".to_string(), "1000".to_string());
        config.insert("cleanup.policy".to_string(), "delete=yes".to_string());
        TopicMeta {
            name: "orders.v1_x-y".to_string(),
            partition_count: 3,
            config,
        }
    }

    #[test]
    fn encode_decode_round_trip() {
        let m = meta();
        let text = m.encode().expect("encodes");
        assert_eq!(
            TopicMeta::decode(&text, Path::new("x")).expect("decodes"),
            m
        );
    }

    #[test]
    fn decode_rejects_damaged_files() {
        let p = Path::new("x");
        let good = meta().encode().expect("encodes");
        for bad in [
            String::new(),
            "garbage".to_string(),
            good.replace("partition_count=3", "partition_count=-1"),
            good.replace("partition_count=3", "partition_count=three"),
            good.replace("name=orders.v1_x-y\n", ""),
            good.replace("name=orders.v1_x-y", "name=../etc"),
            format!("{good}name=again\n"),
            format!("{good}bogus=1\n"),
            format!("{good}no equals sign\n"),
        ] {
            assert!(TopicMeta::decode(&bad, p).is_err(), "accepted {bad:?}");
        }
    }

    proptest::proptest! {
        /// Any text decodes to an error or to metadata that encodes back to the same
        /// metadata: never a panic, never a value that cannot be stored again.
        #[test]
        fn decode_is_total_and_stable(text in "(# minikafka topic v1\n)?((name|partition_count|config\\.[a-z.]{1,8}|[a-z]{1,4})=[a-zA-Z0-9._=-]{0,8}\n){0,6}") {
            if let Ok(meta) = TopicMeta::decode(&text, Path::new("x")) {
                let again = meta.encode().expect("decoded metadata encodes");
                proptest::prop_assert_eq!(TopicMeta::decode(&again, Path::new("x")).expect("round trip"), meta);
            }
        }
    }

    #[test]
    fn encode_refuses_unstorable_names() {
        let mut m = meta();
        m.name = "a/b".into();
        assert!(m.encode().is_err());
        let mut m = meta();
        m.config.insert("k".into(), "line\nbreak".into());
        assert!(m.encode().is_err());
        let mut m = meta();
        m.config.insert("a=b".into(), "v".into());
        assert!(m.encode().is_err());
    }
}
