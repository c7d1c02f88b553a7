//! # orrery-hub
//!
//! The plugin hub: publish, verify and install plugins across a fleet.
//! Used by the `orrery` CLI (`orrery hub …`, `orrery plugin package`) and
//! by the satellite daemon, which serves what it installs (its
//! `hub::serve` module holds the rolling restart, the one part that needs
//! the satellite's relay and plugin host).
//!
//! A **package** is a signed manifest plus one binary per platform
//! ([`manifest`], [`package`]). Publishers sign with an Ed25519 key
//! ([`keys`]); operators trust keys explicitly. The **hub** stores
//! artifacts by SHA-256 in the JetStream object store bucket
//! [`store::ARTIFACT_BUCKET`] and the index (`name.version` → manifest and
//! signed yank statements, [`yank`]) in the key-value bucket
//! [`store::INDEX_BUCKET`]; a directory
//! with the same layout serves the embedded mode and air-gapped sites
//! ([`store`], [`client`]). Satellites **install** plugins by name and
//! version requirement: resolve, verify signature and digest, cache by
//! digest, pin in a **lock file** ([`install`], [`lock`]).
//!
//! Trust is explicit and narrow: each trusted key is bound to the plugin
//! names it may sign ([`keys::TrustedKeySpec`]), yanks count only when
//! signed by such a key, and a lock never moves to a lower or yanked
//! version unless allowed ([`lock::check_move`]).
//!
//! Every refusal is a distinct [`HubError`] variant whose message names the
//! check that failed. `docs/hub.md` is the operator's and publisher's guide.

pub mod client;
pub mod install;
pub mod keys;
pub mod lock;
pub mod manifest;
pub mod package;
pub mod seen;
pub mod store;
#[cfg(feature = "testing")]
pub mod testing;
pub mod yank;

pub use client::{Hub, IndexEntry, PublishOutcome};
pub use install::{Installed, Installer, Requirement};
pub use keys::{PublisherKey, TrustedKeySpec, TrustedKeys};
pub use lock::{LockEntry, LockFile};
pub use manifest::{Artifact, Manifest, SignedManifest};
pub use package::{Package, PackageOptions};
pub use yank::{SignedYank, YankStatement};

use std::path::PathBuf;

/// This host's platform string, `<os>-<arch>` as Rust names them, e.g.
/// `linux-x86_64` or `linux-aarch64`.
pub fn host_platform() -> String {
    format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH)
}

/// The file name a plugin binary has inside packages and the cache.
pub fn binary_name(plugin: &str) -> String {
    format!("orrery-plugin-{plugin}")
}

