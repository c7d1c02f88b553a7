//! The package manifest, its canonical encoding and its signature.
//!
//! A manifest is a JSON document (`manifest.json` in a package, the value of
//! an index entry on the hub). What is signed is its **canonical encoding**:
//! the bytes `orrery-hub-manifest-v1\n` followed by the manifest as JSON
//! with the `signature` member removed, object members sorted by key
//! (byte order), no insignificant whitespace, strings escaped as
//! `serde_json` escapes them, integers in decimal. Verification
//! canonicalises the manifest *as stored*, unknown members included, so a
//! manifest written by a newer publisher (with fields this build does not
//! know) still verifies, and no member can be added or changed unnoticed.
//!
//! Manifests are hub documents, not bus messages: they never travel on the
//! operation path, which is why they are JSON (readable, diffable, signable
//! byte-for-byte) rather than MessagePack envelopes.

use std::collections::BTreeMap;

use base64::Engine;
use ed25519_dalek::{Signature, Signer, Verifier};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::keys::{PublisherKey, TrustedKeys};
use crate::{sha256_hex, HubError};

/// The manifest format this build writes.
pub const MANIFEST_FORMAT: u32 = 1;

/// The domain-separation prefix of the signed bytes.
pub const SIGNING_CONTEXT: &[u8] = b"orrery-hub-manifest-v1\n";

/// One file of a package: a platform's binary, or the schema.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Artifact {
    /// Its path inside the package directory.
    pub file: String,
    /// Its size in bytes.
    pub size: u64,
    /// Its SHA-256, lower-case hex. Also its name in the hub's storage.
    pub sha256: String,
}

/// Who signed the package.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Publisher {
    /// The key id (first 16 hex digits of the SHA-256 of the public key).
    pub key_id: String,
    /// The public key, base64. Informational: installs verify with the
    /// operator's trusted key of this id, never with this copy.
    pub public_key: String,
}

/// A plugin package's manifest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Manifest {
    /// The manifest format ([`MANIFEST_FORMAT`]).
    pub format: u32,
    /// The plugin's name, e.g. `local`.
    pub name: String,
    /// Its semver version.
    pub version: String,
    /// The version the binary announces. Equal to `version` unless the
    /// package was built with a version override (re-packaging, tests).
    pub announced_version: String,
    /// The namespace of its resource types, e.g. `Local`.
    pub namespace: String,
    /// The plugin protocol major it speaks.
    pub protocol: u16,
    /// The oldest Orrery release that can run it (semver).
    pub min_orrery: String,
    /// SPDX license expression.
    pub license: String,
    /// One line about the plugin.
    pub summary: String,
    /// The resource types it manages, as announced.
    pub resource_types: Vec<String>,
    /// The capabilities it announced.
    pub capabilities: Vec<String>,
    /// The SDK that built it, as announced.
    pub sdk: String,
    /// The announcement (MessagePack, `orrery_schema::encode`): the full
    /// schemas of its resource types.
    pub schema: Option<Artifact>,
    /// One binary per platform (`linux-x86_64`, …).
    pub artifacts: BTreeMap<String, Artifact>,
    /// Who signed it.
    pub publisher: Publisher,
    /// Ed25519 signature over the canonical encoding, base64. Empty when
    /// unsigned.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub signature: String,
}

impl Manifest {
    /// `name@version`.
    pub fn label(&self) -> String {
        format!("{}@{}", self.name, self.version)
    }

    /// The parsed version.
    pub fn semver(&self) -> Result<semver::Version, HubError> {
        semver::Version::parse(&self.version).map_err(|e| {
            HubError::invalid(format!("version `{}` of {}", self.version, self.name), e)
        })
    }

    /// Signs with `key`: sets the publisher and the signature.
    pub fn sign(&mut self, key: &PublisherKey) -> Result<(), HubError> {
        self.publisher = Publisher {
            key_id: key.key_id(),
            public_key: key.public_key_base64(),
        };
        self.signature.clear();
        let bytes = signing_bytes(&to_json(self)?)?;
        let signature = key.signing_key().sign(&bytes);
        self.signature = base64::engine::general_purpose::STANDARD.encode(signature.to_bytes());
        Ok(())
    }

    /// The manifest as pretty JSON (how packages store it).
    pub fn to_json_pretty(&self) -> Result<Vec<u8>, HubError> {
        serde_json::to_vec_pretty(self).map_err(|e| HubError::invalid("manifest", e))
    }
}

fn to_json(manifest: &Manifest) -> Result<Json, HubError> {
    serde_json::to_value(manifest).map_err(|e| HubError::invalid("manifest", e))
}

/// A manifest together with the JSON it was read from, which is what its
/// signature covers.
#[derive(Clone, Debug, PartialEq)]
pub struct SignedManifest {
    /// The fields this build knows.
    pub manifest: Manifest,
    raw: Json,
}

