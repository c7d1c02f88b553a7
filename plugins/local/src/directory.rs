//! `Local::Fs::Directory`: a directory under the target's root.

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::root::{self, io_error, Kind, Root};

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
pub async fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: Directory = from_properties(properties)?;
    root::check_mode(desired.mode)?;
    let path = root.new_entry(&desired.path).await?;
    tokio::fs::create_dir(&path)
        .await
        .map_err(io_error(&desired.path))?;
    if let Some(mode) = desired.mode {
        root::set_mode(&path, &desired.path, mode).await?;
    }
    read(root, &desired.path).await
}

/// Reads the directory's current properties.
pub async fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, properties(root, native_id).await?)
}

async fn properties(root: &Root, native_id: &str) -> Result<PropertyMap, PluginError> {
    let (_, meta) = root.find(native_id, Kind::Directory).await?;
    let mode = Some(root::mode_of(&meta));
    to_properties(&Directory {
        path: native_id.into(),
        mode,
    })
}

/// Changes the mode; a different `path` is `NotUpdatable`.
pub async fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Directory = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    root::check_mode(desired.mode)?;
    let (path, _) = root.find(native_id, Kind::Directory).await?;
    if let Some(mode) = desired.mode {
        root::set_mode(&path, native_id, mode).await?;
    }
    read(root, native_id).await
}

/// Removes the directory, which must be empty.
pub async fn delete(root: &Root, native_id: &str) -> OpResult {
    let (path, _) = root.find(native_id, Kind::Directory).await?;
    match tokio::fs::remove_dir(&path).await {
        Ok(()) => deleted(native_id),
        Err(e) if e.kind() == std::io::ErrorKind::DirectoryNotEmpty => Err(PluginError::new(
            ErrorCode::ResourceConflict,
            format!("directory `{native_id}` is not empty; delete what it contains first"),
        )),
        Err(e) => Err(io_error(native_id)(e)),
    }
}

/// One page of the directories under the root, at any depth.
pub async fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let load = |path: String| async move { properties(root, &path).await };
    root.list(Kind::Directory, request, request.page_size, load)
        .await
}
