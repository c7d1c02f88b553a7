//! The target's root directory, and finding entries beneath it.
//!
//! [`Root::of`] opens the root named by the target's config once per
//! request; every entry is then reached through that handle, never through
//! a path string (`beneath.rs`): ids are checked to be canonical
//! (`id.rs`), the directory holding the entry is opened beneath the root,
//! and the entry is handled relative to it by name.

use std::path::Path;

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, ListedResource, PropertyMap, Target};
use orrery_plugin_sdk::{from_properties, paginate, ListPage, PluginError};
use rustix::fs::Stat;
use rustix::io::Errno;
use serde::Deserialize;

use crate::beneath::Dir;
use crate::error::FsError;
use crate::id::{self, Name};
use crate::kind::Kind;

/// The target config of the `local` plugin.
#[derive(Deserialize)]
struct Config {
    /// Absolute path of a directory; every resource lives under it.
    root: String,
    /// Create the root (and its parents) when it does not exist yet.
    #[serde(default)]
    create_root: bool,
}

/// An open handle of a target's root directory.
#[derive(Debug)]
pub struct Root {
    dir: Dir,
}

impl Root {
    /// Opens the root from the target config; it must be an absolute path
    /// to an existing directory, unless `create_root` is true.
    pub fn of(target: &Target) -> Result<Root, PluginError> {
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
        let path = Path::new(&config.root);
        if !path.is_absolute() {
            return Err(invalid("is not an absolute path"));
        }
        if config.create_root {
            std::fs::create_dir_all(path)
                .map_err(|e| invalid(&format!("cannot be created: {e}")))?;
        }
        match Dir::open_root(path) {
            Ok(dir) => Ok(Root { dir }),
            Err(Errno::NOENT) => Err(invalid("does not exist")),
            Err(Errno::NOTDIR) => Err(invalid("is not a directory")),
            Err(Errno::NOSYS) => Err(FsError::Unsupported(Errno::NOSYS).into()),
            Err(e) => Err(invalid(&format!("cannot be opened: {e}"))),
        }
    }

    /// The directory holding the entry `id`, opened beneath the root, and
    /// the entry's name in it. A missing parent is `missing`:
    /// `InvalidRequest` for an entry about to be created, else `NotFound`.
    pub fn parent<'a>(
        &self,
        id: &'a str,
        missing: ErrorCode,
    ) -> Result<(Dir, Name<'a>), PluginError> {
        let (parent, name) = id::split(id)?;
        let parent = parent.unwrap_or(".");
        let dir = self
            .dir
            .open_dir(parent)
            .map_err(|e| FsError::parent(id, parent, e, missing))?;
        Ok((dir, name))
    }

    /// How many directories `dir` is below the root; `dir` holds `id`.
    pub fn depth_of(&self, dir: &Dir, id: &str) -> Result<usize, FsError> {
        match dir.depth_below(&self.dir) {
            Ok(Some(depth)) => Ok(depth),
            // Moved out from under the root since it was opened.
            Ok(None) => Err(FsError::Escapes(id.to_owned())),
            Err(e) => Err(FsError::at(id, e)),
        }
    }

    /// One page of the entries of `kind` under the root, at any depth, by
    /// path. `load` reads an entry's properties; entries it reports
    /// `NotFound` (deleted since the walk) or `InvalidRequest` (not
    /// representable by the type, or behind a link out of the root) are
    /// left out.
    pub fn list<F>(
        &self,
        kind: Kind,
        request: &ListRequest,
        page_size: u32,
        load: F,
    ) -> Result<ListPage, PluginError>
    where
        F: Fn(&str) -> Result<PropertyMap, PluginError>,
    {
        let paths = crate::walk::walk(&self.dir, kind)?;
        let token = request.page_token.as_deref();
        let (page, next_page_token) = paginate(paths, |p| p, page_size, token);
        let mut resources = Vec::with_capacity(page.len());
        for native_id in page {
            match load(&native_id) {
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
}

/// The status of the entry `name` of `dir` (not following it), which must
/// be of `kind`: a missing entry or one of another kind is `NotFound`.
pub fn entry(dir: &Dir, name: Name<'_>, id: &str, kind: Kind) -> Result<Stat, FsError> {
    let stat = match dir.stat(name) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => {
            return Err(FsError::Missing {
                id: id.to_owned(),
                kind,
            })
        }
        Err(e) => return Err(FsError::at(id, e)),
    };
    check_kind(&stat, id, kind)?;
    Ok(stat)
}

/// Refuses an entry whose status says it is not of `kind`.
pub fn check_kind(stat: &Stat, id: &str, kind: Kind) -> Result<(), FsError> {
    match Kind::of_stat(stat) {
        Some(found) if found == kind => Ok(()),
        Some(found) => Err(FsError::WrongKind {
            id: id.to_owned(),
            found,
            kind,
        }),
        None => Err(FsError::Unmanaged {
            id: id.to_owned(),
            kind,
        }),
    }
}

/// Whether two statuses describe the same inode: the entry found by name
/// is the one opened.
pub fn same_entry(a: &Stat, b: &Stat) -> bool {
    (a.st_dev, a.st_ino) == (b.st_dev, b.st_ino)
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
pub fn mode_of(stat: &Stat) -> u32 {
    stat.st_mode & 0o7777
}
