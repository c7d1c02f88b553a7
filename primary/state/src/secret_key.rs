//! The key write-only and opaque values are hashed with, kept apart from
//! the store: in a key file (`<data-dir>/secret.key` for the embedded store,
//! or the file `ORRERY_SECRET_KEY_FILE` names, which is how several
//! primaries sharing one PostgreSQL database share one key). A copy of the
//! store alone then allows no offline guessing of the hashed values.
//!
//! The file holds the 32-byte key as 64 hexadecimal digits (and a newline),
//! and is created `0600`, atomically (written beside, then hard-linked into
//! place, so processes starting together agree on one key).
//!
//! Releases before this one kept the key in the store (`meta.secret_key`);
//! opening such a store writes the key out to the key file, then removes it
//! from the store, so the hashes already recorded stay valid. The store
//! keeps `meta.secret_key_check`, a keyed hash of a fixed text under the key
//! (useless to recover the key or guess a value): a key file that does not
//! belong to the store, or a missing one, is refused instead of silently
//! starting over with a new key.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use orrery_core::plan::SecretHasher;
use orrery_schema::Value;

use crate::StoreError;

/// The variable naming the key file (required to share a key between
/// primaries on one PostgreSQL database; overrides `<data-dir>/secret.key`).
pub const KEY_FILE_ENV: &str = "ORRERY_SECRET_KEY_FILE";

/// The key file's name in the embedded store's data directory.
pub const KEY_FILE_NAME: &str = "secret.key";

/// The legacy row holding the key in the store.
pub(crate) const LEGACY_ROW: &str = "secret_key";

/// The row holding the key's check value.
pub(crate) const CHECK_ROW: &str = "secret_key_check";

const KEY_LEN: usize = 32;

/// The key file named by `ORRERY_SECRET_KEY_FILE`, if set and not empty.
pub fn key_file_from_env() -> Option<PathBuf> {
    std::env::var_os(KEY_FILE_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The store's rows about its key, as each backend reads and writes them.
pub(crate) trait KeyRows {
    /// The value of `meta.<row>`.
    fn get(&mut self, row: &str) -> Result<Option<Vec<u8>>, StoreError>;
    /// Sets `meta.<row>` unless it is set already.
    fn put_if_absent(&mut self, row: &str, value: &[u8]) -> Result<(), StoreError>;
    /// Removes `meta.<row>` (its bytes overwritten where the backend can).
    fn delete(&mut self, row: &str) -> Result<(), StoreError>;
}

/// The check value of `key`.
pub(crate) fn check_of(key: &[u8]) -> Vec<u8> {
    SecretHasher::new(key.to_vec())
        .hash("orrery.secret_key_check", &Value::Null)
        .into_bytes()
}

fn key_error(path: &Path, reason: impl Into<String>) -> StoreError {
    StoreError::SecretKey {
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

fn foreign(path: &Path) -> StoreError {
    key_error(
        path,
        "holds another key than the one this store's values were hashed with",
    )
}

/// The key in the file at `path` for a store holding `legacy` (its key,
/// from before key files) and `check` (its check row): read, or created with
/// the legacy key or a new random one.
///
/// # Errors
///
/// [`StoreError::SecretKey`] when the file cannot be read or written, does
/// not hold a key, or holds another key than the store's, or when it is
/// missing while the store says its key was moved out already.
pub(crate) fn key_for(
    legacy: Option<&[u8]>,
    check: Option<&[u8]>,
    path: &Path,
) -> Result<Vec<u8>, StoreError> {
    let key = match read(path)? {
        Some(key) => key,
        None if legacy.is_none() && check.is_some() => {
            return Err(key_error(
                path,
                "missing, and this store's key was moved out of it into a key file: \
                 restore the key file (or point ORRERY_SECRET_KEY_FILE at it)",
            ))
        }
        None => {
            let key = match legacy {
                Some(k) => k.to_vec(),
                None => {
                    let mut key = vec![0u8; KEY_LEN];
                    getrandom::fill(&mut key)
                        .map_err(|e| key_error(path, format!("no randomness for a key: {e}")))?;
                    key
                }
            };
            create(path, &key)?
        }
    };
    if legacy.is_some_and(|l| l != key.as_slice()) {
        return Err(foreign(path));
    }
    verify(path, &key, check)?;
    Ok(key)
}

/// Fails when the store's check row says `key` is not its key.
pub(crate) fn verify(path: &Path, key: &[u8], check: Option<&[u8]>) -> Result<(), StoreError> {
    match check {
        Some(c) if c != check_of(key).as_slice() => Err(foreign(path)),
        _ => Ok(()),
    }
}

/// Whether a store with these rows has its key in a key file (so a backend
/// without one configured must refuse rather than make a new key).
pub(crate) fn moved_out(legacy: Option<&[u8]>, check: Option<&[u8]>) -> bool {
    legacy.is_none() && check.is_some()
}

/// The store's key, from the key file at `path` (see [`key_for`]); the
/// check row written when missing, the legacy row removed.
///
/// # Errors
///
/// As [`key_for`], and the store's errors.
pub(crate) fn resolve(rows: &mut dyn KeyRows, path: &Path) -> Result<Vec<u8>, StoreError> {
    let legacy = rows.get(LEGACY_ROW)?;
    let check = rows.get(CHECK_ROW)?;
    let key = key_for(legacy.as_deref(), check.as_deref(), path)?;
    rows.put_if_absent(CHECK_ROW, &check_of(&key))?;
    verify(path, &key, rows.get(CHECK_ROW)?.as_deref())?;
    if legacy.is_some() {
        rows.delete(LEGACY_ROW)?;
        moved_log(path);
    }
    Ok(key)
}

/// Logs that the key left the store.
pub(crate) fn moved_log(path: &Path) {
    tracing::info!(key_file = %path.display(), "moved the secret key out of the state store into its key file");
}

/// The key in the file at `path`, `None` when there is no file.
fn read(path: &Path) -> Result<Option<Vec<u8>>, StoreError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(key_error(path, format!("cannot read: {e}"))),
    };
    tighten(path, 0o600);
    decode_hex(text.trim())
        .filter(|k| k.len() == KEY_LEN)
        .map(Some)
        .ok_or_else(|| key_error(path, "does not hold a key (64 hexadecimal digits)"))
}

/// Writes `key` to `path` unless a file is there already; the key in the
/// file either way.
fn create(path: &Path, key: &[u8]) -> Result<Vec<u8>, StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&temp)?;
        f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
        f.write_all(format!("{}\n", encode_hex(key)).as_bytes())?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(key_error(path, format!("cannot write: {e}")));
    }
    let linked = std::fs::hard_link(&temp, path);
    let _ = std::fs::remove_file(&temp);
    match linked {
        Ok(()) => Ok(key.to_vec()),
        // Another process made it first: its key is the key.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read(path)?.ok_or_else(|| key_error(path, "vanished while it was being created"))
        }
        Err(e) => Err(key_error(path, format!("cannot create: {e}"))),
    }
}