impl SignedManifest {
    /// Wraps a manifest built here.
    pub fn new(manifest: Manifest) -> Result<SignedManifest, HubError> {
        let raw = to_json(&manifest)?;
        Ok(SignedManifest { manifest, raw })
    }

    /// Reads a manifest from its JSON bytes.
    pub fn from_slice(bytes: &[u8]) -> Result<SignedManifest, HubError> {
        let raw: Json =
            serde_json::from_slice(bytes).map_err(|e| HubError::invalid("manifest", e))?;
        SignedManifest::from_json(raw)
    }

    /// Reads a manifest from a JSON value.
    pub fn from_json(raw: Json) -> Result<SignedManifest, HubError> {
        if !raw.is_object() {
            return Err(HubError::invalid("manifest", "not a JSON object"));
        }
        let manifest: Manifest =
            serde_json::from_value(raw.clone()).map_err(|e| HubError::invalid("manifest", e))?;
        if manifest.name.is_empty() || manifest.version.is_empty() {
            return Err(HubError::invalid(
                "manifest",
                "name and version are required",
            ));
        }
        Ok(SignedManifest { manifest, raw })
    }

    /// The JSON as stored.
    pub fn json(&self) -> &Json {
        &self.raw
    }

    /// SHA-256 of the canonical encoding without the signature: equal for
    /// two manifests exactly when their content is equal.
    pub fn content_digest(&self) -> Result<String, HubError> {
        Ok(sha256_hex(&signing_bytes(&self.raw)?))
    }

    /// Checks the signature against the operator's trusted keys: the key
    /// must be trusted, and trusted for this plugin's name.
    ///
    /// Refuses with [`HubError::Unsigned`], [`HubError::UntrustedKey`],
    /// [`HubError::KeyNotTrustedForPlugin`] or [`HubError::BadSignature`].
    pub fn verify(&self, trusted: &TrustedKeys) -> Result<(), HubError> {
        let m = &self.manifest;
        if m.signature.is_empty() {
            return Err(HubError::Unsigned {
                plugin: m.name.clone(),
                version: m.version.clone(),
            });
        }
        let Some(key) = trusted.get(&m.publisher.key_id) else {
            return Err(HubError::UntrustedKey {
                plugin: m.name.clone(),
                version: m.version.clone(),
                key_id: m.publisher.key_id.clone(),
                trusted: trusted.ids(),
            });
        };
        if !trusted.allows(&m.publisher.key_id, &m.name) {
            return Err(HubError::KeyNotTrustedForPlugin {
                plugin: m.name.clone(),
                version: m.version.clone(),
                key_id: m.publisher.key_id.clone(),
                allowed: trusted
                    .plugins_of(&m.publisher.key_id)
                    .unwrap_or_default()
                    .join(", "),
            });
        }
        self.verify_with(key)
    }

    /// Checks the signature with the public key the manifest carries (what
    /// `publish` does to refuse a package damaged on its way to the hub;
    /// installs use [`SignedManifest::verify`]).
    pub fn verify_self_consistent(&self) -> Result<(), HubError> {
        let m = &self.manifest;
        if m.signature.is_empty() {
            return Err(HubError::Unsigned {
                plugin: m.name.clone(),
                version: m.version.clone(),
            });
        }
        let key = crate::keys::parse_public_key(&m.publisher.public_key)
            .ok()
            .filter(|k| crate::keys::key_id_of(k) == m.publisher.key_id)
            .ok_or_else(|| self.bad_signature())?;
        self.verify_with(&key)
    }

    fn verify_with(&self, key: &ed25519_dalek::VerifyingKey) -> Result<(), HubError> {
        let signature = base64::engine::general_purpose::STANDARD
            .decode(&self.manifest.signature)
            .ok()
            .and_then(|b| Signature::from_slice(&b).ok())
            .ok_or_else(|| self.bad_signature())?;
        let bytes = signing_bytes(&self.raw)?;
        key.verify(&bytes, &signature)
            .map_err(|_| self.bad_signature())
    }

    fn bad_signature(&self) -> HubError {
        HubError::BadSignature {
            plugin: self.manifest.name.clone(),
            version: self.manifest.version.clone(),
            key_id: self.manifest.publisher.key_id.clone(),
        }
    }
}

/// The bytes a signature covers: [`SIGNING_CONTEXT`] then the canonical JSON
/// of `manifest` without its `signature` member.
pub fn signing_bytes(manifest: &Json) -> Result<Vec<u8>, HubError> {
    let mut unsigned = manifest.clone();
    if let Some(object) = unsigned.as_object_mut() {
        object.remove("signature");
    }
    let mut out = SIGNING_CONTEXT.to_vec();
    canonical_json(&unsigned, &mut out)?;
    Ok(out)
}

