//! The target's root directory, and keeping every path inside it.
//!
//! Every path a request names is relative to the `root` of the target's
//! config. [`Root`] refuses absolute paths, `..`, `.` and empty components,
//! and parents that resolve (through symlinks) outside the root. The last
//! component is never followed: [`Root::find`] inspects it with
//! `symlink_metadata`, and files are written with `O_NOFOLLOW`.
//!
//! This is a check, not a kernel-enforced jail: a process that swaps a
//! parent directory for a symlink between the check and the operation could
//! escape. A production plugin would open paths with `openat2(RESOLVE_BENEATH)`.

use std::fmt;
use std::fs::{FileType, Metadata, Permissions};
use std::future::Future;
use std::io::ErrorKind;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, ListedResource, PropertyMap, Target};
use orrery_plugin_sdk::{from_properties, paginate, ListPage, PluginError};
use serde::Deserialize;

/// The target config of the `local` plugin.
#[derive(Deserialize)]
struct Config {
    /// Absolute path of a directory; every resource lives under it.
    root: String,
    /// Create the root (and its parents) when it does not exist yet.
    #[serde(default)]
    create_root: bool,
}

/// A target's root directory, canonicalized.
#[derive(Debug)]
pub struct Root {
    dir: PathBuf,
}

/// The kind of a directory entry, with symlinks not followed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Directory,
    /// A regular file.
    File,
    /// A symbolic link.
    Symlink,
}

impl Kind {
    fn of(file_type: FileType) -> Option<Kind> {
        if file_type.is_symlink() {
            Some(Kind::Symlink)
        } else if file_type.is_dir() {
            Some(Kind::Directory)
        } else if file_type.is_file() {
            Some(Kind::File)
        } else {
            None // sockets, fifos, devices: not managed
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::Directory => "directory",
            Kind::File => "file",
            Kind::Symlink => "symlink",
        })
    }
}

impl Root {
    /// Reads the root from the target config; it must be an absolute path
    /// to an existing directory, unless `create_root` is true.
    pub async fn of(target: &Target) -> Result<Root, PluginError> {
        let config: Config = from_properties(&target.config).map_err(|e| {
            PluginError::invalid(format!(
                "config of target `{}` needs `root`, an absolute path as a string ({})",
                target.name, e.message
            ))
        })?;
        let invalid = |why: &str| {
            PluginError::invalid(format!(
                "root `{}` of target `{}` {why}",
                config.root, target.name
            ))
        };
        if !Path::new(&config.root).is_absolute() {
            return Err(invalid("is not an absolute path"));
        }
        if config.create_root {
            tokio::fs::create_dir_all(&config.root)
                .await
                .map_err(|e| invalid(&format!("cannot be created: {e}")))?;
        }
        let dir = match tokio::fs::canonicalize(&config.root).await {
            Ok(dir) => dir,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(invalid("does not exist")),
            Err(e) => return Err(invalid(&format!("cannot be resolved: {e}"))),
        };
        match tokio::fs::metadata(&dir).await {
            Ok(meta) if meta.is_dir() => Ok(Root { dir }),
            Ok(_) => Err(invalid("is not a directory")),
            Err(e) => Err(invalid(&format!("cannot be read: {e}"))),
        }
    }

    /// Finds the entry at `rel`, which must be of `kind`: a missing entry
    /// (or parent), or one of another kind, is `NotFound`.
    pub async fn find(&self, rel: &str, kind: Kind) -> Result<(PathBuf, Metadata), PluginError> {
        let path = self.resolve(rel, ErrorCode::NotFound).await?;
        let meta = check_kind(&path, kind, rel).await?;
        Ok((path, meta))
    }

    /// Resolves the path of an entry about to be created: a missing parent
    /// is an `InvalidRequest`.
    pub async fn new_entry(&self, rel: &str) -> Result<PathBuf, PluginError> {
        self.resolve(rel, ErrorCode::InvalidRequest).await
    }

    async fn resolve(&self, rel: &str, missing_parent: ErrorCode) -> Result<PathBuf, PluginError> {
        check_relative(rel)?;
        let Some((parent_rel, name)) = rel.rsplit_once('/') else {
            return Ok(self.dir.join(rel));
        };
        let missing = |why: &str| {
            PluginError::new(
                missing_parent.clone(),
                format!("parent directory `{parent_rel}` of `{rel}` {why}"),
            )
        };
        let parent = match tokio::fs::canonicalize(self.dir.join(parent_rel)).await {
            Ok(parent) => parent,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(missing("does not exist")),
            Err(e) if e.kind() == ErrorKind::NotADirectory => {
                return Err(missing("is not a directory"))
            }
            Err(e) => return Err(io_error(parent_rel)(e)),
        };
        if !parent.starts_with(&self.dir) {
            return Err(PluginError::invalid(format!(
                "path `{rel}` escapes the target's root through a symlink"
            )));
        }
        match tokio::fs::metadata(&parent).await {
            Ok(meta) if meta.is_dir() => Ok(parent.join(name)),
            Ok(_) => Err(missing("is not a directory")),
            Err(e) => Err(io_error(parent_rel)(e)),
        }
    }

