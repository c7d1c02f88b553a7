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
//! given (`--trusted-key FILE=PLUGIN,…`, repeatable), nothing else, and each
//! key only for the plugin names it is bound to ([`TrustedKeySpec`]).

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

/// The plugin names a key may sign, as patterns: a name (`local`), or a
/// pattern where `*` stands for any run of characters (`acme-*`, `*`).
fn valid_pattern(pattern: &str) -> bool {
    !pattern.is_empty()
        && pattern.len() <= 64
        && pattern.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'*')
        })
}

/// Whether `name` matches `pattern` (`*` matches any run of characters,
/// the empty one included; everything else matches itself: `valid_pattern`
/// admits no `?`).
pub fn pattern_matches(pattern: &str, name: &str) -> bool {
    wildmatch::WildMatch::new(pattern).matches(name)
}

/// One trusted key as configured: a public key file, optionally bound to
/// the plugin names it may sign.
///
/// In the satellite's TOML configuration either form may appear in
/// `trusted_keys`:
///
/// ```toml
/// trusted_keys = [
///     { key = "/etc/orrery/keys/acme.pub", plugins = ["local", "acme-*"] },
///     "/etc/orrery/keys/legacy.pub",   # the old form: any plugin name (warned)
/// ]
/// ```
///
/// On the command line: `--trusted-key FILE=local,acme-*` or the old
/// `--trusted-key FILE`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum TrustedKeySpec {
    /// A key file trusted only for plugins whose names match `plugins`.
    Bound {
        /// The public key file.
        key: PathBuf,
        /// Name patterns (`local`, `acme-*`; `*` is every name).
        plugins: Vec<String>,
    },
    /// The old form: a key file trusted for every plugin name.
    File(PathBuf),
}

impl std::str::FromStr for TrustedKeySpec {
    type Err = HubError;

    /// `FILE` or `FILE=PATTERN,PATTERN…`. The text after the last `=` is
    /// read as patterns only when every comma-separated part is a valid
    /// pattern; otherwise the whole text is a file name.
    fn from_str(s: &str) -> Result<TrustedKeySpec, HubError> {
        if let Some((file, patterns)) = s.rsplit_once('=') {
            let plugins: Vec<String> = patterns.split(',').map(|p| p.trim().to_owned()).collect();
            if !file.is_empty() && plugins.iter().all(|p| valid_pattern(p)) {
                return Ok(TrustedKeySpec::Bound {
                    key: PathBuf::from(file),
                    plugins,
                });
            }
        }
        if s.is_empty() {
            return Err(HubError::invalid(
                "trusted key",
                "expected FILE or FILE=PLUGIN,…",
            ));
        }
        Ok(TrustedKeySpec::File(PathBuf::from(s)))
    }
}

impl std::fmt::Display for TrustedKeySpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TrustedKeySpec::Bound { key, plugins } => {
                write!(f, "{}={}", key.display(), plugins.join(","))
            }
            TrustedKeySpec::File(key) => write!(f, "{}", key.display()),
        }
    }
}

#[derive(Clone, Debug)]
struct Trust {
    key: VerifyingKey,
    plugins: Vec<String>,
}

/// The public keys an operator trusts, by key id, each with the plugin
/// names it may sign.
#[derive(Clone, Debug, Default)]
pub struct TrustedKeys {
    keys: BTreeMap<String, Trust>,
}

impl TrustedKeys {
    /// Trusts exactly `keys`, each for every plugin name.
    pub fn from_keys(keys: impl IntoIterator<Item = VerifyingKey>) -> TrustedKeys {
        let mut trusted = TrustedKeys::default();
        for key in keys {
            trusted.insert(key);
        }
        trusted
    }

    /// Reads public key files, each trusted for every plugin name (the old
    /// form; see [`TrustedKeys::load_specs`]).
    pub fn load(paths: &[PathBuf]) -> Result<TrustedKeys, HubError> {
        let specs: Vec<TrustedKeySpec> = paths.iter().cloned().map(TrustedKeySpec::File).collect();
        TrustedKeys::load_specs(&specs)
    }

    /// Reads the configured keys. A key given in the old form (a bare file)
    /// is trusted for every plugin name, with a warning.
    pub fn load_specs(specs: &[TrustedKeySpec]) -> Result<TrustedKeys, HubError> {
        let mut trusted = TrustedKeys::default();
        for spec in specs {
            match spec {
                TrustedKeySpec::Bound { key, plugins } => {
                    let public = load_public(key)?;
                    trusted.insert_for(public, plugins.clone()).map_err(|e| {
                        HubError::invalid(format!("trusted key {}", key.display()), e)
                    })?;
                }
                TrustedKeySpec::File(path) => {
                    let public = load_public(path)?;
                    tracing::warn!(key = %path.display(), key_id = %key_id_of(&public),
                        "trusted key is trusted for every plugin name; bind it to the plugins it may sign \
                         (trusted_keys = [{{ key = \"…\", plugins = [\"…\"] }}] or --trusted-key FILE=PLUGIN,…)");
                    trusted.insert(public);
                }
            }
        }
        Ok(trusted)
    }