/// Narrows `path`'s permissions to `mode` when they are wider, with a
/// warning (no-op when the path does not exist).
pub(crate) fn tighten(path: &Path, mode: u32) {
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let current = meta.permissions().mode() & 0o777;
    if current & !mode == 0 {
        return;
    }
    match std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)) {
        Ok(()) => tracing::warn!(
            path = %path.display(),
            was = format!("{current:o}"),
            now = format!("{mode:o}"),
            "tightened permissions that let other users read Orrery's state"
        ),
        Err(e) => tracing::warn!(
            path = %path.display(),
            mode = format!("{current:o}"),
            error = %e,
            "permissions let other users read Orrery's state and cannot be narrowed"
        ),
    }
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if text.len() & 1 == 1 || !text.is_ascii() {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Rows(BTreeMap<String, Vec<u8>>);

    impl KeyRows for Rows {
        fn get(&mut self, row: &str) -> Result<Option<Vec<u8>>, StoreError> {
            Ok(self.0.get(row).cloned())
        }
        fn put_if_absent(&mut self, row: &str, value: &[u8]) -> Result<(), StoreError> {
            self.0.entry(row.into()).or_insert_with(|| value.to_vec());
            Ok(())
        }
        fn delete(&mut self, row: &str) -> Result<(), StoreError> {
            self.0.remove(row);
            Ok(())
        }
    }

    #[test]
    fn a_legacy_key_moves_out_once_and_a_foreign_or_missing_file_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let mut rows = Rows::default();
        rows.0.insert(LEGACY_ROW.into(), (0u8..32).collect());
        let key = resolve(&mut rows, &path).unwrap();
        assert_eq!(key, (0u8..32).collect::<Vec<_>>());
        assert!(!rows.0.contains_key(LEGACY_ROW), "removed from the store");
        assert!(moved_out(
            rows.0.get(LEGACY_ROW).map(Vec::as_slice),
            rows.0.get(CHECK_ROW).map(Vec::as_slice)
        ));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        assert_eq!(resolve(&mut rows, &path).unwrap(), key, "stable");

        std::fs::write(&path, format!("{}\n", encode_hex(&[7u8; 32]))).unwrap();
        assert!(matches!(
            resolve(&mut rows, &path),
            Err(StoreError::SecretKey { .. })
        ));
        std::fs::remove_file(&path).unwrap();
        assert!(matches!(
            resolve(&mut rows, &path),
            Err(StoreError::SecretKey { .. })
        ));
        std::fs::write(&path, "not a key").unwrap();
        assert!(matches!(
            resolve(&mut rows, &path),
            Err(StoreError::SecretKey { .. })
        ));
    }

    #[test]
    fn a_new_store_gets_a_random_key_and_a_too_open_file_is_narrowed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(KEY_FILE_NAME);
        let mut rows = Rows::default();
        let key = resolve(&mut rows, &path).unwrap();
        assert_eq!(key.len(), 32);
        assert!(key.iter().any(|b| *b != 0));
        assert!(!rows.0.contains_key(LEGACY_ROW));
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(resolve(&mut rows, &path).unwrap(), key);
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }
}
