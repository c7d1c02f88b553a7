//! Key-only views of resource records: what discovery needs to know about
//! a store without loading whole records (their memory would grow with the
//! store).

use orrery_schema::PropertyMap;
use sha2::{Digest, Sha256};

/// A managed resource, by key: the stack managing it and the plugin's id.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ManagedKey {
    /// The stack that manages it.
    pub stack: String,
    /// The plugin's identifier.
    pub native_id: String,
}

/// A discovered (unmanaged) resource, by key: its label and a fingerprint
/// of its recorded properties.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct DiscoveredKey {
    /// Its label (`<target>/<type>/<native id>`).
    pub label: String,
    /// [`fingerprint_bytes`] of its recorded properties.
    pub fingerprint: u128,
}

/// The fingerprint of stored properties: the first 16 bytes of the SHA-256
/// of their MessagePack encoding (what both stores keep), so a store can
/// compute it from the stored bytes (PostgreSQL does, in the database).
pub fn fingerprint_bytes(encoded: &[u8]) -> u128 {
    fingerprint_of_digest(&Sha256::digest(encoded))
}

/// The fingerprint given a SHA-256 digest (or its first 16 bytes).
pub fn fingerprint_of_digest(digest: &[u8]) -> u128 {
    let mut first = [0u8; 16];
    let n = digest.len().min(16);
    first[..n].copy_from_slice(&digest[..n]);
    u128::from_be_bytes(first)
}

/// The fingerprint of properties as a store would record them.
pub fn fingerprint(properties: &PropertyMap) -> u128 {
    fingerprint_bytes(&orrery_schema::encode(properties).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_schema::Value;

    #[test]
    fn fingerprints_tell_properties_apart_and_match_their_encoding() {
        let a: PropertyMap = [("path".to_owned(), Value::from("a"))].into();
        let b: PropertyMap = [("path".to_owned(), Value::from("b"))].into();
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
        assert_ne!(fingerprint(&a), fingerprint(&b));
        let encoded = orrery_schema::encode(&a).unwrap();
        assert_eq!(fingerprint(&a), fingerprint_bytes(&encoded));
        let digest = Sha256::digest(&encoded);
        assert_eq!(fingerprint_of_digest(&digest[..16]), fingerprint(&a));
    }
}
