//! The hub's operations: publish, search, info, versions, yank, download,
//! mirror. Works the same over JetStream and over a directory.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use orrery_schema::Announcement;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::keys::{PublisherKey, TrustedKeys};
use crate::manifest::{valid_name, Artifact, SignedManifest};
use crate::package::{decode_schema, Package};
use crate::store::{index_key, DirStore, HubStore, NatsStore};
use crate::yank::{deciding, SignedYank, YankStatement};
use crate::{temp_path, HubError};

/// The largest artifact the hub hands out (1 GiB).
pub const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

/// An index entry as stored: the signed manifest, verbatim, the signed
/// yank statements made about it, and the hub's own bookkeeping.
///
/// `yanked` and `yank_reason` are the unsigned flag of entries written
/// before yanks were signed. This build still writes them (the state of the
/// newest statement, for older satellites) but never believes them.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct EntryDoc {
    manifest: Json,
    yanked: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    yank_reason: String,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    yanks: Vec<Json>,
    published_ms: u64,
}

/// One published version.
#[derive(Clone, Debug)]
pub struct IndexEntry {
    /// The manifest, as signed by the publisher.
    pub manifest: SignedManifest,
    /// The signed yank and un-yank statements about this version, as
    /// stored (unverified: see [`IndexEntry::yank_state`]).
    pub yanks: Vec<SignedYank>,
    /// The entry's unsigned `yanked` flag (written by older builds and, for
    /// them, by this one). Never decides anything; shown when it disagrees.
    pub legacy_yanked: bool,
    /// The reason stored with the unsigned flag.
    pub legacy_yank_reason: String,
    /// When it was published (ms since the Unix epoch).
    pub published_ms: u64,
    /// Its parsed version.
    pub version: semver::Version,
    revision: u64,
}

impl IndexEntry {
    fn parse(bytes: &[u8], revision: u64) -> Result<IndexEntry, HubError> {
        let doc: EntryDoc =
            serde_json::from_slice(bytes).map_err(|e| HubError::invalid("index entry", e))?;
        let manifest = SignedManifest::from_json(doc.manifest)?;
        let version = manifest.manifest.semver()?;
        let mut yanks = Vec::new();
        for raw in doc.yanks {
            match SignedYank::from_json(raw) {
                Ok(y) => yanks.push(y),
                Err(e) => tracing::warn!(plugin = %manifest.manifest.label(), error = %e,
                    "unreadable yank statement; ignored"),
            }
        }
        Ok(IndexEntry {
            manifest,
            yanks,
            legacy_yanked: doc.yanked,
            legacy_yank_reason: doc.yank_reason,
            published_ms: doc.published_ms,
            version,
            revision,
        })
    }

    fn to_bytes(&self) -> Result<Vec<u8>, HubError> {
        let doc = EntryDoc {
            manifest: self.manifest.json().clone(),
            yanked: self.legacy_yanked,
            yank_reason: self.legacy_yank_reason.clone(),
            yanks: self.yanks.iter().map(|y| y.json().clone()).collect(),
            published_ms: self.published_ms,
        };
        serde_json::to_vec(&doc).map_err(|e| HubError::invalid("index entry", e))
    }

    /// `name@version`.
    pub fn label(&self) -> String {
        self.manifest.manifest.label()
    }

    /// The statement that decides whether this version is yanked, for an
    /// operator trusting `trusted`: the newest statement about exactly this
    /// name and version signed by a key trusted for the plugin. `None`
    /// means not yanked. Forged, edited and untrusted statements, and the
    /// unsigned flag, are ignored (and logged at WARN).
    pub fn yank_state(&self, trusted: &TrustedKeys) -> Option<&YankStatement> {
        let m = &self.manifest.manifest;
        let decided = deciding(&self.yanks, |y| {
            match y.verify(trusted, &m.name, &m.version) {
                Ok(()) => true,
                Err(e) => {
                    tracing::warn!(plugin = %m.label(), error = %e, "ignoring a yank statement");
                    false
                }
            }
        })
        .map(|y| &y.statement);
        let yanked = decided.is_some_and(|s| s.yanked);
        if self.legacy_yanked != yanked {
            tracing::warn!(plugin = %m.label(), unsigned_flag = self.legacy_yanked, signed_state = yanked,
                "the index entry's unsigned yanked flag disagrees with its signed yank statements; the flag is ignored");
        }
        decided
    }

