//! Installing: resolve a requirement, verify, download, cache by digest.
//!
//! Resolution picks the highest version matching the requirement that is
//! signed by a key trusted for the plugin, not yanked by a valid signed
//! statement ([`crate::yank`]), and suits this satellite; versions that fail
//! any of these are skipped with a warning, so one bad or untrusted version
//! (a newer one included) blocks nobody.
//!
//! Checks, in order, each with its own [`HubError`]:
//!
//! 1. signature against the operator's trusted keys (`Unsigned`,
//!    `UntrustedKey`, `KeyNotTrustedForPlugin`, `BadSignature`);
//! 2. protocol major (`UnsupportedProtocol`), minimum Orrery version
//!    (`OrreryTooOld`), a binary for this platform (`PlatformMissing`);
//! 3. the lock file's digest, when one is pinned (`LockMismatch`);
//! 4. the downloaded bytes' size and SHA-256 (`ArtifactTampered`).
//!
//! Only then is the binary renamed into the cache,
//! `cache_dir/<sha256>/orrery-plugin-<name>`, mode 0755. A cached binary is
//! re-hashed before use, so a cache edited on disk is caught as well.

use std::path::PathBuf;
use std::str::FromStr;

use semver::VersionReq;

use crate::client::{Hub, IndexEntry};
use crate::keys::TrustedKeys;
use crate::lock::LockEntry;
use crate::manifest::{valid_name, Artifact, Manifest};
use crate::seen::{SeenFile, SEEN_FILE};
use crate::{binary_name, file_digest, host_platform, temp_path, HubError};

/// `name@requirement`, e.g. `local@^1.2`. Requirements are Cargo's: `1.2`
/// means `^1.2`, `=1.2.3` is exact, `*` (or no `@…`) is any version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Requirement {
    /// The plugin.
    pub name: String,
    /// The versions accepted.
    pub req: VersionReq,
}

impl FromStr for Requirement {
    type Err = HubError;

    fn from_str(s: &str) -> Result<Requirement, HubError> {
        let (name, req) = s.split_once('@').unwrap_or((s, "*"));
        let name = name.trim();
        if !valid_name(name) {
            return Err(HubError::invalid(
                format!("plugin requirement `{s}`"),
                "expected NAME@REQ, e.g. local@^1.2, with a lower-case name",
            ));
        }
        let req = VersionReq::parse(req.trim())
            .map_err(|e| HubError::invalid(format!("version requirement in `{s}`"), e))?;
        Ok(Requirement {
            name: name.to_owned(),
            req,
        })
    }
}

impl std::fmt::Display for Requirement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}@{}", self.name, self.req)
    }
}

/// An installed (verified, cached) plugin binary.
#[derive(Clone, Debug)]
pub struct Installed {
    /// Its manifest.
    pub manifest: Manifest,
    /// The SHA-256 of its signed manifest's canonical encoding
    /// ([`crate::SignedManifest::content_digest`]): what a satellite names
    /// in its describe answers, so a primary can fetch and verify exactly
    /// this manifest ([`Hub::signed_schema`]).
    pub manifest_digest: String,
    /// Its SHA-256.
    pub sha256: String,
    /// The platform installed.
    pub platform: String,
    /// The cached binary.
    pub path: PathBuf,
    /// Whether the version is yanked by a valid signed statement
    /// (installed because it was pinned).
    pub yanked: bool,
    /// Why, when yanked.
    pub yank_reason: String,
}

impl Installed {
    /// `name@version`.
    pub fn label(&self) -> String {
        self.manifest.label()
    }

    /// The lock entry pinning exactly this install.
    pub fn lock_entry(&self, requirement: &str) -> LockEntry {
        LockEntry {
            name: self.manifest.name.clone(),
            version: self.manifest.version.clone(),
            requirement: requirement.to_owned(),
            sha256: [(self.platform.clone(), self.sha256.clone())].into(),
        }
    }
}

