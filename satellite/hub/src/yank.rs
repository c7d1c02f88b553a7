//! Signed yank statements.
//!
//! Yanking a version ("new installs skip it") is a statement by a publisher,
//! so it is signed like a manifest: Ed25519 over
//!
//! ```text
//! orrery-hub-yank-v1\n<canonical JSON of the statement without "signature">
//! ```
//!
//! (the same canonical JSON as manifests, another prefix, so a manifest
//! signature can never pass for a yank or the other way round). A statement
//! names the plugin and version it is about, whether it yanks or un-yanks,
//! and a `sequence`:
//!
//! ```json
//! {"name": "local", "version": "1.1.0", "yanked": true, "reason": "corrupts symlinks",
//!  "sequence": 1, "issued_ms": 1764612345678,
//!  "publisher": {"key_id": "…", "public_key": "…"}, "signature": "…"}
//! ```
//!
//! An index entry keeps every statement made about its version. A version's
//! yank state, for an installer, is that of its **newest valid** statement:
//! valid means signed by a key the operator trusts *for that plugin*, about
//! exactly this name and version; newest means the highest `sequence`, a
//! yank winning a tie. No valid statement: not yanked. So:
//!
//! - a yank can be undone only by a valid un-yank statement with a higher
//!   sequence, i.e. by a trusted publisher, never by editing the index;
//! - an edited, forged or untrusted statement is ignored: it neither yanks
//!   nor un-yanks;
//! - index entries written before yanks were signed still read; their
//!   unsigned `yanked` flag is ignored (and reported), so such a version
//!   counts as not yanked until a publisher yanks it with a signature.

use base64::Engine;
use ed25519_dalek::{Signature, Signer, Verifier};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::keys::{key_id_of, parse_public_key, PublisherKey, TrustedKeys};
use crate::manifest::{canonical_json, Publisher};
use crate::HubError;

/// The domain-separation prefix of the signed bytes of a yank statement.
pub const YANK_SIGNING_CONTEXT: &[u8] = b"orrery-hub-yank-v1\n";

/// What a yank statement says.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct YankStatement {
    /// The plugin.
    pub name: String,
    /// The version.
    pub version: String,
    /// `true` yanks, `false` un-yanks.
    pub yanked: bool,
    /// Why.
    pub reason: String,
    /// Orders the statements about one version: the highest valid one
    /// decides.
    pub sequence: u64,
    /// When it was signed (ms since the Unix epoch; informational).
    pub issued_ms: u64,
    /// Who signed it.
    pub publisher: Publisher,
    /// Ed25519 signature over the canonical encoding, base64.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

/// A yank statement together with the JSON it was read from, which is what
/// its signature covers.
#[derive(Clone, Debug, PartialEq)]
pub struct SignedYank {
    /// The fields this build knows.
    pub statement: YankStatement,
    raw: Json,
}

impl SignedYank {
    /// Makes and signs a statement.
    pub fn sign(mut statement: YankStatement, key: &PublisherKey) -> Result<SignedYank, HubError> {
        statement.publisher = Publisher {
            key_id: key.key_id(),
            public_key: key.public_key_base64(),
        };
        statement.signature.clear();
        let raw = serde_json::to_value(&statement).map_err(|e| HubError::invalid("yank", e))?;
        let signature = key.signing_key().sign(&yank_signing_bytes(&raw)?);
        statement.signature =
            base64::engine::general_purpose::STANDARD.encode(signature.to_bytes());
        let raw = serde_json::to_value(&statement).map_err(|e| HubError::invalid("yank", e))?;
        Ok(SignedYank { statement, raw })
    }

    /// Reads a statement from a JSON value.
    pub fn from_json(raw: Json) -> Result<SignedYank, HubError> {
        if !raw.is_object() {
            return Err(HubError::invalid("yank statement", "not a JSON object"));
        }
        let statement: YankStatement = serde_json::from_value(raw.clone())
            .map_err(|e| HubError::invalid("yank statement", e))?;
        Ok(SignedYank { statement, raw })
    }

    /// The JSON as stored.
    pub fn json(&self) -> &Json {
        &self.raw
    }

    /// Checks that the statement is about `name@version` and signed by a
    /// key trusted for `name`. Every failure is an error naming why.
    pub fn verify(&self, trusted: &TrustedKeys, name: &str, version: &str) -> Result<(), HubError> {
        let s = &self.statement;
        if s.name != name || s.version != version {
            return Err(HubError::invalid(
                format!("yank statement of {name}@{version}"),
                format!("it is about {}@{}", s.name, s.version),
            ));
        }
        if s.signature.is_empty() {
            return Err(HubError::invalid(
                format!("yank statement of {name}@{version}"),
                "it is unsigned",
            ));
        }
        let Some(key) = trusted.get(&s.publisher.key_id) else {
            return Err(HubError::invalid(
                format!("yank statement of {name}@{version}"),
                format!(
                    "it is signed by key {}, which is not trusted",
                    s.publisher.key_id
                ),
            ));
        };
        if !trusted.allows(&s.publisher.key_id, name) {
            return Err(HubError::invalid(
                format!("yank statement of {name}@{version}"),
                format!(
                    "it is signed by key {}, which is not trusted for `{name}`",
                    s.publisher.key_id
                ),
            ));
        }
        self.verify_with(key)
    }