    /// Whether this version is yanked for an operator trusting `trusted`.
    pub fn is_yanked(&self, trusted: &TrustedKeys) -> bool {
        self.yank_state(trusted).is_some_and(|s| s.yanked)
    }

    /// The yank state as the statements claim it, checking each signature
    /// only against the key it carries: for listings made without trusted
    /// keys (`orrery hub info`, `versions`, `search`). Never a basis for
    /// installing.
    pub fn claimed_yank(&self) -> Option<&YankStatement> {
        let m = &self.manifest.manifest;
        deciding(&self.yanks, |y| {
            y.statement.name == m.name
                && y.statement.version == m.version
                && y.verify_self_consistent().is_ok()
        })
        .map(|y| &y.statement)
    }

    /// Whether the statements claim this version is yanked (see
    /// [`IndexEntry::claimed_yank`]).
    pub fn claims_yanked(&self) -> bool {
        self.claimed_yank().is_some_and(|s| s.yanked)
    }

    /// Refuses an entry whose manifest is not the one its key names.
    fn check_key(&self, key: &str, name: &str, version: &str) -> Result<(), HubError> {
        let m = &self.manifest.manifest;
        if m.name == name && m.version == version && index_key(&m.name, &m.version) == key {
            Ok(())
        } else {
            Err(HubError::EntryMismatch {
                key: key.to_owned(),
                name: name.to_owned(),
                version: version.to_owned(),
                found: m.label(),
            })
        }
    }
}

/// What `publish` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishOutcome {
    /// The version is new on the hub.
    Published,
    /// The hub already had exactly this content; nothing changed.
    AlreadyPublished,
}

/// A hub.
#[derive(Clone)]
pub struct Hub {
    store: HubStore,
}

impl Hub {
    /// The hub on JetStream, creating its buckets if missing (publishers).
    pub async fn nats(client: async_nats::Client) -> Result<Hub, HubError> {
        Ok(Hub {
            store: HubStore::Nats(Box::new(NatsStore::open(client, true).await?)),
        })
    }

    /// The hub on JetStream, without creating anything (installers, which
    /// may only have read permissions).
    pub async fn nats_existing(client: async_nats::Client) -> Result<Hub, HubError> {
        Ok(Hub {
            store: HubStore::Nats(Box::new(NatsStore::open(client, false).await?)),
        })
    }

    /// The hub in a directory (created when missing).
    pub fn dir(path: impl AsRef<Path>) -> Result<Hub, HubError> {
        Ok(Hub {
            store: HubStore::Dir(DirStore::open(path.as_ref())?),
        })
    }

    /// The storage layer (low level).
    pub fn store(&self) -> &HubStore {
        &self.store
    }

    /// Publishes a package: checks it is signed and intact, uploads its
    /// artifacts, then creates its index entry. Publishing the same content
    /// again is a no-op; different content under a published version is
    /// refused with [`HubError::RepublishConflict`].
    pub async fn publish(&self, package: &Package) -> Result<PublishOutcome, HubError> {
        let signed = &package.manifest;
        let m = &signed.manifest;
        if !valid_name(&m.name) {
            return Err(HubError::invalid("plugin name", format!("`{}`", m.name)));
        }
        m.semver()?;
        if m.artifacts.is_empty() {
            return Err(HubError::invalid(m.label(), "the package has no binaries"));
        }
        signed.verify_self_consistent()?;
        package.check_files().await?;
        let key = index_key(&m.name, &m.version);
        if let Some(existing) = self.store.get_entry(&key).await? {
            return self.same_or_conflict(package, &existing.bytes).await;
        }
        for (_, path, artifact) in package.files() {
            if self.store.artifact_size(&artifact.sha256).await? != Some(artifact.size) {
                self.store.put_artifact(&artifact.sha256, &path).await?;
            }
        }
        let entry = EntryDoc {
            manifest: signed.json().clone(),
            published_ms: now_ms(),
            ..EntryDoc::default()
        };
        let bytes = serde_json::to_vec(&entry).map_err(|e| HubError::invalid("index entry", e))?;
        if self.store.create_entry(&key, &bytes).await? {
            tracing::info!(plugin = %m.name, version = %m.version, "published");
            Ok(PublishOutcome::Published)
        } else {
            // Someone published this version between our read and create.
            let existing = self
                .store
                .get_entry(&key)
                .await?
                .ok_or_else(|| HubError::Storage(format!("{key} vanished while publishing")))?;
            self.same_or_conflict(package, &existing.bytes).await
        }
    }