/// Canonical JSON: members sorted by key, no whitespace. Floating-point
/// numbers are refused (a manifest has none), so every number has exactly
/// one spelling.
pub fn canonical_json(value: &Json, out: &mut Vec<u8>) -> Result<(), HubError> {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Number(n) => {
            if n.is_f64() {
                return Err(HubError::invalid(
                    "manifest",
                    "floating-point numbers cannot be signed canonically",
                ));
            }
            out.extend_from_slice(n.to_string().as_bytes());
        }
        Json::String(s) => {
            let quoted = serde_json::to_string(s).map_err(|e| HubError::invalid("manifest", e))?;
            out.extend_from_slice(quoted.as_bytes());
        }
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical_json(item, out)?;
            }
            out.push(b']');
        }
        Json::Object(members) => {
            let mut keys: Vec<&String> = members.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let quoted =
                    serde_json::to_string(key).map_err(|e| HubError::invalid("manifest", e))?;
                out.extend_from_slice(quoted.as_bytes());
                out.push(b':');
                canonical_json(&members[key], out)?;
            }
            out.push(b'}');
        }
    }
    Ok(())
}

/// Whether `name` is a valid plugin name: lower-case ASCII letters, digits,
/// `-` and `_`, starting with a letter or digit, at most 64 characters (it
/// becomes a NATS subject token, a KV key part and a file name).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'_')
        && !name.starts_with(['-', '_'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        Manifest {
            format: MANIFEST_FORMAT,
            name: "local".into(),
            version: "1.0.0".into(),
            protocol: 1,
            artifacts: BTreeMap::from([(
                "linux-x86_64".into(),
                Artifact {
                    file: "linux-x86_64/orrery-plugin-local".into(),
                    size: 3,
                    sha256: "ab".repeat(32),
                },
            )]),
            ..Manifest::default()
        }
    }

    #[test]
    fn canonical_json_sorts_members_and_drops_whitespace() {
        let v: Json =
            serde_json::from_str(r#"{ "b": [1, {"z": null, "a": "x\"y"}], "a": true }"#).unwrap();
        let mut out = Vec::new();
        canonical_json(&v, &mut out).unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            r#"{"a":true,"b":[1,{"a":"x\"y","z":null}]}"#
        );
    }

    #[test]
    fn signed_manifest_verifies_and_any_change_breaks_it() {
        let key = PublisherKey::generate().unwrap();
        let mut m = manifest();
        m.sign(&key).unwrap();
        let trusted = TrustedKeys::from_keys([key.verifying_key()]);
        let bytes = m.to_json_pretty().unwrap();
        let signed = SignedManifest::from_slice(&bytes).unwrap();
        signed.verify(&trusted).unwrap();
        signed.verify_self_consistent().unwrap();

        // A changed known field.
        let mut json = signed.json().clone();
        json["protocol"] = 2.into();
        let e = SignedManifest::from_json(json).unwrap().verify(&trusted);
        assert!(matches!(e, Err(HubError::BadSignature { .. })), "{e:?}");

        // An added unknown field is covered too.
        let mut json = signed.json().clone();
        json["future"] = "x".into();
        let e = SignedManifest::from_json(json).unwrap().verify(&trusted);
        assert!(matches!(e, Err(HubError::BadSignature { .. })), "{e:?}");
    }

    #[test]
    fn unknown_members_written_by_a_newer_publisher_still_verify() {
        let key = PublisherKey::generate().unwrap();
        let mut json = serde_json::to_value(manifest()).unwrap();
        json["added_in_a_later_release"] = serde_json::json!({"k": [1, 2]});
        let signature = key.signing_key().sign(&signing_bytes(&json).unwrap());
        json["publisher"] = serde_json::json!({
            "key_id": key.key_id(), "public_key": key.public_key_base64()
        });
        // The publisher member is signed as well; re-sign with it present.
        let signature2 = key.signing_key().sign(&signing_bytes(&json).unwrap());
        assert_ne!(signature, signature2);
        json["signature"] = base64::engine::general_purpose::STANDARD
            .encode(signature2.to_bytes())
            .into();
        let signed = SignedManifest::from_json(json).unwrap();
        signed
            .verify(&TrustedKeys::from_keys([key.verifying_key()]))
            .unwrap();
    }

    #[test]
    fn unsigned_and_untrusted_are_told_apart() {
        let key = PublisherKey::generate().unwrap();
        let other = PublisherKey::generate().unwrap();
        let unsigned = SignedManifest::new(manifest()).unwrap();
        let trusted = TrustedKeys::from_keys([key.verifying_key()]);
        assert!(matches!(
            unsigned.verify(&trusted),
            Err(HubError::Unsigned { .. })
        ));
        let mut m = manifest();
        m.sign(&other).unwrap();
        let signed = SignedManifest::new(m).unwrap();
        assert!(matches!(
            signed.verify(&trusted),
            Err(HubError::UntrustedKey { .. })
        ));
    }

    #[test]
    fn names() {
        assert!(valid_name("local"));
        assert!(valid_name("aws-s3_2"));
        assert!(!valid_name("Local"));
        assert!(!valid_name("a.b"));
        assert!(!valid_name("-a"));
        assert!(!valid_name(""));
    }
}