/// Installs plugins from a hub into a cache.
#[derive(Clone)]
pub struct Installer {
    hub: Hub,
    trusted: TrustedKeys,
    cache_dir: PathBuf,
    platform: String,
    protocol: u16,
    orrery: semver::Version,
    seen: SeenFile,
}

impl Installer {
    /// Installs from `hub`, trusting exactly `trusted`, caching in
    /// `cache_dir`, for this host's platform and protocol. What it sees of
    /// the index is remembered in `cache_dir/index-seen.json`
    /// ([`crate::seen`]): an index that goes backwards is refused.
    pub fn new(hub: Hub, trusted: TrustedKeys, cache_dir: impl Into<PathBuf>) -> Installer {
        let cache_dir = cache_dir.into();
        Installer {
            hub,
            trusted,
            seen: SeenFile::new(Some(cache_dir.join(SEEN_FILE))),
            cache_dir,
            platform: host_platform(),
            protocol: orrery_schema::PROTOCOL_MAJOR,
            orrery: semver::Version::parse(env!("CARGO_PKG_VERSION"))
                .unwrap_or_else(|_| semver::Version::new(0, 0, 0)),
        }
    }

    /// Installs for another platform than this host's.
    pub fn with_platform(mut self, platform: impl Into<String>) -> Installer {
        self.platform = platform.into();
        self
    }

    /// Remembers what it sees of the index in `path` instead of the cache
    /// directory's `index-seen.json` (`orrery hub lock`: beside the lock
    /// file); `None` remembers nothing (an index going backwards is then
    /// not noticed).
    pub fn with_seen_file(mut self, path: Option<PathBuf>) -> Installer {
        self.seen = SeenFile::new(path);
        self
    }

    /// Where what it saw of the index is remembered.
    pub fn seen_file(&self) -> Option<&std::path::Path> {
        self.seen.path()
    }

    /// The hub.
    pub fn hub(&self) -> &Hub {
        &self.hub
    }

    /// The platform installed for.
    pub fn platform(&self) -> &str {
        &self.platform
    }

    /// The highest version matching `requirement` that is signed by a key
    /// trusted for the plugin, is not yanked (by a valid signed statement),
    /// and suits this platform, protocol and Orrery version. Versions that
    /// fail are skipped with a warning. When none is left, the error is the
    /// newest unsuitable one's reason, else [`HubError::AllYanked`], else
    /// the newest one's signature refusal.
    pub async fn resolve(&self, requirement: &Requirement) -> Result<IndexEntry, HubError> {
        self.resolve_with(requirement, false).await
    }

    /// Like [`Installer::resolve`], but with `include_yanked`, a yanked
    /// version is chosen when no other is left (for pinning one on purpose:
    /// `orrery hub lock --allow-downgrade`).
    pub async fn resolve_with(
        &self,
        requirement: &Requirement,
        include_yanked: bool,
    ) -> Result<IndexEntry, HubError> {
        let versions = match self.hub.versions(&requirement.name).await {
            Ok(versions) => versions,
            // Every entry deleted: the memory names the first one it saw.
            Err(e @ HubError::PluginNotFound { .. }) => {
                self.seen
                    .listing(&requirement.name, &[], &self.trusted)
                    .await?;
                return Err(e);
            }
            Err(e) => return Err(e),
        };
        self.seen
            .listing(&requirement.name, &versions, &self.trusted)
            .await?;
        let matching: Vec<IndexEntry> = versions
            .iter()
            .filter(|e| requirement.req.matches(&e.version))
            .cloned()
            .collect();
        if matching.is_empty() {
            return Err(HubError::NoMatchingVersion {
                name: requirement.name.clone(),
                requirement: requirement.req.to_string(),
                available: join(versions.iter().map(|e| e.version.to_string())),
            });
        }
        let mut unsuitable = None;
        let mut untrusted = None;
        let mut yanked = Vec::new();
        for entry in matching.into_iter().rev() {
            if let Err(e) = entry.manifest.verify(&self.trusted) {
                tracing::warn!(plugin = %entry.label(), check = e.kind(), reason = %e,
                    "skipping a version not signed by a key trusted for it");
                untrusted.get_or_insert(e);
                continue;
            }
            if entry.is_yanked(&self.trusted) {
                yanked.push(entry);
                continue;
            }
            match self.check_compatible(&entry.manifest.manifest) {
                Ok(_) => return Ok(entry),
                Err(e) => {
                    tracing::warn!(plugin = %entry.label(), reason = %e, "skipping an unsuitable version");
                    unsuitable.get_or_insert(e);
                }
            }
        }
        if let Some(e) = unsuitable {
            return Err(e);
        }
        if include_yanked {
            if let Some(entry) = yanked
                .iter()
                .find(|e| self.check_compatible(&e.manifest.manifest).is_ok())
            {
                return Ok(entry.clone());
            }
        }
        if !yanked.is_empty() {
            return Err(HubError::AllYanked {
                name: requirement.name.clone(),
                requirement: requirement.req.to_string(),
                yanked: join(yanked.iter().rev().map(|e| e.version.to_string())),
            });
        }
        Err(untrusted.unwrap_or_else(|| HubError::PluginNotFound {
            name: requirement.name.clone(),
        }))
    }