    async fn same_or_conflict(
        &self,
        package: &Package,
        existing: &[u8],
    ) -> Result<PublishOutcome, HubError> {
        let m = &package.manifest.manifest;
        let offered = package.manifest.content_digest()?;
        let published = match IndexEntry::parse(existing, 0) {
            Ok(entry) => entry.manifest.content_digest()?,
            Err(_) => "unreadable".to_owned(),
        };
        if published != offered {
            return Err(HubError::RepublishConflict {
                name: m.name.clone(),
                version: m.version.clone(),
                published,
                offered,
            });
        }
        // Same content: make sure every artifact is really there (a
        // publish interrupted after the index write cannot happen, but a
        // pruned bucket can).
        for (_, path, artifact) in package.files() {
            if self.store.artifact_size(&artifact.sha256).await? != Some(artifact.size) {
                self.store.put_artifact(&artifact.sha256, &path).await?;
            }
        }
        Ok(PublishOutcome::AlreadyPublished)
    }

    /// Every published version of `name`, oldest first. Entries that do
    /// not parse are skipped with a warning.
    pub async fn versions(&self, name: &str) -> Result<Vec<IndexEntry>, HubError> {
        let prefix = format!("{name}.");
        let mut entries = Vec::new();
        for key in self.store.keys().await? {
            if !key.starts_with(&prefix) {
                continue;
            }
            let Some(stored) = self.store.get_entry(&key).await? else {
                continue;
            };
            match IndexEntry::parse(&stored.bytes, stored.revision) {
                Ok(entry)
                    if entry.manifest.manifest.name == name
                        && index_key(name, &entry.manifest.manifest.version) == key =>
                {
                    entries.push(entry)
                }
                Ok(entry) => tracing::warn!(%key, found = %entry.label(),
                    "index entry holds the manifest of another plugin or version; skipped"),
                Err(e) => tracing::warn!(%key, error = %e, "unreadable index entry; skipped"),
            }
        }
        if entries.is_empty() {
            return Err(HubError::PluginNotFound {
                name: name.to_owned(),
            });
        }
        entries.sort_by(|a, b| a.version.cmp(&b.version));
        Ok(entries)
    }

    /// One version. Refused with [`HubError::EntryMismatch`] when the
    /// entry holds the manifest of another plugin or version.
    pub async fn entry(&self, name: &str, version: &str) -> Result<IndexEntry, HubError> {
        let key = index_key(name, version);
        match self.store.get_entry(&key).await? {
            Some(stored) => {
                let entry = IndexEntry::parse(&stored.bytes, stored.revision)?;
                entry.check_key(&key, name, version)?;
                Ok(entry)
            }
            None => {
                // Tell "no such plugin" from "no such version".
                self.versions(name).await?;
                Err(HubError::VersionNotFound {
                    name: name.to_owned(),
                    version: version.to_owned(),
                })
            }
        }
    }

    /// The newest version of every plugin whose name, summary, namespace or
    /// resource types contain `text` (case-insensitive; empty matches all).
    /// The newest version not claimed yanked is shown when there is one.
    pub async fn search(&self, text: &str) -> Result<Vec<IndexEntry>, HubError> {
        let needle = text.to_lowercase();
        let mut names: Vec<String> = self
            .store
            .keys()
            .await?
            .into_iter()
            .filter_map(|k| k.split_once('.').map(|(n, _)| n.to_owned()))
            .collect();
        names.dedup();
        let mut found = Vec::new();
        for name in names {
            let Ok(mut versions) = self.versions(&name).await else {
                continue;
            };
            let pick = match versions.iter().rposition(|e| !e.claims_yanked()) {
                Some(i) => versions.swap_remove(i),
                None => match versions.pop() {
                    Some(e) => e,
                    None => continue,
                },
            };
            let m = &pick.manifest.manifest;
            let haystack = format!(
                "{}\n{}\n{}\n{}",
                m.name,
                m.summary,
                m.namespace,
                m.resource_types.join("\n")
            )
            .to_lowercase();
            if haystack.contains(&needle) {
                found.push(pick);
            }
        }
        Ok(found)
    }