    /// Checks the signature with the key the statement carries (for
    /// display where no trusted keys are configured: `orrery hub info`).
    pub fn verify_self_consistent(&self) -> Result<(), HubError> {
        let s = &self.statement;
        let key = parse_public_key(&s.publisher.public_key)
            .ok()
            .filter(|k| key_id_of(k) == s.publisher.key_id)
            .ok_or_else(|| self.bad_signature())?;
        self.verify_with(&key)
    }

    fn verify_with(&self, key: &ed25519_dalek::VerifyingKey) -> Result<(), HubError> {
        let signature = base64::engine::general_purpose::STANDARD
            .decode(&self.statement.signature)
            .ok()
            .and_then(|b| Signature::from_slice(&b).ok())
            .ok_or_else(|| self.bad_signature())?;
        key.verify(&yank_signing_bytes(&self.raw)?, &signature)
            .map_err(|_| self.bad_signature())
    }

    fn bad_signature(&self) -> HubError {
        HubError::invalid(
            format!(
                "yank statement of {}@{}",
                self.statement.name, self.statement.version
            ),
            format!(
                "its signature does not verify with key {}",
                self.statement.publisher.key_id
            ),
        )
    }
}

/// The bytes a yank signature covers.
pub fn yank_signing_bytes(statement: &Json) -> Result<Vec<u8>, HubError> {
    let mut unsigned = statement.clone();
    if let Some(object) = unsigned.as_object_mut() {
        object.remove("signature");
    }
    let mut out = YANK_SIGNING_CONTEXT.to_vec();
    canonical_json(&unsigned, &mut out)?;
    Ok(out)
}

/// The statement that decides among `statements` those `accept` admits:
/// the highest sequence, a yank winning a tie. `None`: not yanked.
pub fn deciding(
    statements: &[SignedYank],
    mut accept: impl FnMut(&SignedYank) -> bool,
) -> Option<&SignedYank> {
    statements
        .iter()
        .filter(|s| accept(s))
        .max_by_key(|s| (s.statement.sequence, s.statement.yanked))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn statement(yanked: bool, sequence: u64) -> YankStatement {
        YankStatement {
            name: "local".into(),
            version: "1.1.0".into(),
            yanked,
            reason: "r".into(),
            sequence,
            ..YankStatement::default()
        }
    }

    #[test]
    fn the_newest_valid_statement_decides_and_nothing_else_counts() {
        let key = PublisherKey::generate().unwrap();
        let stranger = PublisherKey::generate().unwrap();
        let trusted = TrustedKeys::from_keys([key.verifying_key()]);
        let yank = SignedYank::sign(statement(true, 1), &key).unwrap();
        let unyank = SignedYank::sign(statement(false, 2), &key).unwrap();
        let forged = SignedYank::sign(statement(true, 3), &stranger).unwrap();
        let mut edited = yank.clone();
        edited.raw["yanked"] = false.into();
        edited.raw["sequence"] = 9.into();
        let edited = SignedYank::from_json(edited.raw).unwrap();
        assert!(edited.verify(&trusted, "local", "1.1.0").is_err());
        assert!(forged.verify(&trusted, "local", "1.1.0").is_err());
        assert!(
            yank.verify(&trusted, "local", "1.2.0").is_err(),
            "another version"
        );
        let valid = |s: &SignedYank| s.verify(&trusted, "local", "1.1.0").is_ok();

        let all = [yank.clone(), edited.clone(), forged.clone()];
        assert!(deciding(&all, valid).unwrap().statement.yanked);
        let all = [yank.clone(), unyank.clone(), forged];
        assert!(!deciding(&all, valid).unwrap().statement.yanked);
        assert!(deciding(&[edited], valid).is_none());
        // A tie: the yank wins.
        let tie = SignedYank::sign(statement(false, 1), &key).unwrap();
        assert!(deciding(&[tie, yank], valid).unwrap().statement.yanked);

        // Bound to other plugin names, the key's statements do not count.
        let mut acme_only = TrustedKeys::default();
        acme_only
            .insert_for(key.verifying_key(), vec!["acme-*".into()])
            .unwrap();
        assert!(unyank.verify(&acme_only, "local", "1.1.0").is_err());
    }
}
