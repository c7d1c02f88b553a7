//! Publisher keys (Ed25519) and the operator's trusted keys.
//!
//! Key files are small JSON documents:
//!
//! - secret key (`orrery hub keygen --out KEYFILE`, mode 0600):
//!   `{"kind": "orrery-hub-secret-key", "key_id": "…", "secret_key": "<base64 32-byte seed>"}`
//! - public key (`KEYFILE.pub`, given to operators):
//!   `{"kind": "orrery-hub-public-key", "key_id": "…", "public_key": "<base64 32 bytes>", "comment": "…"}`
//!
//! The key id is the first 16 hex digits of the SHA-256 of the public key.
//! Trust is explicit: a satellite trusts exactly the public key files it is
//! given (`--trusted-key FILE`, repeatable), nothing else.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use ed25519_dalek::{SigningKey, VerifyingKey};
use serde::{Deserialize, Serialize};

use crate::{hex, write_atomic, HubError};

const SECRET_KIND: &str = "orrery-hub-secret-key";
const PUBLIC_KIND: &str = "orrery-hub-public-key";

/// The key id of a public key.
pub fn key_id_of(key: &VerifyingKey) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(key.as_bytes()))[..16].to_owned()
}

pub(crate) fn parse_public_key(b64: &str) -> Result<VerifyingKey, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.trim())
        .map_err(|e| e.to_string())?;
    let bytes: [u8; 32] = bytes
        .try_into()
        .map_err(|_| "a public key is 32 bytes".to_owned())?;
    VerifyingKey::from_bytes(&bytes).map_err(|e| e.to_string())
}

#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct SecretFile {
    kind: String,
    key_id: String,
    secret_key: String,
}

#[derive(Serialize, Deserialize, Default)]
#[serde(default)]
struct PublicFile {
    kind: String,
    key_id: String,
    public_key: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    comment: String,
}

/// A publisher's signing key.
pub struct PublisherKey {
    key: SigningKey,
}

impl std::fmt::Debug for PublisherKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PublisherKey")
            .field("key_id", &self.key_id())
            .finish_non_exhaustive()
    }
}

impl PublisherKey {
    /// A new random key (from the operating system's generator).
    pub fn generate() -> Result<PublisherKey, HubError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| HubError::invalid("random key", e))?;
        Ok(PublisherKey {
            key: SigningKey::from_bytes(&seed),
        })
    }

    /// Reads a secret key file.
    pub fn load(path: &Path) -> Result<PublisherKey, HubError> {
        let text = std::fs::read_to_string(path).map_err(HubError::io(path))?;
        let what = || format!("secret key file {}", path.display());
        let file: SecretFile =
            serde_json::from_str(&text).map_err(|e| HubError::invalid(what(), e))?;
        if file.kind != SECRET_KIND {
            return Err(HubError::invalid(
                what(),
                format!("kind is `{}`, expected `{SECRET_KIND}`", file.kind),
            ));
        }
        let seed = base64::engine::general_purpose::STANDARD
            .decode(file.secret_key.trim())
            .map_err(|e| HubError::invalid(what(), e))?;
        let seed: [u8; 32] = seed
            .try_into()
            .map_err(|_| HubError::invalid(what(), "a secret key is 32 bytes"))?;
        let key = PublisherKey {
            key: SigningKey::from_bytes(&seed),
        };
        if !file.key_id.is_empty() && file.key_id != key.key_id() {
            return Err(HubError::invalid(
                what(),
                "key_id does not match the key (the file was edited)",
            ));
        }
        Ok(key)
    }

    /// Writes the secret key to `path` (mode 0600, refusing to overwrite)
    /// and the public key to `path.pub`. Returns the public key's path.
    pub fn write(&self, path: &Path, comment: &str) -> Result<PathBuf, HubError> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let secret = SecretFile {
            kind: SECRET_KIND.into(),
            key_id: self.key_id(),
            secret_key: base64::engine::general_purpose::STANDARD.encode(self.key.to_bytes()),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&secret).map_err(|e| HubError::invalid("key", e))?;
        bytes.push(b'\n');
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(HubError::io(path))?;
        file.write_all(&bytes).map_err(HubError::io(path))?;
        let public_path = public_path(path);
        let public = PublicFile {
            kind: PUBLIC_KIND.into(),
            key_id: self.key_id(),
            public_key: self.public_key_base64(),
            comment: comment.to_owned(),
        };
        let mut bytes =
            serde_json::to_vec_pretty(&public).map_err(|e| HubError::invalid("key", e))?;
        bytes.push(b'\n');
        write_atomic(&public_path, &bytes)?;
        Ok(public_path)
    }

    /// The key id.
    pub fn key_id(&self) -> String {
        key_id_of(&self.key.verifying_key())
    }

    /// The public key.
    pub fn verifying_key(&self) -> VerifyingKey {
        self.key.verifying_key()
    }

    /// The public key, base64.
    pub fn public_key_base64(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.key.verifying_key().as_bytes())
    }

    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.key
    }
}

