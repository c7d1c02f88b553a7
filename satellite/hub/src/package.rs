//! Package directories: building one from a plugin binary, reading one back.
//!
//! Layout:
//!
//! ```text
//! DIR/manifest.json                          the signed manifest
//! DIR/schema.msgpack                         the announcement (schemas)
//! DIR/<platform>/orrery-plugin-<name>        one binary per platform
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use orrery_plugin_sdk::process::{spawn_plugin, SpawnConfig};
use orrery_schema::Announcement;

use crate::keys::PublisherKey;
use crate::manifest::{valid_name, Artifact, Manifest, SignedManifest, MANIFEST_FORMAT};
use crate::{binary_name, file_digest, host_platform, write_atomic, HubError};

/// The manifest's file name inside a package.
pub const MANIFEST_FILE: &str = "manifest.json";
/// The schema's file name inside a package.
pub const SCHEMA_FILE: &str = "schema.msgpack";

/// How to build a package.
#[derive(Clone, Debug)]
pub struct PackageOptions {
    /// The plugin binary for `platform`; it is run once to read its
    /// announcement.
    pub binary: PathBuf,
    /// The platform of `binary` (default: this host's).
    pub platform: String,
    /// Binaries for other platforms (not run), as `(platform, path)`.
    pub extra_binaries: Vec<(String, PathBuf)>,
    /// Overrides the announced version in the manifest. For re-packaging
    /// and tests (two versions from one build); the manifest records the
    /// announced version as `announced_version` either way.
    pub version: Option<String>,
    /// SPDX license expression.
    pub license: String,
    /// One line about the plugin.
    pub summary: String,
    /// The oldest Orrery that can run the plugin (default: this build).
    pub min_orrery: Option<String>,
    /// How long the plugin may take to announce itself.
    pub handshake_timeout: Duration,
}

impl PackageOptions {
    /// Defaults for `binary`.
    pub fn new(binary: impl Into<PathBuf>) -> PackageOptions {
        PackageOptions {
            binary: binary.into(),
            platform: host_platform(),
            extra_binaries: Vec::new(),
            version: None,
            license: String::new(),
            summary: String::new(),
            min_orrery: None,
            handshake_timeout: Duration::from_secs(10),
        }
    }
}

/// A package directory and its manifest.
#[derive(Clone, Debug)]
pub struct Package {
    /// The directory.
    pub dir: PathBuf,
    /// The manifest as read (or written).
    pub manifest: SignedManifest,
}

/// Runs the plugin once and returns its announcement.
pub async fn read_announcement(
    binary: &Path,
    handshake_timeout: Duration,
) -> Result<Announcement, HubError> {
    let mut config = SpawnConfig::new(binary);
    config.handshake_timeout = handshake_timeout;
    let mut process = crate::retry_text_busy(|| spawn_plugin(&config)).await?;
    let announcement = process.client.announcement().clone();
    let _ = process.child.start_kill();
    let _ = tokio::time::timeout(Duration::from_secs(5), process.child.wait()).await;
    Ok(announcement)
}