    /// Yanks a version (or, with `yanked == false`, un-yanks it): appends a
    /// statement signed with `key`, numbered after every statement already
    /// there whose signature holds, so it is the newest. Whether it counts
    /// is up to each installer: only keys trusted for the plugin do.
    pub async fn yank(
        &self,
        name: &str,
        version: &str,
        yanked: bool,
        reason: &str,
        key: &PublisherKey,
    ) -> Result<(), HubError> {
        for _ in 0..5 {
            let mut entry = self.entry(name, version).await?;
            let sequence = entry
                .yanks
                .iter()
                .filter(|y| y.verify_self_consistent().is_ok())
                .map(|y| y.statement.sequence)
                .max()
                .unwrap_or(0)
                .checked_add(1)
                .ok_or_else(|| {
                    HubError::invalid(format!("yank of {name}@{version}"), "sequence exhausted")
                })?;
            let statement = SignedYank::sign(
                YankStatement {
                    name: name.to_owned(),
                    version: version.to_owned(),
                    yanked,
                    reason: reason.to_owned(),
                    sequence,
                    issued_ms: now_ms(),
                    ..YankStatement::default()
                },
                key,
            )?;
            entry.yanks.push(statement);
            // The unsigned flag, for satellites older than signed yanks.
            entry.legacy_yanked = yanked;
            entry.legacy_yank_reason = if yanked {
                reason.to_owned()
            } else {
                String::new()
            };
            let key = index_key(name, version);
            match self
                .store
                .update_entry(&key, &entry.to_bytes()?, entry.revision)
                .await
            {
                Ok(()) => return Ok(()),
                Err(e) => tracing::debug!(error = %e, "yank raced another writer; retrying"),
            }
        }
        Err(HubError::Storage(format!(
            "{name}@{version} kept changing; yank not applied"
        )))
    }

    /// Streams `artifact` into the new file `dest`; returns the SHA-256 and
    /// size of what arrived (the caller compares them with the manifest).
    pub async fn download(
        &self,
        artifact: &Artifact,
        dest: &Path,
    ) -> Result<(String, u64), HubError> {
        let limit = artifact.size.min(MAX_ARTIFACT_BYTES);
        self.store
            .fetch_artifact(&artifact.sha256, dest, limit)
            .await
    }

    /// The announcement (full resource schemas) of a published version,
    /// checked against the manifest's digest.
    pub async fn schema(&self, entry: &IndexEntry) -> Result<Option<Announcement>, HubError> {
        let m = &entry.manifest.manifest;
        let Some(schema) = &m.schema else {
            return Ok(None);
        };
        let dir = std::env::temp_dir();
        let dest = temp_path(&dir.join(format!("orrery-schema-{}", schema.sha256)));
        let result = self.download(schema, &dest).await;
        let bytes = std::fs::read(&dest);
        let _ = std::fs::remove_file(&dest);
        let (sha256, size) = result?;
        if sha256 != schema.sha256 || size != schema.size {
            return Err(HubError::ArtifactTampered {
                package: m.label(),
                platform: "schema".into(),
                expected: schema.sha256.clone(),
                expected_size: schema.size,
                actual: sha256,
                actual_size: size,
            });
        }
        let bytes = bytes.map_err(HubError::io(&dest))?;
        decode_schema(&bytes).map(Some)
    }

