//! One server per embedded store: SQLite is for one machine and one
//! server, so `orrery primary` (and `orrery up`) holds an exclusive lock
//! on `primary.lock` in the data directory for as long as it serves. A
//! second one on the same directory is refused at start, naming the first
//! one's process. CLIs do not take it: they are serialised per stack by
//! the stack's lease. The lock is the kernel's (`flock`), so it goes with
//! the process however it ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

use crate::StoreError;

/// The lock file's name in the data directory.
pub const LOCK_FILE: &str = "primary.lock";

/// The lock, held until dropped.
#[derive(Debug)]
pub struct ServeLock {
    _file: File,
}

/// Takes the serving lock of data directory `dir` (which must exist).
///
/// # Errors
///
/// [`StoreError::Served`] when another process holds it; [`StoreError::Dir`]
/// when the lock file cannot be opened.
pub fn serve_lock(dir: &Path) -> Result<ServeLock, StoreError> {
    let path = dir.join(LOCK_FILE);
    let io = |source| StoreError::Dir {
        path: path.display().to_string(),
        source,
    };
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(io)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            let mut holder = String::new();
            // The holder wrote its pid; a short read is still an answer.
            let _ = Read::by_ref(&mut file).take(32).read_to_string(&mut holder);
            return Err(StoreError::Served {
                dir: dir.display().to_string(),
                holder: holder.trim().to_owned(),
            });
        }
        Err(TryLockError::Error(e)) => return Err(io(e)),
    }
    file.set_len(0).map_err(io)?;
    file.rewind().map_err(io)?;
    write!(file, "{}", std::process::id()).map_err(io)?;
    Ok(ServeLock { _file: file })
}
