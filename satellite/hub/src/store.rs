//! Where a hub keeps its bytes: JetStream, or a directory with the same
//! layout.
//!
//! | what | JetStream | directory |
//! |---|---|---|
//! | index entry `name.version` | key `name.version` in KV bucket [`INDEX_BUCKET`] | file `index/name.version.json` |
//! | artifact (binary, schema) | object named by its SHA-256 in object store bucket [`ARTIFACT_BUCKET`] | file `artifacts/<sha256>` |
//!
//! Index keys are [`index_key`]`(name, version)`; a `+` of semver build
//! metadata becomes `_` (KV keys may not contain `+`).
//!
//! This layer stores and fetches bytes; it checks nothing. Verification is
//! the installer's job, so a hub that was tampered with behind the
//! publisher's back (which tests simulate through this layer) is caught.

use std::path::{Path, PathBuf};

use futures::StreamExt;
use sha2::Digest;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::{hex, is_digest, temp_path, write_atomic, HubError};

/// The object store bucket holding artifacts by SHA-256.
pub const ARTIFACT_BUCKET: &str = "orrery-hub-artifacts";
/// The key-value bucket holding the index.
pub const INDEX_BUCKET: &str = "orrery-hub-index";
/// Chunk size of artifacts in the object store (below NATS's default 1 MiB
/// maximum payload).
pub const CHUNK_BYTES: usize = 512 * 1024;

/// The index key of `name` at `version`.
pub fn index_key(name: &str, version: &str) -> String {
    format!("{name}.{}", version.replace('+', "_"))
}

/// An index entry as stored, with a revision for compare-and-set.
#[derive(Clone, Debug)]
pub struct StoredEntry {
    /// The entry's JSON bytes.
    pub bytes: Vec<u8>,
    /// Its revision (KV revision; a content hash in a directory).
    pub revision: u64,
}

/// The hub's storage.
#[derive(Clone)]
pub enum HubStore {
    /// JetStream KV + object store.
    Nats(Box<NatsStore>),
    /// A directory.
    Dir(DirStore),
}

/// JetStream buckets.
#[derive(Clone)]
pub struct NatsStore {
    index: async_nats::jetstream::kv::Store,
    artifacts: async_nats::jetstream::object_store::ObjectStore,
}

/// A directory laid out like the JetStream buckets.
#[derive(Clone, Debug)]
pub struct DirStore {
    root: PathBuf,
}

impl NatsStore {
    /// Opens the buckets; creates them when `create` is set and they are
    /// missing (publishers create, installers only open).
    pub async fn open(client: async_nats::Client, create: bool) -> Result<NatsStore, HubError> {
        let js = async_nats::jetstream::new(client);
        let index = match js.get_key_value(INDEX_BUCKET).await {
            Ok(kv) => kv,
            Err(_) if create => js
                .create_key_value(async_nats::jetstream::kv::Config {
                    bucket: INDEX_BUCKET.into(),
                    description: "Orrery plugin hub index: name.version -> manifest".into(),
                    history: 5,
                    ..Default::default()
                })
                .await
                .map_err(|e| HubError::Storage(format!("creating bucket {INDEX_BUCKET}: {e}")))?,
            Err(e) => {
                return Err(HubError::Storage(format!(
                    "the hub has no index bucket {INDEX_BUCKET} (nothing published yet?): {e}"
                )))
            }
        };
        let artifacts = match js.get_object_store(ARTIFACT_BUCKET).await {
            Ok(store) => store,
            Err(_) if create => {
                js.create_object_store(async_nats::jetstream::object_store::Config {
                    bucket: ARTIFACT_BUCKET.into(),
                    description: Some("Orrery plugin hub artifacts by SHA-256".into()),
                    ..Default::default()
                })
                .await
                .map_err(|e| HubError::Storage(format!("creating bucket {ARTIFACT_BUCKET}: {e}")))?
            }
            Err(e) => {
                return Err(HubError::Storage(format!(
                    "the hub has no artifact bucket {ARTIFACT_BUCKET}: {e}"
                )))
            }
        };
        Ok(NatsStore { index, artifacts })
    }
}