    /// Installs `requirement`: the version `pinned` names when it satisfies
    /// the requirement (even if yanked), else the resolved one.
    pub async fn install(
        &self,
        requirement: &Requirement,
        pinned: Option<&LockEntry>,
    ) -> Result<Installed, HubError> {
        if let Some(pin) = pinned.filter(|p| self.pin_applies(requirement, p)) {
            let entry = self.hub.entry(&pin.name, &pin.version).await?;
            return self
                .install_entry(&entry, pin.sha256.get(&self.platform).map(String::as_str))
                .await;
        }
        let entry = self.resolve(requirement).await?;
        self.install_entry(&entry, None).await
    }

    /// Whether lock entry `pin` applies to `requirement`: same plugin and a
    /// version the requirement accepts.
    pub fn pin_applies(&self, requirement: &Requirement, pin: &LockEntry) -> bool {
        if pin.name != requirement.name {
            return false;
        }
        match semver::Version::parse(&pin.version) {
            Ok(v) if requirement.req.matches(&v) => true,
            Ok(_) => {
                tracing::warn!(plugin = %pin.name, locked = %pin.version, requirement = %requirement.req,
                    "the lock file pins a version the requirement does not accept; resolving again");
                false
            }
            Err(e) => {
                tracing::warn!(plugin = %pin.name, locked = %pin.version, error = %e,
                    "the lock file pins an invalid version; resolving again");
                false
            }
        }
    }