/// Where the public key of secret key file `path` is written: `path.pub`.
pub fn public_path(path: &Path) -> PathBuf {
    let mut name = path.as_os_str().to_owned();
    name.push(".pub");
    PathBuf::from(name)
}

/// The public keys an operator trusts, by key id.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    keys: BTreeMap<String, VerifyingKey>,
}

impl TrustedKeys {
    /// Trusts exactly `keys`.
    pub fn from_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> TrustedKeys {
        TrustedKeys {
            keys: keys.into_iter().map(|k| (key_id_of(&k), k)).collect(),
        }
    }

    /// Reads public key files.
    pub fn load(paths: &[PathBuf]) -> Result<TrustedKeys, HubError> {
        let mut keys = Vec::new();
        for path in paths {
            keys.push(load_public(path)?);
        }
        Ok(TrustedKeys::from_keys(keys))
    }

    /// Adds a key.
    pub fn insert(&mut self, key: VerifyingKey) {
        self.keys.insert(key_id_of(&key), key);
    }

    /// The key of id `key_id`, if trusted.
    pub fn get(&self, key_id: &str) -> Option<&VerifyingKey> {
        self.keys.get(key_id)
    }

    /// Whether no key is trusted.
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// The trusted ids, comma-separated, or `none`.
    pub fn ids(&self) -> String {
        if self.keys.is_empty() {
            "none".into()
        } else {
            self.keys.keys().cloned().collect::<Vec<_>>().join(", ")
        }
    }
}

/// Reads a public key file.
pub fn load_public(path: &Path) -> Result<VerifyingKey, HubError> {
    let text = std::fs::read_to_string(path).map_err(HubError::io(path))?;
    let what = || format!("public key file {}", path.display());
    let file: PublicFile = serde_json::from_str(&text).map_err(|e| HubError::invalid(what(), e))?;
    if file.kind != PUBLIC_KIND {
        return Err(HubError::invalid(
            what(),
            format!(
                "kind is `{}`, expected `{PUBLIC_KIND}` (is this the secret key?)",
                file.kind
            ),
        ));
    }
    let key = parse_public_key(&file.public_key).map_err(|e| HubError::invalid(what(), e))?;
    if !file.key_id.is_empty() && file.key_id != key_id_of(&key) {
        return Err(HubError::invalid(
            what(),
            "key_id does not match the key (the file was edited)",
        ));
    }
    Ok(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keygen_writes_a_pair_that_loads_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("publisher.key");
        let key = PublisherKey::generate().unwrap();
        let public = key.write(&path, "test").unwrap();
        assert_eq!(public, dir.path().join("publisher.key.pub"));
        let loaded = PublisherKey::load(&path).unwrap();
        assert_eq!(loaded.key_id(), key.key_id());
        let trusted = TrustedKeys::load(&[public]).unwrap();
        assert!(trusted.get(&key.key_id()).is_some());
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        // Never overwrites a key.
        assert!(key.write(&path, "again").is_err());
        // A secret key is not a trusted key.
        assert!(matches!(load_public(&path), Err(HubError::Invalid { .. })));
    }
}