impl DirStore {
    /// A directory hub rooted at `root` (created when missing).
    pub fn open(root: impl Into<PathBuf>) -> Result<DirStore, HubError> {
        let root = root.into();
        for sub in ["index", "artifacts"] {
            let dir = root.join(sub);
            std::fs::create_dir_all(&dir).map_err(HubError::io(&dir))?;
        }
        Ok(DirStore { root })
    }

    fn entry_path(&self, key: &str) -> PathBuf {
        self.root.join("index").join(format!("{key}.json"))
    }

    fn artifact_path(&self, digest: &str) -> PathBuf {
        self.root.join("artifacts").join(digest)
    }
}

fn content_revision(bytes: &[u8]) -> u64 {
    let d = sha2::Sha256::digest(bytes);
    u64::from_be_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]])
}

fn check_key(key: &str) -> Result<(), HubError> {
    let ok = !key.is_empty()
        && !key.starts_with('.')
        && !key.ends_with('.')
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'='));
    if ok {
        Ok(())
    } else {
        Err(HubError::invalid(
            "index key",
            format!("`{key}` is not a valid key"),
        ))
    }
}

fn check_digest(digest: &str) -> Result<(), HubError> {
    if is_digest(digest) {
        Ok(())
    } else {
        Err(HubError::invalid(
            "artifact name",
            format!("`{digest}` is not a SHA-256"),
        ))
    }
}

impl HubStore {
    /// The entry under `key`.
    pub async fn get_entry(&self, key: &str) -> Result<Option<StoredEntry>, HubError> {
        check_key(key)?;
        match self {
            HubStore::Nats(s) => {
                let entry = s.index.entry(key).await.map_err(HubError::storage)?;
                Ok(entry.and_then(|e| match e.operation {
                    async_nats::jetstream::kv::Operation::Put => Some(StoredEntry {
                        bytes: e.value.to_vec(),
                        revision: e.revision,
                    }),
                    _ => None,
                }))
            }
            HubStore::Dir(s) => {
                let path = s.entry_path(key);
                match std::fs::read(&path) {
                    Ok(bytes) => Ok(Some(StoredEntry {
                        revision: content_revision(&bytes),
                        bytes,
                    })),
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                    Err(e) => Err(HubError::Io { path, error: e }),
                }
            }
        }
    }

