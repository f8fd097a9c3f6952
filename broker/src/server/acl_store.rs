//! The ACLs, kept durably in the data directory and shared by every shard.
//!
//! Contract:
//! - [`AclSet`] is an immutable, sorted, duplicate-free set of [`AclBinding`]s; CreateAcls and
//!   DeleteAcls build the next set and, under the admin lock, store it ([`save`]) before
//!   publishing it in [`Shared`](super::shared::Shared): a change that was answered survives a
//!   crash, and a change whose write failed is neither answered as done nor in force (I49).
//! - Stored in `<data>/`[`ACL_FILE`]: a header line, then one ACL a line,
//!   `<resource type> <pattern type> <operation> <permission> <hex(name)> <hex(principal)>
//!   <hex(host)>` (codes as Kafka's; hex keeps any name on one line), replaced atomically;
//!   read back at startup with a size bound, each line checked as CreateAcls checks a new ACL
//!   (a line that does not parse is an error naming it: the broker does not start with
//!   ACLs it cannot read, which would widen or narrow access silently).
//! - Never: holds a lock across disk work (the admin lock, async, serializes writers).

use std::path::Path;

use minikafka_core::auth::acl::AclBinding;
use minikafka_core::auth::acl_filter::{new_binding, AclFilter};
use minikafka_core::backend::Backend;

use crate::log::atomic_file::{read_bounded, tmp_path, write_atomically};

/// File name of the stored ACLs in the data directory.
pub const ACL_FILE: &str = "acls.v1";
/// Largest stored file read back (I10).
pub const MAX_ACL_FILE_BYTES: u64 = 64 * 1024 * 1024;
const HEADER_LINE: &str = "# minikafka acls v1";

/// A set of ACLs, sorted and without duplicates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AclSet {
    bindings: Vec<AclBinding>,
}

impl AclSet {
    /// The set of `bindings` (sorted, duplicates dropped).
    pub fn new(mut bindings: Vec<AclBinding>) -> AclSet {
        bindings.sort();
        bindings.dedup();
        AclSet { bindings }
    }

    /// Every ACL, sorted.
    pub fn bindings(&self) -> &[AclBinding] {
        &self.bindings
    }

    /// The ACLs `filter` selects.
    pub fn matching<'a>(&'a self, filter: &'a AclFilter) -> impl Iterator<Item = &'a AclBinding> {
        self.bindings.iter().filter(move |b| filter.matches(b))
    }

    /// This set with `added` (already checked) put in.
    pub fn with(&self, added: impl IntoIterator<Item = AclBinding>) -> AclSet {
        AclSet::new(self.bindings.iter().cloned().chain(added).collect())
    }

    /// This set without what any of `filters` selects.
    pub fn without(&self, filters: &[AclFilter]) -> AclSet {
        AclSet {
            bindings: self
                .bindings
                .iter()
                .filter(|b| !filters.iter().any(|f| f.matches(b)))
                .cloned()
                .collect(),
        }
    }

    /// The stored form.
    pub fn encode(&self) -> String {
        let mut out = format!("{HEADER_LINE}\n");
        for b in &self.bindings {
            out.push_str(&format!(
                "{} {} {} {} {} {} {}\n",
                b.resource_type.code(),
                b.pattern_type.code(),
                b.operation.code(),
                b.permission.code(),
                hex::encode(&b.resource_name),
                hex::encode(&b.principal),
                hex::encode(&b.host),
            ));
        }
        out
    }

    /// The set stored as `text`, or the first line that is wrong and why.
    pub fn decode(text: &str) -> Result<AclSet, String> {
        let mut lines = text.lines().enumerate();
        match lines.next() {
            Some((_, HEADER_LINE)) => {}
            _ => return Err(format!("line 1: expected {HEADER_LINE:?}")),
        }
        let mut bindings = Vec::new();
        for (index, line) in lines {
            let bad = |why: &str| format!("line {}: {why}", index + 1);
            let fields: Vec<&str> = line.split(' ').collect();
            let [rt, pt, op, perm, name, principal, host] = fields[..] else {
                return Err(bad("expected 7 fields"));
            };
            let code = |s: &str| s.parse::<i8>().map_err(|_| bad("not a code"));
            let text = |s: &str| {
                hex::decode(s)
                    .ok()
                    .and_then(|b| String::from_utf8(b).ok())
                    .ok_or_else(|| bad("not hex of UTF-8"))
            };
            let binding = new_binding(
                code(rt)?,
                &text(name)?,
                code(pt)?,
                &text(principal)?,
                &text(host)?,
                code(op)?,
                code(perm)?,
            )
            .map_err(|e| bad(&e))?;
            bindings.push(binding);
        }
        Ok(AclSet::new(bindings))
    }
}

/// Loads the stored ACLs (none when the file does not exist), removing a leftover temp file.
pub async fn load<B: Backend>(backend: &B, data_dir: &Path) -> Result<AclSet, String> {
    let path = data_dir.join(ACL_FILE);
    let what = |e: String| format!("{}: {e}", path.display());
    match backend.remove_file(&tmp_path(&path)).await {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(what(e.to_string())),
        _ => {}
    }
    let bytes = match read_bounded(backend, &path, MAX_ACL_FILE_BYTES).await {
        Ok(Some(bytes)) => bytes,
        Ok(None) => return Ok(AclSet::default()),
        Err(e) => return Err(what(e.to_string())),
    };
    let text = String::from_utf8(bytes).map_err(|_| what("not UTF-8".into()))?;
    AclSet::decode(&text).map_err(what)
}

/// Stores `acls` in `data_dir` durably (temp file, sync, rename, directory sync).
pub async fn save<B: Backend>(backend: &B, data_dir: &Path, acls: &AclSet) -> std::io::Result<()> {
    let path = data_dir.join(ACL_FILE);
    write_atomically(backend, data_dir, &path, acls.encode().into_bytes()).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use minikafka_core::auth::acl::{Operation, PatternType, Permission, ResourceType};

    fn binding(name: &str, principal: &str) -> AclBinding {
        AclBinding {
            resource_type: ResourceType::Topic,
            pattern_type: PatternType::Prefixed,
            resource_name: name.into(),
            principal: principal.into(),
            host: "*".into(),
            operation: Operation::Write,
            permission: Permission::Deny,
        }
    }

    #[test]
    fn the_stored_form_reads_back_whatever_the_names_hold() {
        let set = AclSet::new(vec![
            binding("a b\nc", "User:x y"),
            binding("é", "User:ü"),
            binding("é", "User:ü"),
        ]);
        assert_eq!(set.bindings().len(), 2, "duplicates dropped");
        assert_eq!(AclSet::decode(&set.encode()), Ok(set));
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_the_line() {
        let good = AclSet::new(vec![binding("t", "User:a")]).encode();
        assert!(AclSet::decode("").is_err());
        let short = format!("{good}2 3 4\n");
        assert!(AclSet::decode(&short)
            .expect_err("short line")
            .starts_with("line 3"));
        let bad_code = good.replacen("\n2 4 4 2", "\n9 4 4 2", 1);
        assert!(AclSet::decode(&bad_code)
            .expect_err("bad code")
            .contains("resource type"));
    }

    #[test]
    fn without_removes_what_a_filter_selects() {
        let set = AclSet::new(vec![binding("t", "User:a"), binding("t", "User:b")]);
        let mut filter = AclFilter::everything();
        filter.principal = Some("User:a".into());
        let left = set.without(&[filter]);
        assert_eq!(left.bindings(), &[binding("t", "User:b")]);
        assert_eq!(set.with(vec![binding("t", "User:a")]), set);
    }
}