/// Builds a package in `out` from `options`, signed with `key` when given.
pub async fn build(
    options: &PackageOptions,
    key: Option<&PublisherKey>,
    out: &Path,
) -> Result<Package, HubError> {
    // An absolute path, so a bare file name is not looked up in PATH.
    let binary = std::fs::canonicalize(&options.binary).map_err(HubError::io(&options.binary))?;
    let announcement = read_announcement(&binary, options.handshake_timeout).await?;
    let name = announcement.name.clone();
    if !valid_name(&name) {
        return Err(HubError::invalid(
            "plugin name",
            format!("`{name}`: use lower-case letters, digits, `-` and `_`"),
        ));
    }
    let version = options
        .version
        .clone()
        .unwrap_or_else(|| announcement.version.clone());
    semver::Version::parse(&version)
        .map_err(|e| HubError::invalid(format!("version `{version}` of {name}"), e))?;
    let min_orrery = options
        .min_orrery
        .clone()
        .unwrap_or_else(|| env!("CARGO_PKG_VERSION").to_owned());
    semver::Version::parse(&min_orrery)
        .map_err(|e| HubError::invalid(format!("minimum Orrery version `{min_orrery}`"), e))?;

    std::fs::create_dir_all(out).map_err(HubError::io(out))?;
    let mut artifacts = BTreeMap::new();
    let mut binaries = vec![(options.platform.clone(), binary.clone())];
    binaries.extend(options.extra_binaries.iter().cloned());
    for (platform, path) in &binaries {
        if platform.is_empty() || platform.contains(['/', '.']) {
            return Err(HubError::invalid("platform", format!("`{platform}`")));
        }
        let file = format!("{platform}/{}", binary_name(&name));
        let dest = out.join(&file);
        let dir = out.join(platform);
        std::fs::create_dir_all(&dir).map_err(HubError::io(&dir))?;
        std::fs::copy(path, &dest).map_err(HubError::io(path))?;
        let (sha256, size) = file_digest(&dest).await?;
        artifacts.insert(platform.clone(), Artifact { file, size, sha256 });
    }
    let schema_bytes =
        orrery_schema::encode(&announcement).map_err(|e| HubError::invalid("announcement", e))?;
    write_atomic(&out.join(SCHEMA_FILE), &schema_bytes)?;
    let schema = Artifact {
        file: SCHEMA_FILE.into(),
        size: schema_bytes.len() as u64,
        sha256: crate::sha256_hex(&schema_bytes),
    };

    let mut manifest = Manifest {
        format: MANIFEST_FORMAT,
        name,
        version,
        announced_version: announcement.version.clone(),
        namespace: announcement.namespace.clone(),
        protocol: announcement.protocol,
        min_orrery,
        license: options.license.clone(),
        summary: options.summary.clone(),
        resource_types: announcement
            .resources
            .iter()
            .map(|r| r.type_name.clone())
            .collect(),
        capabilities: announcement
            .capabilities
            .iter()
            .map(|c| c.to_string())
            .collect(),
        sdk: announcement.sdk.clone(),
        schema: Some(schema),
        artifacts,
        ..Manifest::default()
    };
    if let Some(key) = key {
        manifest.sign(key)?;
    }
    write_atomic(&out.join(MANIFEST_FILE), &manifest.to_json_pretty()?)?;
    Ok(Package {
        dir: out.to_owned(),
        manifest: SignedManifest::new(manifest)?,
    })
}

impl Package {
    /// Reads the package in `dir`.
    pub fn load(dir: &Path) -> Result<Package, HubError> {
        let path = dir.join(MANIFEST_FILE);
        let bytes = std::fs::read(&path).map_err(HubError::io(&path))?;
        let manifest = SignedManifest::from_slice(&bytes)
            .map_err(|e| HubError::invalid(path.display().to_string(), e))?;
        Ok(Package {
            dir: dir.to_owned(),
            manifest,
        })
    }

    /// Signs (or re-signs) the manifest with `key` and writes it back.
    pub fn sign(&mut self, key: &PublisherKey) -> Result<(), HubError> {
        let mut manifest = self.manifest.manifest.clone();
        manifest.sign(key)?;
        write_atomic(&self.dir.join(MANIFEST_FILE), &manifest.to_json_pretty()?)?;
        self.manifest = SignedManifest::new(manifest)?;
        Ok(())
    }

    /// Every file of the package with its manifest entry, the schema
    /// included, as `(label, path, artifact)`.
    pub fn files(&self) -> Vec<(String, PathBuf, Artifact)> {
        let m = &self.manifest.manifest;
        let mut files: Vec<_> = m
            .artifacts
            .iter()
            .map(|(platform, a)| (platform.clone(), self.dir.join(&a.file), a.clone()))
            .collect();
        if let Some(schema) = &m.schema {
            files.push(("schema".into(), self.dir.join(&schema.file), schema.clone()));
        }
        files
    }

    /// Checks every file against the manifest's size and SHA-256.
    pub async fn check_files(&self) -> Result<(), HubError> {
        let m = &self.manifest.manifest;
        for (label, path, artifact) in self.files() {
            if artifact.file.contains("..") || Path::new(&artifact.file).is_absolute() {
                return Err(HubError::invalid(
                    "manifest",
                    format!("file `{}` leaves the package directory", artifact.file),
                ));
            }
            let (sha256, size) = file_digest(&path).await?;
            if sha256 != artifact.sha256 || size != artifact.size {
                return Err(HubError::ArtifactTampered {
                    package: m.label(),
                    platform: label,
                    expected: artifact.sha256.clone(),
                    expected_size: artifact.size,
                    actual: sha256,
                    actual_size: size,
                });
            }
        }
        Ok(())
    }
}

/// Decodes a package's schema bytes into the announcement.
pub fn decode_schema(bytes: &[u8]) -> Result<Announcement, HubError> {
    orrery_schema::decode(bytes).map_err(|e| HubError::invalid("schema", e))
}