    /// The schemas `name@version` was published with, vouched for by its
    /// publisher: the index entry's manifest must be the one whose content
    /// digest is `manifest_digest` (what a satellite running the package
    /// names) and verify with a key `trusted` holds for the plugin
    /// ([`SignedManifest::verify`], checked first), and carry a schema whose bytes match
    /// its digest ([`Hub::schema`]) and that announces the plugin `name`.
    ///
    /// This is how a primary learns which schema to plan with; installs
    /// check the same signature with the same code.
    pub async fn signed_schema(
        &self,
        name: &str,
        version: &str,
        manifest_digest: &str,
        trusted: &TrustedKeys,
    ) -> Result<Announcement, HubError> {
        let entry = self.entry(name, version).await?;
        // The signature first: nothing an untrusted manifest names (its
        // schema's size, its digest) is acted on.
        entry.manifest.verify(trusted)?;
        let published = entry.manifest.content_digest()?;
        if published != manifest_digest {
            return Err(HubError::ManifestMismatch {
                plugin: name.to_owned(),
                version: version.to_owned(),
                claimed: manifest_digest.to_owned(),
                published,
            });
        }
        let missing = || HubError::SchemaMissing {
            plugin: name.to_owned(),
            version: version.to_owned(),
        };
        let announcement = self.schema(&entry).await?.ok_or_else(missing)?;
        if announcement.name != name {
            return Err(HubError::invalid(
                entry.label(),
                format!("its signed schema announces plugin `{}`", announcement.name),
            ));
        }
        Ok(announcement)
    }

    /// Copies every index entry and artifact this hub has and `dest` lacks
    /// (for example from JetStream into a directory carried to an
    /// air-gapped site). Entries are copied verbatim, signatures intact.
    /// Returns how many entries were copied.
    pub async fn mirror_to(&self, dest: &Hub) -> Result<usize, HubError> {
        let mut copied = 0;
        let scratch = std::env::temp_dir();
        for key in self.store.keys().await? {
            let Some(stored) = self.store.get_entry(&key).await? else {
                continue;
            };
            let entry = match IndexEntry::parse(&stored.bytes, stored.revision) {
                Ok(e) => e,
                Err(e) => {
                    tracing::warn!(%key, error = %e, "unreadable index entry; not mirrored");
                    continue;
                }
            };
            if index_key(
                &entry.manifest.manifest.name,
                &entry.manifest.manifest.version,
            ) != key
            {
                tracing::warn!(%key, found = %entry.label(),
                    "index entry holds the manifest of another plugin or version; not mirrored");
                continue;
            }
            let m = &entry.manifest.manifest;
            let mut artifacts: Vec<&Artifact> = m.artifacts.values().collect();
            artifacts.extend(m.schema.as_ref());
            for artifact in artifacts {
                if dest.store.artifact_size(&artifact.sha256).await? == Some(artifact.size) {
                    continue;
                }
                let tmp = temp_path(&scratch.join(format!("orrery-mirror-{}", artifact.sha256)));
                let fetched = self.download(artifact, &tmp).await;
                let result = match fetched {
                    Ok((sha, size)) if sha == artifact.sha256 && size == artifact.size => {
                        dest.store.put_artifact(&artifact.sha256, &tmp).await
                    }
                    Ok((sha, size)) => Err(HubError::ArtifactTampered {
                        package: m.label(),
                        platform: artifact.file.clone(),
                        expected: artifact.sha256.clone(),
                        expected_size: artifact.size,
                        actual: sha,
                        actual_size: size,
                    }),
                    Err(e) => Err(e),
                };
                let _ = std::fs::remove_file(&tmp);
                result?;
            }
            if dest.store.create_entry(&key, &stored.bytes).await? {
                copied += 1;
            } else if let Some(there) = dest.store.get_entry(&key).await? {
                // Carry yank statements across (adding, never removing);
                // never replace a manifest.
                if let Ok(mut theirs) = IndexEntry::parse(&there.bytes, there.revision) {
                    if theirs.manifest.content_digest()? == entry.manifest.content_digest()? {
                        let mut changed = false;
                        for y in &entry.yanks {
                            if !theirs.yanks.contains(y) {
                                theirs.yanks.push(y.clone());
                                changed = true;
                            }
                        }
                        if theirs.legacy_yanked != entry.legacy_yanked {
                            theirs.legacy_yanked = entry.legacy_yanked;
                            theirs.legacy_yank_reason = entry.legacy_yank_reason.clone();
                            changed = true;
                        }
                        if changed {
                            dest.store
                                .update_entry(&key, &theirs.to_bytes()?, theirs.revision)
                                .await?;
                        }
                    }
                }
            }
        }
        Ok(copied)
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
