//! The walk behind `list`: every entry of a kind under the root.

use rustix::fs::FileType;
use rustix::io::Errno;

use crate::beneath::Dir;
use crate::error::FsError;
use crate::id::Name;
use crate::kind::Kind;

/// The ids of every entry of `kind` under `root`, in no particular order.
/// Each subdirectory is opened by name beneath the one listing it, never
/// through a symlink: symlinked directories are not descended into, and a
/// directory swapped for a link during the walk is skipped, not followed.
/// Subdirectories that cannot be read are skipped with a warning.
pub fn walk(root: &Dir, kind: Kind) -> Result<Vec<String>, FsError> {
    let mut found = Vec::new();
    walk_dir(root, "", kind, &mut found).map_err(|e| FsError::at(".", e))?;
    Ok(found)
}

/// Adds the entries of `dir` (whose id is `prefix`) and of its
/// subdirectories to `found`; fails only when `dir` itself cannot be read.
fn walk_dir(dir: &Dir, prefix: &str, kind: Kind, found: &mut Vec<String>) -> Result<(), Errno> {
    let mut entries = dir.entries()?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        // A name that is not UTF-8 cannot be a native id; `.` and `..` are
        // not names.
        let Some(name) = entry.file_name().to_str().ok().and_then(Name::new) else {
            continue;
        };
        let rel = if prefix.is_empty() {
            name.as_str().to_owned()
        } else {
            format!("{prefix}/{}", name.as_str())
        };
        let entry_kind = match entry.file_type() {
            // Some file systems leave the type out of directory entries.
            FileType::Unknown => match dir.stat(name) {
                Ok(stat) => Kind::of_stat(&stat),
                Err(_) => continue, // gone since the listing
            },
            file_type => Kind::of(file_type),
        };
        if entry_kind == Some(Kind::Directory) {
            let walked = dir
                .subdir(name)
                .and_then(|sub| walk_dir(&sub, &rel, kind, found));
            if let Err(e) = walked {
                tracing::warn!(directory = rel, error = %e, "skipping a directory that cannot be read");
            }
        }
        if entry_kind == Some(kind) {
            found.push(rel);
        }
    }
    Ok(())
}
