//! Keyed hashes of secret values: enough to tell that a write-only or
//! opaque input changed, useless to recover it.

use hmac::{Hmac, Mac};
use orrery_schema::Value;
use sha2::Sha256;

use crate::stack::{Catalog, Stack};

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

/// Whether `stack` gives a value to a write-only or opaque field (or to a
/// field of a type the catalog does not know): then its document holds
/// secrets and must not be stored, since secrets are never stored in clear.
pub fn declares_secrets(stack: &Stack, catalog: &Catalog) -> bool {
    stack.resources.iter().any(|r| {
        let schema = stack
            .targets
            .iter()
            .find(|t| t.name == r.target)
            .and_then(|t| catalog.schema(&t.plugin, &r.resource_type));
        match schema {
            Some(schema) => r
                .properties
                .keys()
                .any(|k| schema.field(k).is_none_or(|f| f.hints.is_secret())),
            None => !r.properties.is_empty(),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use orrery_plugin_sdk::{field, resource};
    use orrery_schema::Announcement;

    fn stack(fields: &str) -> Stack {
        let doc = format!(
            "stack: s\ntargets:\n  - name: t\n    plugin: p\nresources:\n  - label: a\n    type: T\n    target: t\n    properties: {{ {fields} }}\n"
        );
        crate::stack::parse("s.yaml", &doc, "/").unwrap()
    }

    #[test]
    fn a_document_declaring_a_write_only_or_opaque_value_holds_secrets() {
        let mut catalog = Catalog::new();
        catalog.insert(Announcement {
            name: "p".into(),
            resources: vec![resource("T")
                .field(field::string("path").required())
                .field(field::string("password").write_only())
                .field(field::string("token").opaque())
                .build()],
            ..Default::default()
        });
        assert!(!declares_secrets(&stack("path: x"), &catalog));
        assert!(declares_secrets(
            &stack("path: x, password: hunter2"),
            &catalog
        ));
        assert!(declares_secrets(&stack("path: x, token: t"), &catalog));
        assert!(
            declares_secrets(&stack("path: x"), &Catalog::new()),
            "an unknown type may have secrets"
        );
    }
}
