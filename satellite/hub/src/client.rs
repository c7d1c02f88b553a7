//! The hub's operations: publish, search, info, versions, yank, download,
//! mirror. Works the same over JetStream and over a directory.

use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

use orrery_schema::Announcement;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::manifest::{valid_name, Artifact, SignedManifest};
use crate::package::{decode_schema, Package};
use crate::store::{index_key, DirStore, HubStore, NatsStore};
use crate::{temp_path, HubError};

/// The largest artifact the hub hands out (1 GiB).
pub const MAX_ARTIFACT_BYTES: u64 = 1 << 30;

/// An index entry as stored: the signed manifest, verbatim, plus the hub's
/// own (unsigned) bookkeeping.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
struct EntryDoc {
    manifest: Json,
    yanked: bool,
    #[serde(skip_serializing_if = "String::is_empty")]
    yank_reason: String,
    published_ms: u64,
}

/// One published version.
#[derive(Clone, Debug)]
pub struct IndexEntry {
    /// The manifest, as signed by the publisher.
    pub manifest: SignedManifest,
    /// Not chosen for new installs (a pinned install still gets it).
    pub yanked: bool,
    /// Why it was yanked.
    pub yank_reason: String,
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
        Ok(IndexEntry {
            manifest,
            yanked: doc.yanked,
            yank_reason: doc.yank_reason,
            published_ms: doc.published_ms,
            version,
            revision,
        })
    }

    fn to_bytes(&self) -> Result<Vec<u8>, HubError> {
        let doc = EntryDoc {
            manifest: self.manifest.json().clone(),
            yanked: self.yanked,
            yank_reason: self.yank_reason.clone(),
            published_ms: self.published_ms,
        };
        serde_json::to_vec(&doc).map_err(|e| HubError::invalid("index entry", e))
    }

    /// `name@version`.
    pub fn label(&self) -> String {
        self.manifest.manifest.label()
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
            yanked: false,
            yank_reason: String::new(),
            published_ms: now_ms(),
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
                Ok(entry) if entry.manifest.manifest.name == name => entries.push(entry),
                Ok(_) => tracing::warn!(%key, "index entry names another plugin; skipped"),
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

    /// One version.
    pub async fn entry(&self, name: &str, version: &str) -> Result<IndexEntry, HubError> {
        let key = index_key(name, version);
        match self.store.get_entry(&key).await? {
            Some(stored) => IndexEntry::parse(&stored.bytes, stored.revision),
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
    /// The newest non-yanked version is shown when there is one.
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
            let pick = match versions.iter().rposition(|e| !e.yanked) {
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

    /// Marks a version yanked (or, with `yanked == false`, not yanked).
    pub async fn yank(
        &self,
        name: &str,
        version: &str,
        yanked: bool,
        reason: &str,
    ) -> Result<(), HubError> {
        for _ in 0..5 {
            let mut entry = self.entry(name, version).await?;
            entry.yanked = yanked;
            entry.yank_reason = if yanked {
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
                // Carry yank state across; never replace a manifest.
                if let Ok(mut theirs) = IndexEntry::parse(&there.bytes, there.revision) {
                    if theirs.manifest.content_digest()? == entry.manifest.content_digest()?
                        && theirs.yanked != entry.yanked
                    {
                        theirs.yanked = entry.yanked;
                        theirs.yank_reason = entry.yank_reason.clone();
                        dest.store
                            .update_entry(&key, &theirs.to_bytes()?, theirs.revision)
                            .await?;
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
