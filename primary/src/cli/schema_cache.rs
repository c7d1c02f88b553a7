//! The plugins' announced schemas, kept in the data directory after every
//! command that started plugins, so that `orrery validate` and `orrery
//! schema` work offline. The file (`schemas.json`) is also the format of
//! their `--schemas FILE`: a JSON array of announcements, as plugins send
//! them (`docs/protocol.md`, "Announcement").

use std::path::{Path, PathBuf};

use anyhow::Context;
use orrery_primary::stack::Catalog;
use orrery_schema::Announcement;

/// Where the cache is in `data_dir`.
pub fn path(data_dir: &Path) -> PathBuf {
    data_dir.join("schemas.json")
}

/// Reads a file of announcements.
pub fn read(file: &Path) -> anyhow::Result<Vec<Announcement>> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not a JSON array of plugin announcements",
            file.display()
        )
    })
}

/// The catalog of `--schemas FILE` when given, else of the cache in
/// `data_dir` (empty when there is none yet).
pub fn catalog(schemas: Option<&Path>, data_dir: &Path) -> anyhow::Result<(Catalog, PathBuf)> {
    let file = schemas.map_or_else(|| path(data_dir), Path::to_path_buf);
    let announcements = match read(&file) {
        Ok(a) => a,
        Err(_) if schemas.is_none() && !file.exists() => Vec::new(),
        Err(e) => return Err(e),
    };
    let mut catalog = Catalog::new();
    for a in announcements {
        catalog.insert(a);
    }
    Ok((catalog, file))
}

/// Adds (or replaces) `announcements` in the cache of `data_dir`. The
/// file is replaced whole (written aside, then renamed), so a reader never
/// sees half of it.
pub fn save(data_dir: &Path, announcements: Vec<Announcement>) -> anyhow::Result<()> {
    if announcements.is_empty() {
        return Ok(());
    }
    let file = path(data_dir);
    let mut catalog = Catalog::new();
    // A cache that cannot be read is rebuilt from what is known now.
    for a in read(&file).unwrap_or_default() {
        catalog.insert(a);
    }
    for a in announcements {
        catalog.insert(a);
    }
    let all: Vec<&Announcement> = catalog.plugins().collect();
    std::fs::create_dir_all(data_dir)
        .with_context(|| format!("cannot create {}", data_dir.display()))?;
    let aside = file.with_extension(format!("json.{}", std::process::id()));
    std::fs::write(&aside, serde_json::to_vec_pretty(&all)?)
        .with_context(|| format!("cannot write {}", aside.display()))?;
    std::fs::rename(&aside, &file).with_context(|| format!("cannot write {}", file.display()))?;
    Ok(())
}