    /// One page of the entries of `kind` under the root, at any depth, by
    /// path. `load` reads an entry's properties; entries it reports
    /// `NotFound` (deleted since the walk) or `InvalidRequest` (not
    /// representable by the type) are left out.
    pub async fn list<F, Fut>(
        &self,
        kind: Kind,
        request: &ListRequest,
        page_size: u32,
        load: F,
    ) -> Result<ListPage, PluginError>
    where
        F: Fn(String) -> Fut,
        Fut: Future<Output = Result<PropertyMap, PluginError>>,
    {
        let paths = self.walk(kind).await?;
        let token = request.page_token.as_deref();
        let (page, next_page_token) = paginate(paths, |p| p, page_size, token);
        let mut resources = Vec::with_capacity(page.len());
        for native_id in page {
            match load(native_id.clone()).await {
                Ok(properties) => resources.push(ListedResource {
                    native_id,
                    properties,
                }),
                Err(e) if matches!(e.code, ErrorCode::NotFound | ErrorCode::InvalidRequest) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(ListPage {
            resources,
            next_page_token,
        })
    }

    /// The relative paths of every entry of `kind` under the root, in no
    /// particular order. Symlinked directories are not descended into;
    /// subdirectories that cannot be read are skipped with a warning.
    async fn walk(&self, kind: Kind) -> Result<Vec<String>, PluginError> {
        let dir = self.dir.clone();
        let walk = tokio::task::spawn_blocking(move || {
            let mut found = Vec::new();
            walk_dir(&dir, "", kind, &mut found).map(|()| found)
        });
        match walk.await {
            Ok(result) => result.map_err(io_error(".")),
            Err(e) => Err(PluginError::new(
                ErrorCode::InternalFailure,
                format!("walking the root failed: {e}"),
            )),
        }
    }
}

fn walk_dir(dir: &Path, prefix: &str, kind: Kind, found: &mut Vec<String>) -> std::io::Result<()> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if !prefix.is_empty() => {
            tracing::warn!(directory = prefix, error = %e, "skipping a directory that cannot be read");
            return Ok(());
        }
        Err(e) => return Err(e),
    };
    for entry in entries {
        let entry = entry?;
        // A name that is not UTF-8 cannot be a native id.
        let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
            continue;
        };
        let rel = if prefix.is_empty() {
            name
        } else {
            format!("{prefix}/{name}")
        };
        let entry_kind = Kind::of(entry.file_type()?);
        if entry_kind == Some(Kind::Directory) {
            walk_dir(&entry.path(), &rel, kind, found)?;
        }
        if entry_kind == Some(kind) {
            found.push(rel);
        }
    }
    Ok(())
}

/// Refuses paths that are not plain relative paths: absolute, `..`, `.` or
/// empty components. The path is then usable as a native id as is.
fn check_relative(rel: &str) -> Result<(), PluginError> {
    if rel.is_empty() {
        return Err(PluginError::invalid("path must not be empty"));
    }
    if rel.starts_with('/') {
        return Err(PluginError::invalid(format!(
            "path `{rel}` is absolute; paths are relative to the target's root"
        )));
    }
    for part in rel.split('/') {
        match part {
            ".." => {
                return Err(PluginError::invalid(format!(
                    "path `{rel}` escapes the target's root: `..` is not allowed"
                )))
            }
            "" | "." => {
                return Err(PluginError::invalid(format!(
                    "path `{rel}` must be a plain relative path, without `.` or empty components"
                )))
            }
            _ => {}
        }
    }
    Ok(())
}

/// The metadata of the entry at `path` (not following a symlink), which
/// must be of `kind`.
async fn check_kind(path: &Path, kind: Kind, rel: &str) -> Result<Metadata, PluginError> {
    let meta = match tokio::fs::symlink_metadata(path).await {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            return Err(PluginError::not_found(format!("no {kind} at `{rel}`")))
        }
        Err(e) => return Err(io_error(rel)(e)),
    };
    match Kind::of(meta.file_type()) {
        Some(found) if found == kind => Ok(meta),
        Some(found) => Err(PluginError::not_found(format!(
            "`{rel}` is a {found}, not a {kind}"
        ))),
        None => Err(PluginError::not_found(format!("`{rel}` is not a {kind}"))),
    }
}

/// Maps an I/O error on `rel` onto the error vocabulary, naming the path.
pub fn io_error(rel: &str) -> impl FnOnce(std::io::Error) -> PluginError + '_ {
    move |e| match e.kind() {
        ErrorKind::AlreadyExists => {
            PluginError::new(ErrorCode::AlreadyExists, format!("`{rel}` already exists"))
        }
        _ => {
            let mut error = PluginError::from(e);
            error.message = format!("`{rel}`: {}", error.message);
            error
        }
    }
}

/// Refuses permission bits beyond `0o7777`.
pub fn check_mode(mode: Option<u32>) -> Result<(), PluginError> {
    match mode {
        Some(mode) if mode > 0o7777 => Err(PluginError::invalid(format!(
            "mode {mode} (0o{mode:o}) is not a permission mode: at most 4095 (0o7777)"
        ))),
        _ => Ok(()),
    }
}

/// The permission bits of an entry.
pub fn mode_of(meta: &Metadata) -> u32 {
    meta.permissions().mode() & 0o7777
}

/// Sets the permission bits of the file or directory at `path`.
pub async fn set_mode(path: &Path, rel: &str, mode: u32) -> Result<(), PluginError> {
    tokio::fs::set_permissions(path, Permissions::from_mode(mode))
        .await
        .map_err(io_error(rel))
}
