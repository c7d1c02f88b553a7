//! The lock file: which exact plugin bytes a satellite (or a fleet) runs.
//!
//! TOML, one `[[plugin]]` table per plugin:
//!
//! ```toml
//! format = 1
//!
//! [[plugin]]
//! name = "local"
//! version = "1.1.0"
//! requirement = "^1.0"
//!
//! [plugin.sha256]
//! linux-x86_64 = "9f2c…"
//! ```
//!
//! `sha256` holds one digest per platform that installed the version, so a
//! lock shared by a mixed fleet pins every platform's bytes. A pinned
//! version is installed even when yanked; a digest that differs from the
//! hub's manifest is refused ([`crate::HubError::LockMismatch`]). A pin
//! never *moves* to a lower or a yanked version unless explicitly allowed
//! ([`check_move`], [`crate::HubError::Downgrade`]).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::{write_atomic, HubError};

/// The lock format this build writes.
pub const LOCK_FORMAT: u32 = 1;

/// One pinned plugin.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockEntry {
    /// The plugin.
    pub name: String,
    /// The exact version.
    pub version: String,
    /// The requirement it was resolved from (informational).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub requirement: String,
    /// SHA-256 of the binary, per platform.
    pub sha256: BTreeMap<String, String>,
}

/// Checks that pinning (or running) `to` in place of `from` is not a move
/// to a lower version, nor to a yanked one (`to_yanked`: its reason), unless
/// `allow_downgrade`. Allowed downgrades are logged at WARN and return
/// `Ok(true)`; refused ones are [`HubError::Downgrade`]; anything else is
/// `Ok(false)`. `from == None` (nothing pinned or running yet) and the
/// same version are never a downgrade.
pub fn check_move(
    plugin: &str,
    from: Option<&str>,
    to: &str,
    to_yanked: Option<&str>,
    allow_downgrade: bool,
) -> Result<bool, HubError> {
    let Some(from) = from.filter(|f| *f != to) else {
        return Ok(false);
    };
    let lower = match (semver::Version::parse(from), semver::Version::parse(to)) {
        (Ok(f), Ok(t)) => t < f,
        (Err(_), _) => false, // replacing an invalid pin is no downgrade
        (_, Err(e)) => return Err(HubError::invalid(format!("version `{to}` of {plugin}"), e)),
    };
    let why = match (lower, to_yanked) {
        (false, None) => return Ok(false),
        (true, None) => "it is a lower version".to_owned(),
        (true, Some(r)) => format!("it is a lower version, and yanked ({r})"),
        (false, Some(r)) => format!("it is yanked ({r})"),
    };
    if allow_downgrade {
        tracing::warn!(%plugin, %from, %to, %why, "downgrade allowed by --allow-downgrade");
        return Ok(true);
    }
    let error = HubError::Downgrade {
        plugin: plugin.to_owned(),
        from: from.to_owned(),
        to: to.to_owned(),
        why,
    };
    tracing::warn!(%plugin, %from, %to, %error, "downgrade refused");
    Err(error)
}

/// A lock file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockFile {
    /// [`LOCK_FORMAT`].
    pub format: u32,
    /// The pinned plugins, by name.
    #[serde(rename = "plugin")]
    pub plugins: Vec<LockEntry>,
}

