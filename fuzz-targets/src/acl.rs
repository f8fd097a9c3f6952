//! The stored ACL file (`<data>/acls.v1`), read back at startup.

use minikafka_broker::server::acl_store::AclSet;

/// `acl_store`: the ACL file's text. Decoded ⇒ every ACL passed CreateAcls' checks, and the
/// set re-encodes to text that decodes to the same set (I49). Never a panic.
pub fn acl_store(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(set) = AclSet::decode(text) {
        let again = AclSet::decode(&set.encode()).expect("an encoded set decodes");
        assert_eq!(again, set, "the set round-trips");
    }
}
