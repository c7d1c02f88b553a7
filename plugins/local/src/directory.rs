//! `Local::Fs::Directory`: a directory under the target's root.

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use rustix::fs::Stat;
use rustix::io::Errno;
use serde::{Deserialize, Serialize};

use crate::beneath::{self, Dir};
use crate::error::FsError;
use crate::id::Name;
use crate::kind::Kind;
use crate::root::{self, Root};

/// The resource type name.
pub const TYPE: &str = "Local::Fs::Directory";

/// The properties of a directory, as on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct Directory {
    /// Relative to the root; also the native id.
    path: String,
    /// Permission bits; absent on create means "as the umask decides".
    mode: Option<u32>,
}

/// The schema: `path` identifies the directory and cannot change; the
/// provider fills in `mode` when it is absent.
pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A directory under the target's root")
        .identifier(["path"])
        .field(
            field::string("path")
                .required()
                .create_only()
                .describe("Relative to the root"),
        )
        .field(
            field::integer("mode")
                .provider_default()
                .describe("Permission bits, e.g. 493"),
        )
        .build()
}

/// Creates the directory; its parent must exist.
pub fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: Directory = from_properties(properties)?;
    root::check_mode(desired.mode)?;
    let id = &desired.path;
    let (parent, name) = root.parent(id, ErrorCode::InvalidRequest)?;
    parent.mkdir(name).map_err(|e| FsError::at(id, e))?;
    chmod_and_read(&parent, name, id, desired.mode)
}

/// Reads the directory's current properties.
pub fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, properties(root, native_id)?)
}

fn properties(root: &Root, native_id: &str) -> Result<PropertyMap, PluginError> {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    let stat = root::entry(&parent, name, native_id, Kind::Directory)?;
    properties_of(native_id, &stat)
}

fn properties_of(native_id: &str, stat: &Stat) -> Result<PropertyMap, PluginError> {
    to_properties(&Directory {
        path: native_id.into(),
        mode: Some(root::mode_of(stat)),
    })
}

/// Changes the mode; a different `path` is `NotUpdatable`.
pub fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Directory = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    root::check_mode(desired.mode)?;
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    chmod_and_read(&parent, name, native_id, desired.mode)
}

/// Sets the mode (when given) of the directory `name` of `parent`, opened
/// without following a symlink, and answers with its properties.
fn chmod_and_read(parent: &Dir, name: Name<'_>, id: &str, mode: Option<u32>) -> OpResult {
    let dir = match parent.subdir(name) {
        Ok(dir) => dir,
        // Say what is there instead.
        Err(Errno::NOTDIR | Errno::NOENT) => {
            let found = root::entry(parent, name, id, Kind::Directory);
            return Err(found
                .err()
                .unwrap_or(FsError::Changed(id.to_owned()))
                .into());
        }
        Err(e) => return Err(FsError::at(id, e).into()),
    };
    if let Some(mode) = mode {
        beneath::set_mode(&dir, id, mode)?;
    }
    let stat = beneath::stat(&dir).map_err(|e| FsError::at(id, e))?;
    done(id, properties_of(id, &stat)?)
}

/// Removes the directory, which must be empty.
pub fn delete(root: &Root, native_id: &str) -> OpResult {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    root::entry(&parent, name, native_id, Kind::Directory)?;
    match parent.remove(name, true) {
        Ok(()) => deleted(native_id),
        Err(Errno::NOTEMPTY | Errno::EXIST) => Err(FsError::NotEmpty(native_id.into()).into()),
        Err(e) => Err(FsError::reopen(native_id, Kind::Directory, e).into()),
    }
}

/// One page of the directories under the root, at any depth.
pub fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let load = |path: &str| properties(root, path);
    root.list(Kind::Directory, request, request.page_size, load)
}