impl LockFile {
    /// Reads `path`; a missing file is an empty lock.
    pub fn load(path: &Path) -> Result<LockFile, HubError> {
        match std::fs::read_to_string(path) {
            Ok(text) => LockFile::parse(&text)
                .map_err(|e| HubError::invalid(format!("lock file {}", path.display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(LockFile::default()),
            Err(e) => Err(HubError::Io {
                path: path.to_owned(),
                error: e,
            }),
        }
    }

    /// Parses lock file text.
    pub fn parse(text: &str) -> Result<LockFile, String> {
        let lock: LockFile = toml::from_str(text).map_err(|e| e.to_string())?;
        if lock.format > LOCK_FORMAT {
            return Err(format!(
                "format {} is newer than this build reads ({LOCK_FORMAT})",
                lock.format
            ));
        }
        Ok(lock)
    }

    /// The lock as TOML text.
    pub fn to_toml(&self) -> Result<String, HubError> {
        let mut lock = self.clone();
        lock.format = LOCK_FORMAT;
        lock.plugins.sort_by(|a, b| a.name.cmp(&b.name));
        let body = toml::to_string(&lock).map_err(|e| HubError::invalid("lock file", e))?;
        Ok(format!(
            "# Orrery plugin lock file: the exact plugin versions and bytes to run.\n\
             # Written by orrery-satellite and `orrery hub lock`; edit a version to roll it out.\n\n{body}"
        ))
    }

    /// Writes the lock to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), HubError> {
        write_atomic(path, self.to_toml()?.as_bytes())
    }

    /// The entry of plugin `name`.
    pub fn get(&self, name: &str) -> Option<&LockEntry> {
        self.plugins.iter().find(|p| p.name == name)
    }

    /// Adds or replaces the entry of `entry.name`. Digests of other
    /// platforms are kept when the version is unchanged.
    pub fn upsert(&mut self, mut entry: LockEntry) {
        match self.plugins.iter_mut().find(|p| p.name == entry.name) {
            Some(existing) => {
                if existing.version == entry.version {
                    for (platform, digest) in &existing.sha256 {
                        entry
                            .sha256
                            .entry(platform.clone())
                            .or_insert_with(|| digest.clone());
                    }
                }
                *existing = entry;
            }
            None => self.plugins.push(entry),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_toml_and_merges_platforms() {
        let mut lock = LockFile::default();
        lock.upsert(LockEntry {
            name: "local".into(),
            version: "1.1.0".into(),
            requirement: "^1.0".into(),
            sha256: BTreeMap::from([("linux-x86_64".into(), "aa".into())]),
        });
        lock.upsert(LockEntry {
            name: "local".into(),
            version: "1.1.0".into(),
            requirement: "^1.0".into(),
            sha256: BTreeMap::from([("linux-aarch64".into(), "bb".into())]),
        });
        let text = lock.to_toml().unwrap();
        assert!(text.contains("[[plugin]]"), "{text}");
        let back = LockFile::parse(&text).unwrap();
        assert_eq!(back.get("local").unwrap().sha256.len(), 2);
        // A new version drops the old version's digests.
        lock.upsert(LockEntry {
            name: "local".into(),
            version: "1.2.0".into(),
            sha256: BTreeMap::from([("linux-x86_64".into(), "cc".into())]),
            ..LockEntry::default()
        });
        assert_eq!(lock.get("local").unwrap().sha256.len(), 1);
        assert!(LockFile::parse("format = 99").is_err());
    }

    #[test]
    fn a_lock_moves_down_or_to_a_yanked_version_only_when_allowed() {
        let kind = |r: Result<bool, HubError>| r.map_err(|e| e.kind());
        assert_eq!(
            kind(check_move("local", None, "1.0.0", None, false)),
            Ok(false)
        );
        assert_eq!(
            kind(check_move("local", Some("1.0.0"), "1.1.0", None, false)),
            Ok(false)
        );
        assert_eq!(
            kind(check_move(
                "local",
                Some("1.1.0"),
                "1.1.0",
                Some("x"),
                false
            )),
            Ok(false)
        );
        assert_eq!(
            kind(check_move("local", Some("1.1.0"), "1.0.0", None, false)),
            Err("downgrade")
        );
        assert_eq!(
            kind(check_move(
                "local",
                Some("1.0.0"),
                "1.1.0",
                Some("broken"),
                false
            )),
            Err("downgrade")
        );
        assert_eq!(
            kind(check_move("local", Some("1.1.0"), "1.0.0", None, true)),
            Ok(true)
        );
        assert_eq!(
            kind(check_move(
                "local",
                Some("1.0.0"),
                "1.1.0",
                Some("broken"),
                true
            )),
            Ok(true)
        );
        let e = check_move("local", Some("1.1.0"), "1.0.0", None, false).unwrap_err();
        assert!(e.to_string().contains("--allow-downgrade"), "{e}");
    }
}