/// Why a hub operation was refused or failed. Each check that can refuse a
/// package has its own variant, so callers (and tests) can tell them apart.
#[derive(Debug, thiserror::Error)]
pub enum HubError {
    /// The manifest carries no signature.
    #[error("refused {plugin}@{version}: the package is unsigned (no publisher signature in its manifest)")]
    Unsigned {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
    },
    /// The publisher's key is not among the operator's trusted keys.
    #[error("refused {plugin}@{version}: it is signed by key {key_id}, which is not a trusted key (trusted: {trusted})")]
    UntrustedKey {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The key that signed it.
        key_id: String,
        /// The trusted key ids, comma-separated (or `none`).
        trusted: String,
    },
    /// The publisher's key is trusted, but not for this plugin name.
    #[error("refused {plugin}@{version}: it is signed by key {key_id}, which is trusted only for plugins {allowed}")]
    KeyNotTrustedForPlugin {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The key that signed it.
        key_id: String,
        /// The name patterns the key is trusted for, comma-separated.
        allowed: String,
    },
    /// The signature does not verify: the manifest was altered after
    /// signing, or signed by a different key than it claims.
    #[error("refused {plugin}@{version}: signature check failed: the manifest's signature does not verify with trusted key {key_id} (the manifest was altered or signed by another key)")]
    BadSignature {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The key the manifest names.
        key_id: String,
    },
    /// The downloaded (or cached, or packaged) bytes do not match the
    /// manifest's SHA-256 or size.
    #[error("refused {package}: checksum check failed for {platform}: expected sha256 {expected} ({expected_size} bytes), got sha256 {actual} ({actual_size} bytes); the artifact was tampered with or corrupted")]
    ArtifactTampered {
        /// The package, `name@version`.
        package: String,
        /// The platform of the artifact.
        platform: String,
        /// The manifest's digest.
        expected: String,
        /// The manifest's size.
        expected_size: u64,
        /// The digest of the bytes received.
        actual: String,
        /// The size of the bytes received.
        actual_size: u64,
    },
    /// The plugin speaks a protocol major this satellite does not.
    #[error("refused {plugin}@{version}: it speaks plugin protocol {protocol}, this satellite speaks protocol {supported}")]
    UnsupportedProtocol {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The protocol major it speaks.
        protocol: u16,
        /// The one this satellite speaks.
        supported: u16,
    },
    /// The package has no binary for this platform.
    #[error("refused {plugin}@{version}: no binary for platform {platform} (the package has: {available})")]
    PlatformMissing {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// This platform.
        platform: String,
        /// The platforms it has, comma-separated.
        available: String,
    },
    /// The plugin needs a newer Orrery.
    #[error("refused {plugin}@{version}: it needs Orrery {required} or later, this is {running}")]
    OrreryTooOld {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The minimum it declares.
        required: String,
        /// This build's version.
        running: String,
    },
    /// The lock file pins other bytes than the hub serves for this version.
    #[error("refused {plugin}@{version}: the lock file pins sha256 {locked} for {platform} but the hub's manifest says {published}")]
    LockMismatch {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The platform.
        platform: String,
        /// The digest in the lock file.
        locked: String,
        /// The digest in the manifest.
        published: String,
    },
    /// The started binary announced something other than its manifest.
    #[error("refused {plugin}@{version}: the binary announced itself as `{announced_name}` speaking protocol {announced_protocol}, not as its manifest says")]
    AnnouncementMismatch {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The name it announced.
        announced_name: String,
        /// The protocol it announced.
        announced_protocol: u16,
    },
    /// An index entry holds the manifest of another plugin or version than
    /// its key names (the index was edited: a signed manifest moved under
    /// another key).
    #[error("refused {name}@{version}: the hub's index entry {key} holds the manifest of {found}; the index was tampered with")]
    EntryMismatch {
        /// The index key.
        key: String,
        /// The plugin asked for.
        name: String,
        /// The version asked for.
        version: String,
        /// `name@version` of the manifest found there.
        found: String,
    },
    /// A satellite names a manifest of this plugin and version whose
    /// digest is not the one the hub holds: it was installed from another
    /// hub, or one of the two was tampered with.
    #[error("refused {plugin}@{version}: the satellite names manifest sha256 {claimed}, but the hub's manifest of that version has sha256 {published}")]
    ManifestMismatch {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
        /// The digest named.
        claimed: String,
        /// The digest of the hub's manifest.
        published: String,
    },
    /// The signed manifest carries no schema (a package built before
    /// manifests held one), so it cannot vouch for the plugin's schemas.
    #[error("refused {plugin}@{version}: its signed manifest carries no schema")]
    SchemaMissing {
        /// The plugin.
        plugin: String,
        /// Its version.
        version: String,
    },
    /// A lock would move a plugin to a lower or a yanked version, and that
    /// was not explicitly allowed (`--allow-downgrade`).
    #[error("refused to move {plugin} from {from} to {to}: {why}; pass --allow-downgrade to do it anyway")]
    Downgrade {
        /// The plugin.
        plugin: String,
        /// The version pinned (or running) now.
        from: String,
        /// The version asked for.
        to: String,
        /// `it is a lower version` or `it is yanked (…)`.
        why: String,
    },
    /// The hub's index went backwards from what this installer saw
    /// before: a version's entry is gone, or a yank statement was removed
    /// ([`crate::seen`]).
    #[error("refused the hub index: entry {entry} ({plugin}): {why}")]
    IndexRollback {
        /// The index key of the entry.
        entry: String,
        /// `name@version`.
        plugin: String,
        /// What went backwards.
        why: String,
    },
    /// The hub has no plugin of that name.
    #[error("plugin `{name}` is not on the hub")]
    PluginNotFound {
        /// The plugin.
        name: String,
    },
    /// The hub has the plugin but not that version.
    #[error("{name}@{version} is not on the hub")]
    VersionNotFound {
        /// The plugin.
        name: String,
        /// The version.
        version: String,
    },
    /// No published version satisfies the requirement.
    #[error("no version of `{name}` matches `{requirement}` (published: {available})")]
    NoMatchingVersion {
        /// The plugin.
        name: String,
        /// The requirement.
        requirement: String,
        /// The published versions, comma-separated.
        available: String,
    },
    /// Every version that satisfies the requirement is yanked.
    #[error("every version of `{name}` matching `{requirement}` is yanked ({yanked}); pin one in the lock file to install it anyway")]
    AllYanked {
        /// The plugin.
        name: String,
        /// The requirement.
        requirement: String,
        /// The yanked versions, comma-separated.
        yanked: String,
    },
    /// The version is already published with different content.
    #[error("{name}@{version} is already published with different content (published manifest digest {published}, this one {offered}); publish a new version instead")]
    RepublishConflict {
        /// The plugin.
        name: String,
        /// The version.
        version: String,
        /// Digest of the canonical published manifest.
        published: String,
        /// Digest of the canonical offered manifest.
        offered: String,
    },
    /// A manifest, key file, requirement or lock file is malformed.
    #[error("{what}: {reason}")]
    Invalid {
        /// What was malformed.
        what: String,
        /// Why.
        reason: String,
    },
    /// The plugin binary could not be started or failed its handshake
    /// (packaging reads its announcement; installing starts it).
    #[error(transparent)]
    Spawn(#[from] orrery_plugin_sdk::process::SpawnError),
    /// The storage (JetStream or the directory) failed.
    #[error("hub storage: {0}")]
    Storage(String),
    /// A local file operation failed.
    #[error("{}: {error}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        error: std::io::Error,
    },
}