    /// Creates the entry; `Ok(false)` when one already exists (atomic: of
    /// two concurrent creators exactly one wins).
    pub async fn create_entry(&self, key: &str, bytes: &[u8]) -> Result<bool, HubError> {
        check_key(key)?;
        match self {
            HubStore::Nats(s) => match s.index.create(key, bytes.to_vec().into()).await {
                Ok(_) => Ok(true),
                Err(e) if e.kind() == async_nats::jetstream::kv::CreateErrorKind::AlreadyExists => {
                    Ok(false)
                }
                Err(e) => Err(HubError::storage(e)),
            },
            HubStore::Dir(s) => {
                use std::io::Write;
                let path = s.entry_path(key);
                // Write aside, then link into place: link fails if the
                // entry exists, so creation is atomic and never partial.
                let tmp = temp_path(&path);
                std::fs::write(&tmp, bytes).map_err(HubError::io(&tmp))?;
                let linked = std::fs::hard_link(&tmp, &path);
                let _ = std::fs::remove_file(&tmp);
                match linked {
                    Ok(()) => {
                        let _ = std::fs::File::open(&path).and_then(|mut f| f.flush());
                        Ok(true)
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    Err(e) => Err(HubError::Io { path, error: e }),
                }
            }
        }
    }

    /// Replaces the entry if it is still at `revision`.
    pub async fn update_entry(
        &self,
        key: &str,
        bytes: &[u8],
        revision: u64,
    ) -> Result<(), HubError> {
        check_key(key)?;
        match self {
            HubStore::Nats(s) => s
                .index
                .update(key, bytes.to_vec().into(), revision)
                .await
                .map(|_| ())
                .map_err(|e| HubError::Storage(format!("updating {key}: {e}"))),
            HubStore::Dir(s) => {
                let current = self.get_entry(key).await?;
                if current.map(|c| c.revision) != Some(revision) {
                    return Err(HubError::Storage(format!(
                        "updating {key}: changed concurrently, try again"
                    )));
                }
                write_atomic(&s.entry_path(key), bytes)
            }
        }
    }

    /// Writes the entry unconditionally. Low level: `publish` never
    /// overwrites; this exists for repair and for tests that play a
    /// compromised hub.
    pub async fn put_entry(&self, key: &str, bytes: &[u8]) -> Result<(), HubError> {
        check_key(key)?;
        match self {
            HubStore::Nats(s) => s
                .index
                .put(key, bytes.to_vec().into())
                .await
                .map(|_| ())
                .map_err(HubError::storage),
            HubStore::Dir(s) => write_atomic(&s.entry_path(key), bytes),
        }
    }

    /// Every index key.
    pub async fn keys(&self) -> Result<Vec<String>, HubError> {
        let mut keys = Vec::new();
        match self {
            HubStore::Nats(s) => {
                let mut stream = s.index.keys().await.map_err(HubError::storage)?;
                while let Some(key) = stream.next().await {
                    keys.push(key.map_err(HubError::storage)?);
                }
            }
            HubStore::Dir(s) => {
                let dir = s.root.join("index");
                for item in std::fs::read_dir(&dir).map_err(HubError::io(&dir))? {
                    let item = item.map_err(HubError::io(&dir))?;
                    let name = item.file_name().to_string_lossy().into_owned();
                    if let Some(key) = name.strip_suffix(".json") {
                        if !key.starts_with('.') {
                            keys.push(key.to_owned());
                        }
                    }
                }
            }
        }
        keys.sort();
        Ok(keys)
    }

    /// The stored size of artifact `digest`, if present.
    pub async fn artifact_size(&self, digest: &str) -> Result<Option<u64>, HubError> {
        check_digest(digest)?;
        match self {
            HubStore::Nats(s) => match s.artifacts.info(digest).await {
                Ok(info) if !info.deleted => Ok(Some(info.size as u64)),
                Ok(_) => Ok(None),
                Err(e)
                    if e.kind() == async_nats::jetstream::object_store::InfoErrorKind::NotFound =>
                {
                    Ok(None)
                }
                Err(e) => Err(HubError::storage(e)),
            },
            HubStore::Dir(s) => match std::fs::metadata(s.artifact_path(digest)) {
                Ok(m) => Ok(Some(m.len())),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
                Err(e) => Err(HubError::Io {
                    path: s.artifact_path(digest),
                    error: e,
                }),
            },
        }
    }

    /// Stores the file `src` as artifact `digest` (the caller has hashed
    /// it). Content-addressed, so storing it twice is harmless.
    pub async fn put_artifact(&self, digest: &str, src: &Path) -> Result<(), HubError> {
        check_digest(digest)?;
        let mut file = tokio::fs::File::open(src)
            .await
            .map_err(HubError::io(src))?;
        self.put_artifact_from(digest, &mut file).await
    }

    /// Stores bytes under artifact name `digest` without checking that
    /// they hash to it. Low level, for tests that tamper with a hub.
    pub async fn put_artifact_bytes(&self, digest: &str, bytes: &[u8]) -> Result<(), HubError> {
        check_digest(digest)?;
        let mut reader = bytes;
        self.put_artifact_from(digest, &mut reader).await
    }

    async fn put_artifact_from(
        &self,
        digest: &str,
        reader: &mut (impl tokio::io::AsyncRead + Unpin),
    ) -> Result<(), HubError> {
        match self {
            HubStore::Nats(s) => {
                let meta = async_nats::jetstream::object_store::ObjectMetadata {
                    name: digest.to_owned(),
                    chunk_size: Some(CHUNK_BYTES),
                    ..Default::default()
                };
                s.artifacts
                    .put(meta, reader)
                    .await
                    .map(|_| ())
                    .map_err(|e| HubError::Storage(format!("storing artifact {digest}: {e}")))
            }
            HubStore::Dir(s) => {
                let dest = s.artifact_path(digest);
                let tmp = temp_path(&dest);
                let mut out = tokio::fs::File::create(&tmp)
                    .await
                    .map_err(HubError::io(&tmp))?;
                tokio::io::copy(reader, &mut out)
                    .await
                    .map_err(HubError::io(&tmp))?;
                out.flush().await.map_err(HubError::io(&tmp))?;
                drop(out);
                tokio::fs::rename(&tmp, &dest)
                    .await
                    .map_err(HubError::io(&dest))
            }
        }
    }

    /// Streams artifact `digest` into the new file `dest`, hashing as it
    /// goes, and returns the SHA-256 and size of what arrived. Stops after
    /// `limit + 1` bytes, so an oversized artifact cannot fill the disk.
    pub async fn fetch_artifact(
        &self,
        digest: &str,
        dest: &Path,
        limit: u64,
    ) -> Result<(String, u64), HubError> {
        check_digest(digest)?;
        match self {
            HubStore::Nats(s) => {
                let object =
                    s.artifacts.get(digest).await.map_err(|e| {
                        HubError::Storage(format!("fetching artifact {digest}: {e}"))
                    })?;
                copy_hashing(object, dest, limit).await
            }
            HubStore::Dir(s) => {
                let src = s.artifact_path(digest);
                let file = tokio::fs::File::open(&src)
                    .await
                    .map_err(|e| HubError::Storage(format!("fetching artifact {digest}: {e}")))?;
                copy_hashing(file, dest, limit).await
            }
        }
    }
}

async fn copy_hashing(
    mut reader: impl tokio::io::AsyncRead + Unpin,
    dest: &Path,
    limit: u64,
) -> Result<(String, u64), HubError> {
    let mut out = tokio::fs::File::create(dest)
        .await
        .map_err(HubError::io(dest))?;
    let mut hasher = sha2::Sha256::new();
    let mut buf = vec![0u8; 256 * 1024];
    let mut size = 0u64;
    loop {
        let n = reader
            .read(&mut buf)
            .await
            .map_err(|e| HubError::Storage(format!("reading artifact: {e}")))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).await.map_err(HubError::io(dest))?;
        size += n as u64;
        if size > limit {
            break;
        }
    }
    out.flush().await.map_err(HubError::io(dest))?;
    out.sync_all().await.map_err(HubError::io(dest))?;
    Ok((hex(&hasher.finalize()), size))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn directory_store_creates_once_and_compares_and_sets() {
        let dir = tempfile::tempdir().unwrap();
        let store = HubStore::Dir(DirStore::open(dir.path()).unwrap());
        let key = index_key("local", "1.0.0+build.5");
        assert_eq!(key, "local.1.0.0_build.5");
        assert!(store.create_entry(&key, b"one").await.unwrap());
        assert!(!store.create_entry(&key, b"two").await.unwrap());
        let entry = store.get_entry(&key).await.unwrap().unwrap();
        assert_eq!(entry.bytes, b"one");
        store
            .update_entry(&key, b"three", entry.revision)
            .await
            .unwrap();
        assert!(store
            .update_entry(&key, b"four", entry.revision)
            .await
            .is_err());
        assert_eq!(store.keys().await.unwrap(), vec![key.clone()]);

        let digest = crate::sha256_hex(b"bytes");
        store.put_artifact_bytes(&digest, b"bytes").await.unwrap();
        assert_eq!(store.artifact_size(&digest).await.unwrap(), Some(5));
        let out = dir.path().join("out");
        let (sha, size) = store.fetch_artifact(&digest, &out, 100).await.unwrap();
        assert_eq!((sha, size), (digest, 5));
        assert!(store.get_entry("bad key").await.is_err());
    }
}