    /// The platform artifact of `manifest`, if it suits this satellite.
    pub fn check_compatible<'m>(&self, manifest: &'m Manifest) -> Result<&'m Artifact, HubError> {
        if manifest.protocol != self.protocol {
            return Err(HubError::UnsupportedProtocol {
                plugin: manifest.name.clone(),
                version: manifest.version.clone(),
                protocol: manifest.protocol,
                supported: self.protocol,
            });
        }
        if !manifest.min_orrery.is_empty() {
            let required = semver::Version::parse(&manifest.min_orrery)
                .map_err(|e| HubError::invalid(format!("min_orrery of {}", manifest.label()), e))?;
            if required > self.orrery {
                return Err(HubError::OrreryTooOld {
                    plugin: manifest.name.clone(),
                    version: manifest.version.clone(),
                    required: manifest.min_orrery.clone(),
                    running: self.orrery.to_string(),
                });
            }
        }
        manifest
            .artifacts
            .get(&self.platform)
            .ok_or_else(|| HubError::PlatformMissing {
                plugin: manifest.name.clone(),
                version: manifest.version.clone(),
                platform: self.platform.clone(),
                available: join(manifest.artifacts.keys().cloned()),
            })
    }

    /// Verifies and installs one published version. `locked` is the digest
    /// a lock file pins for this platform, if any.
    pub async fn install_entry(
        &self,
        entry: &IndexEntry,
        locked: Option<&str>,
    ) -> Result<Installed, HubError> {
        entry.manifest.verify(&self.trusted)?;
        self.seen.entry(entry, &self.trusted).await?;
        let manifest = &entry.manifest.manifest;
        if !valid_name(&manifest.name) {
            return Err(HubError::invalid(
                manifest.label(),
                "the plugin name is not a valid name",
            ));
        }
        let artifact = self.check_compatible(manifest)?;
        if !crate::is_digest(&artifact.sha256) {
            return Err(HubError::invalid(
                manifest.label(),
                format!("artifact digest `{}` is not a SHA-256", artifact.sha256),
            ));
        }
        if let Some(locked) = locked {
            if locked != artifact.sha256 {
                return Err(HubError::LockMismatch {
                    plugin: manifest.name.clone(),
                    version: manifest.version.clone(),
                    platform: self.platform.clone(),
                    locked: locked.to_owned(),
                    published: artifact.sha256.clone(),
                });
            }
        }
        let tampered = |actual: String, actual_size: u64| HubError::ArtifactTampered {
            package: manifest.label(),
            platform: self.platform.clone(),
            expected: artifact.sha256.clone(),
            expected_size: artifact.size,
            actual,
            actual_size,
        };
        let dir = self.cache_dir.join(&artifact.sha256);
        let path = dir.join(binary_name(&manifest.name));
        let yank = entry.yank_state(&self.trusted).filter(|s| s.yanked);
        let installed = Installed {
            manifest: manifest.clone(),
            manifest_digest: entry.manifest.content_digest()?,
            sha256: artifact.sha256.clone(),
            platform: self.platform.clone(),
            path: path.clone(),
            yanked: yank.is_some(),
            yank_reason: yank.map(|s| s.reason.clone()).unwrap_or_default(),
        };
        if path.exists() {
            let (sha256, size) = file_digest(&path).await?;
            if sha256 == artifact.sha256 && size == artifact.size {
                tracing::info!(plugin = %manifest.label(), path = %path.display(), "using the cached, verified binary");
                return Ok(installed);
            }
            tracing::warn!(plugin = %manifest.label(), path = %path.display(), "cached binary does not match its digest; downloading again");
            let _ = std::fs::remove_file(&path);
        }
        std::fs::create_dir_all(&dir).map_err(HubError::io(&dir))?;
        let tmp = temp_path(&path);
        let fetched = self.hub.download(artifact, &tmp).await;
        // A refused download leaves nothing behind (the directory goes
        // too, unless another install is using it).
        let discard = || {
            let _ = std::fs::remove_file(&tmp);
            let _ = std::fs::remove_dir(&dir);
        };
        let (sha256, size) = match fetched {
            Ok(got) => got,
            Err(e) => {
                discard();
                return Err(e);
            }
        };
        if sha256 != artifact.sha256 || size != artifact.size {
            discard();
            return Err(tampered(sha256, size));
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755))
            .map_err(HubError::io(&tmp))?;
        std::fs::rename(&tmp, &path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            HubError::Io {
                path: path.clone(),
                error: e,
            }
        })?;
        tracing::info!(plugin = %manifest.label(), sha256 = %artifact.sha256, path = %path.display(), "installed and verified");
        Ok(installed)
    }
}

fn join(items: impl IntoIterator<Item = String>) -> String {
    let v: Vec<String> = items.into_iter().collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_parse() {
        let r: Requirement = "local@^1.2".parse().unwrap();
        assert_eq!(r.name, "local");
        assert!(r.req.matches(&semver::Version::new(1, 9, 0)));
        assert!(!r.req.matches(&semver::Version::new(2, 0, 0)));
        let any: Requirement = "local".parse().unwrap();
        assert!(any.req.matches(&semver::Version::new(7, 0, 0)));
        let exact: Requirement = "local@=1.0.0".parse().unwrap();
        assert!(!exact.req.matches(&semver::Version::new(1, 0, 1)));
        assert!("Local@1".parse::<Requirement>().is_err());
        assert!("local@banana".parse::<Requirement>().is_err());
    }
}