impl HubError {
    /// A short, stable name of the check or failure, for logs and scripts:
    /// `unsigned`, `untrusted-key`, `bad-signature`, `artifact-tampered`, …
    pub fn kind(&self) -> &'static str {
        match self {
            HubError::Unsigned { .. } => "unsigned",
            HubError::UntrustedKey { .. } => "untrusted-key",
            HubError::KeyNotTrustedForPlugin { .. } => "key-not-trusted-for-plugin",
            HubError::BadSignature { .. } => "bad-signature",
            HubError::ArtifactTampered { .. } => "artifact-tampered",
            HubError::UnsupportedProtocol { .. } => "unsupported-protocol",
            HubError::PlatformMissing { .. } => "platform-missing",
            HubError::OrreryTooOld { .. } => "orrery-too-old",
            HubError::LockMismatch { .. } => "lock-mismatch",
            HubError::AnnouncementMismatch { .. } => "announcement-mismatch",
            HubError::EntryMismatch { .. } => "entry-mismatch",
            HubError::ManifestMismatch { .. } => "manifest-mismatch",
            HubError::SchemaMissing { .. } => "schema-missing",
            HubError::Downgrade { .. } => "downgrade",
            HubError::IndexRollback { .. } => "index-rollback",
            HubError::PluginNotFound { .. } => "plugin-not-found",
            HubError::VersionNotFound { .. } => "version-not-found",
            HubError::NoMatchingVersion { .. } => "no-matching-version",
            HubError::AllYanked { .. } => "all-yanked",
            HubError::RepublishConflict { .. } => "republish-conflict",
            HubError::Invalid { .. } => "invalid",
            HubError::Spawn(_) => "spawn",
            HubError::Storage(_) => "storage",
            HubError::Io { .. } => "io",
        }
    }

    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(std::io::Error) -> HubError {
        let path = path.into();
        move |error| HubError::Io { path, error }
    }

    pub(crate) fn invalid(what: impl Into<String>, reason: impl ToString) -> HubError {
        HubError::Invalid {
            what: what.into(),
            reason: reason.to_string(),
        }
    }

    /// A [`HubError::Storage`] from any displayable error (public for the
    /// satellite's glue, whose NATS calls fail the same way).
    pub fn storage(e: impl std::fmt::Display) -> HubError {
        HubError::Storage(e.to_string())
    }
}

/// Lower-case hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::Digest;
    hex(&sha2::Sha256::digest(bytes))
}

/// Whether `s` is a 64-digit lower-case hex SHA-256.
pub(crate) fn is_digest(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// SHA-256 and size of a file, read in chunks.
pub async fn file_digest(path: &std::path::Path) -> Result<(String, u64), HubError> {
    use sha2::Digest;
    use tokio::io::AsyncReadExt;
    let mut file = tokio::fs::File::open(path)
        .await
        .map_err(HubError::io(path))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = file.read(&mut buf).await.map_err(HubError::io(path))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        size += n as u64;
    }
    Ok((hex(&hasher.finalize()), size))
}

/// Runs `start` (which spawns a binary), again after a short pause when
/// the binary is "text file busy": a binary written moments ago can still be
/// open for writing in a child that another thread forked and has not yet
/// exec'd, and `execve` refuses a file open for writing. Each child closes
/// such descriptors on exec, so the condition passes within milliseconds.
/// (Public for the satellite, which starts installed binaries.)
pub async fn retry_text_busy<T, F, Fut>(mut start: F) -> Result<T, HubError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T, orrery_plugin_sdk::process::SpawnError>>,
{
    let mut attempt = 0;
    loop {
        match start().await {
            Err(orrery_plugin_sdk::process::SpawnError::Exec { source, .. })
                if source.kind() == std::io::ErrorKind::ExecutableFileBusy && attempt < 20 =>
            {
                attempt += 1;
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            other => return other.map_err(HubError::from),
        }
    }
}

/// A name for a temporary file next to `dest`, unique in this process.
pub(crate) fn temp_path(dest: &std::path::Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = dest
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    dest.with_file_name(format!(".{name}.tmp-{}-{n}", std::process::id()))
}

/// Writes `bytes` to `dest` atomically (temporary file, then rename).
pub(crate) fn write_atomic(dest: &std::path::Path, bytes: &[u8]) -> Result<(), HubError> {
    let tmp = temp_path(dest);
    std::fs::write(&tmp, bytes).map_err(HubError::io(&tmp))?;
    std::fs::rename(&tmp, dest).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        HubError::Io {
            path: dest.to_owned(),
            error: e,
        }
    })
}