    /// Adds a key, trusted for every plugin name.
    pub fn insert(&mut self, key: VerifyingKey) {
        self.keys.insert(
            key_id_of(&key),
            Trust {
                key,
                plugins: vec!["*".into()],
            },
        );
    }

    /// Adds a key trusted only for plugins whose names match `plugins`
    /// (`local`, `acme-*`). The same key given again gains the patterns.
    pub fn insert_for(&mut self, key: VerifyingKey, plugins: Vec<String>) -> Result<(), String> {
        if plugins.is_empty() {
            return Err("give at least one plugin name pattern".into());
        }
        if let Some(bad) = plugins.iter().find(|p| !valid_pattern(p)) {
            return Err(format!(
                "`{bad}` is not a plugin name pattern (lower-case letters, digits, `-`, `_`, `*`)"
            ));
        }
        let trust = self.keys.entry(key_id_of(&key)).or_insert(Trust {
            key,
            plugins: Vec::new(),
        });
        for p in plugins {
            if !trust.plugins.contains(&p) {
                trust.plugins.push(p);
            }
        }
        Ok(())
    }

    /// The key of id `key_id`, if trusted (for some plugin names).
    pub fn get(&self, key_id: &str) -> Option<&VerifyingKey> {
        self.keys.get(key_id).map(|t| &t.key)
    }

    /// The name patterns key `key_id` is trusted for.
    pub fn plugins_of(&self, key_id: &str) -> Option<&[String]> {
        self.keys.get(key_id).map(|t| t.plugins.as_slice())
    }

    /// Whether key `key_id` is trusted to sign plugin `name`.
    pub fn allows(&self, key_id: &str, name: &str) -> bool {
        self.keys
            .get(key_id)
            .is_some_and(|t| t.plugins.iter().any(|p| pattern_matches(p, name)))
    }

    /// Whether some key is trusted to sign plugin `name`: a primary
    /// trusting publishers for a plugin takes its schema only from a
    /// package such a key signed.
    pub fn covers(&self, name: &str) -> bool {
        self.keys
            .values()
            .any(|t| t.plugins.iter().any(|p| pattern_matches(p, name)))
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

    #[test]
    fn keys_are_bound_to_plugin_name_patterns() {
        for (pattern, name, matches) in [
            ("*", "local", true),
            ("local", "local", true),
            ("local", "local2", false),
            ("acme-*", "acme-dns", true),
            ("acme-*", "acme-", true),
            ("acme-*", "local", false),
            ("*-dns", "acme-dns", true),
            ("a*b*c", "axxbyyc", true),
            ("a*b*c", "axxbyy", false),
        ] {
            assert_eq!(
                pattern_matches(pattern, name),
                matches,
                "{pattern} ~ {name}"
            );
        }
        let key = PublisherKey::generate().unwrap();
        let mut trusted = TrustedKeys::default();
        trusted
            .insert_for(key.verifying_key(), vec!["acme-*".into()])
            .unwrap();
        assert!(trusted.allows(&key.key_id(), "acme-dns"));
        assert!(!trusted.allows(&key.key_id(), "local"));
        assert!(trusted
            .insert_for(key.verifying_key(), vec!["Local".into()])
            .is_err());
        assert!(trusted.insert_for(key.verifying_key(), vec![]).is_err());
        assert!(TrustedKeys::from_keys([key.verifying_key()]).allows(&key.key_id(), "local"));

        let spec: TrustedKeySpec = "/k/acme.pub=local,acme-*".parse().unwrap();
        assert_eq!(
            spec,
            TrustedKeySpec::Bound {
                key: "/k/acme.pub".into(),
                plugins: vec!["local".into(), "acme-*".into()]
            }
        );
        // The old form, and a file name with `=` in it, are plain files.
        let spec: TrustedKeySpec = "/k/acme.pub".parse().unwrap();
        assert_eq!(spec, TrustedKeySpec::File("/k/acme.pub".into()));
        let spec: TrustedKeySpec = "/k/a=b.pub".parse().unwrap();
        assert_eq!(spec, TrustedKeySpec::File("/k/a=b.pub".into()));
        // Both forms read from the configuration file.
        #[derive(Deserialize)]
        struct Config {
            trusted_keys: Vec<TrustedKeySpec>,
        }
        let config: Config = toml::from_str(
            r#"trusted_keys = [{ key = "/k/acme.pub", plugins = ["acme-*"] }, "/k/old.pub"]"#,
        )
        .unwrap();
        assert_eq!(
            config.trusted_keys,
            [
                TrustedKeySpec::Bound {
                    key: "/k/acme.pub".into(),
                    plugins: vec!["acme-*".into()]
                },
                TrustedKeySpec::File("/k/old.pub".into())
            ]
        );
    }
}
