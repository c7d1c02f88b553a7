//! `Local::Fs::Symlink`: a symbolic link under the target's root.
//!
//! Every field is create-only, so an update can only confirm the current
//! state; the runtime replaces the link when `target` changes.

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::beneath::Dir;
use crate::error::FsError;
use crate::id::Name;
use crate::kind::Kind;
use crate::root::{self, Root};

/// The resource type name.
pub const TYPE: &str = "Local::Fs::Symlink";

/// The properties of a symlink, as on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct Symlink {
    /// Relative to the root; also the native id.
    path: String,
    /// What the link points to, relative to the link's directory.
    target: String,
}

/// The schema: both fields are create-only.
pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A symbolic link under the target's root, pointing inside it")
        .identifier(["path"])
        .field(
            field::string("path")
                .required()
                .create_only()
                .describe("Path of the link relative to the root; the native id"),
        )
        .field(
            field::string("target").required().create_only().describe(
                "Where the link points, relative to the link's directory; need not exist",
            ),
        )
        .build()
}

/// Largest target (Linux `PATH_MAX`, less the terminating NUL).
const MAX_TARGET_BYTES: usize = 4095;

/// Why a link target is refused, as `InvalidRequest`.
#[derive(Debug, thiserror::Error)]
enum BadTarget {
    #[error("symlink target `{target}` of `{link}` must be a non-empty path relative to the link's directory, without NUL bytes")]
    NotRelative { link: String, target: String },
    #[error(
        "symlink target of `{link}` is {len} bytes; at most {} are allowed",
        MAX_TARGET_BYTES
    )]
    TooLong { link: String, len: usize },
    #[error("symlink `{link}`: target `{target}` has `..` after a name, which could lead outside the target's root (the name may be, or become, a symlink); only leading `..` are allowed")]
    ClimbsAfterName { link: String, target: String },
    #[error("symlink `{link}`: target `{target}` resolves outside the target's root: it climbs {ups} directories from one {depth} below the root")]
    Outside {
        link: String,
        target: String,
        ups: usize,
        depth: usize,
    },
}

impl From<BadTarget> for PluginError {
    fn from(e: BadTarget) -> PluginError {
        PluginError::invalid(e.to_string())
    }
}

/// Refuses link targets that could resolve outside the root. `depth` is
/// how many directories the link's real directory is below the root, which
/// is what its `..` climb from, whatever links the link's path went through.
///
/// A target is leading `..`, then names (`.` and empty components are
/// ignored). `..` after a name is refused: where it leads depends on
/// whether the name is a symlink, now or once created later, and a link to
/// `.` would turn `name/..` into a step out. With that rule a link made here
/// never leads outside as long as the links it goes through were made here
/// too; the target need not exist. Links made by others are not trusted
/// either way: lookups never follow anything out of the root (`beneath.rs`).
fn check_target(link: &str, target: &str, depth: usize) -> Result<(), BadTarget> {
    if target.is_empty() || target.starts_with('/') || target.contains('\0') {
        return Err(BadTarget::NotRelative {
            link: link.into(),
            target: target.into(),
        });
    }
    if target.len() > MAX_TARGET_BYTES {
        return Err(BadTarget::TooLong {
            link: link.into(),
            len: target.len(),
        });
    }
    let mut ups = 0;
    let mut named = false;
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if named => {
                return Err(BadTarget::ClimbsAfterName {
                    link: link.into(),
                    target: target.into(),
                })
            }
            ".." => ups += 1,
            _ => named = true,
        }
    }
    if ups > depth {
        return Err(BadTarget::Outside {
            link: link.into(),
            target: target.into(),
            ups,
            depth,
        });
    }
    Ok(())
}

/// Creates the link; its parent must exist.
pub fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: Symlink = from_properties(properties)?;
    let id = &desired.path;
    let (parent, name) = root.parent(id, ErrorCode::InvalidRequest)?;
    let depth = root.depth_of(&parent, id)?;
    check_target(id, &desired.target, depth)?;
    parent
        .symlink(&desired.target, name)
        .map_err(|e| FsError::at(id, e))?;
    done(id, to_properties(&current_at(&parent, name, id)?)?)
}

/// Reads the link's current properties.
pub fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, to_properties(&current(root, native_id)?)?)
}

fn current(root: &Root, native_id: &str) -> Result<Symlink, PluginError> {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    current_at(&parent, name, native_id)
}

fn current_at(parent: &Dir, name: Name<'_>, id: &str) -> Result<Symlink, PluginError> {
    root::entry(parent, name, id, Kind::Symlink)?;
    let target = match parent.read_link(name) {
        Ok(target) => target,
        Err(Errno::INVAL) => return Err(FsError::Changed(id.to_owned()).into()), // not a link now
        Err(e) => return Err(FsError::reopen(id, Kind::Symlink, e).into()),
    };
    let target = String::from_utf8(target)
        .map_err(|_| PluginError::invalid(format!("target of symlink `{id}` is not UTF-8")))?;
    Ok(Symlink {
        path: id.to_owned(),
        target,
    })
}

/// Confirms the current state: any change is `NotUpdatable`.
pub fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Symlink = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    let current = current(root, native_id)?;
    if desired.target != current.target {
        return Err(crate::not_updatable(
            "target",
            &current.target,
            &desired.target,
        ));
    }
    done(native_id, to_properties(&current)?)
}

/// Removes the link (never what it points to).
pub fn delete(root: &Root, native_id: &str) -> OpResult {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    root::entry(&parent, name, native_id, Kind::Symlink)?;
    parent
        .remove(name, false)
        .map_err(|e| FsError::reopen(native_id, Kind::Symlink, e))?;
    deleted(native_id)
}

/// One page of the symlinks under the root, at any depth.
pub fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let load = |path: &str| to_properties(&current(root, path)?);
    root.list(Kind::Symlink, request, request.page_size, load)
}
