//! Keyed hashes of secret values: enough to tell that a write-only or
//! opaque input changed, useless to recover it.

use hmac::{Hmac, Mac};
use orrery_schema::Value;
use sha2::Sha256;

/// HMAC-SHA256 under a key kept in the state store.
#[derive(Clone)]
pub struct SecretHasher {
    key: Vec<u8>,
}

impl std::fmt::Debug for SecretHasher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretHasher(..)")
    }
}

impl SecretHasher {
    /// A hasher under `key`.
    pub fn new(key: Vec<u8>) -> Self {
        SecretHasher { key }
    }

    /// The hash of `field`'s value, as hex.
    pub fn hash(&self, field: &str, value: &Value) -> String {
        let mut mac = match Hmac::<Sha256>::new_from_slice(&self.key) {
            Ok(mac) => mac,
            // HMAC accepts keys of any length; this arm cannot be taken.
            Err(_) => return String::new(),
        };
        mac.update(field.as_bytes());
        mac.update(&[0]);
        mac.update(&orrery_schema::encode(value).unwrap_or_default());
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}
