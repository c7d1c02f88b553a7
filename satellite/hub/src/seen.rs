//! What an installer has seen of the hub's index, so that an index that
//! goes backwards is refused.
//!
//! Every index entry carries its publisher's signed manifest and every yank
//! statement is signed too, so a hub writer without a publisher's key can
//! forge neither. What a signature cannot stop is *removal*: deleting the
//! newest version's entry rolls resolution back to an older version, and
//! deleting the newest yank statement un-yanks a version. An installer
//! therefore remembers, per plugin, every version whose manifest verified
//! with a trusted key and, for each, the sequence and state of its newest
//! valid yank statement (the entry's own monotonic sequence). A later look
//! at the index that lacks a remembered version, or whose newest valid
//! statement for a version has a lower sequence than the remembered one,
//! is refused ([`HubError::IndexRollback`]) with a warning naming the
//! entry. The memory only grows; it is a small JSON file (by default
//! `index-seen.json` in the installer's cache directory, beside the
//! binaries it protects).
//!
//! An installer with no memory (a fresh cache) trusts the first index it
//! sees, as it must: a distributed lock file is what pins a fresh fleet.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::client::IndexEntry;
use crate::keys::TrustedKeys;
use crate::store::index_key;
use crate::{write_atomic, HubError};

/// The file name of the memory in a cache directory.
pub const SEEN_FILE: &str = "index-seen.json";

const SEEN_FORMAT: u32 = 1;

/// What was seen of one version.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeenVersion {
    /// The sequence of the newest valid yank statement (0: none).
    pub yank_sequence: u64,
    /// Whether that statement yanked the version.
    pub yanked: bool,
}

/// The memory: plugin -> version -> what was seen.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SeenIndex {
    /// The format (1).
    pub format: u32,
    /// Per plugin, per version.
    pub plugins: BTreeMap<String, BTreeMap<String, SeenVersion>>,
}

impl SeenIndex {
    /// Reads `path`; a missing file is an empty memory.
    pub fn load(path: &Path) -> Result<SeenIndex, HubError> {
        match std::fs::read(path) {
            Ok(bytes) => serde_json::from_slice(&bytes)
                .map_err(|e| HubError::invalid(format!("hub index memory {}", path.display()), e)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SeenIndex::default()),
            Err(e) => Err(HubError::Io {
                path: path.to_owned(),
                error: e,
            }),
        }
    }

    /// Writes the memory to `path` atomically.
    pub fn save(&self, path: &Path) -> Result<(), HubError> {
        let mut me = self.clone();
        me.format = SEEN_FORMAT;
        let bytes =
            serde_json::to_vec_pretty(&me).map_err(|e| HubError::invalid("hub index memory", e))?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(HubError::io(dir))?;
        }
        write_atomic(path, &bytes)
    }

    /// What `entry` shows now, for an operator trusting `trusted`.
    fn observe(entry: &IndexEntry, trusted: &TrustedKeys) -> SeenVersion {
        entry
            .yank_state(trusted)
            .map(|s| SeenVersion {
                yank_sequence: s.sequence,
                yanked: s.yanked,
            })
            .unwrap_or_default()
    }

    /// Refuses `entry` when its newest valid yank statement is older than
    /// the one remembered (a statement was removed).
    pub fn check_entry(&self, entry: &IndexEntry, trusted: &TrustedKeys) -> Result<(), HubError> {
        let m = &entry.manifest.manifest;
        let Some(seen) = self.plugins.get(&m.name).and_then(|v| v.get(&m.version)) else {
            return Ok(());
        };
        let now = Self::observe(entry, trusted);
        if now.yank_sequence < seen.yank_sequence {
            return Err(rollback(
                &m.name,
                &m.version,
                format!(
                    "its newest signed yank statement has sequence {} ({}), but sequence {} ({}) was seen before: \
                     a statement was removed from the index",
                    now.yank_sequence,
                    state(now.yanked),
                    seen.yank_sequence,
                    state(seen.yanked),
                ),
            ));
        }
        Ok(())
    }

    /// Refuses a listing of plugin `name` (`entries`: every version the hub
    /// lists) that lacks a remembered version or went back on a yank.
    pub fn check_listing(
        &self,
        name: &str,
        entries: &[IndexEntry],
        trusted: &TrustedKeys,
    ) -> Result<(), HubError> {
        let Some(seen) = self.plugins.get(name) else {
            return Ok(());
        };
        for version in seen.keys() {
            match entries
                .iter()
                .find(|e| e.manifest.manifest.version == *version)
            {
                Some(entry) => self.check_entry(entry, trusted)?,
                None => {
                    return Err(rollback(
                        name,
                        version,
                        "its index entry is gone (it was seen, signed by a trusted key, before): \
                         the index went backwards"
                            .to_owned(),
                    ))
                }
            }
        }
        Ok(())
    }

    /// Remembers every entry whose manifest verifies with `trusted`. Returns
    /// whether anything changed.
    pub fn record(&mut self, entries: &[IndexEntry], trusted: &TrustedKeys) -> bool {
        let mut changed = false;
        for entry in entries {
            if entry.manifest.verify(trusted).is_err() {
                continue;
            }
            let m = &entry.manifest.manifest;
            let now = Self::observe(entry, trusted);
            let slot = self
                .plugins
                .entry(m.name.clone())
                .or_default()
                .entry(m.version.clone())
                .or_insert_with(|| {
                    changed = true;
                    SeenVersion::default()
                });
            if now.yank_sequence > slot.yank_sequence {
                *slot = now;
                changed = true;
            }
        }
        changed
    }
}

fn state(yanked: bool) -> &'static str {
    if yanked {
        "yanked"
    } else {
        "not yanked"
    }
}

fn rollback(name: &str, version: &str, why: String) -> HubError {
    let error = HubError::IndexRollback {
        entry: index_key(name, version),
        plugin: format!("{name}@{version}"),
        why,
    };
    tracing::warn!(entry = %index_key(name, version), plugin = %format!("{name}@{version}"), %error,
        "refusing a hub index that went backwards");
    error
}

/// The memory file, shared by clones of one installer (a lock serialises
/// read-check-write).
#[derive(Clone, Debug)]
pub(crate) struct SeenFile {
    path: Option<PathBuf>,
    lock: std::sync::Arc<tokio::sync::Mutex<()>>,
}

impl SeenFile {
    pub(crate) fn new(path: Option<PathBuf>) -> SeenFile {
        SeenFile {
            path,
            lock: Default::default(),
        }
    }

    pub(crate) fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// Checks a listing of `name` against the memory, then remembers it.
    pub(crate) async fn listing(
        &self,
        name: &str,
        entries: &[IndexEntry],
        trusted: &TrustedKeys,
    ) -> Result<(), HubError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _held = self.lock.lock().await;
        let mut seen = SeenIndex::load(path)?;
        seen.check_listing(name, entries, trusted)?;
        if seen.record(entries, trusted) {
            seen.save(path)?;
        }
        Ok(())
    }

    /// Checks one entry against the memory, then remembers it.
    pub(crate) async fn entry(
        &self,
        entry: &IndexEntry,
        trusted: &TrustedKeys,
    ) -> Result<(), HubError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let _held = self.lock.lock().await;
        let mut seen = SeenIndex::load(path)?;
        seen.check_entry(entry, trusted)?;
        if seen.record(std::slice::from_ref(entry), trusted) {
            seen.save(path)?;
        }
        Ok(())
    }
}
