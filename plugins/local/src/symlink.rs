//! `Local::Fs::Symlink`: a symbolic link under the target's root.
//!
//! Every field is create-only, so an update can only confirm the current
//! state; the runtime replaces the link when `target` changes.

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};

use crate::root::{io_error, Kind, Root};

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

/// Refuses link targets that are absolute or climb out of the root. The
/// check is lexical: the target need not exist yet.
fn check_target(link: &str, target: &str) -> Result<(), PluginError> {
    if target.is_empty() || target.starts_with('/') {
        return Err(PluginError::invalid(format!(
            "symlink target `{target}` must be a non-empty path relative to the link's directory"
        )));
    }
    let mut depth = link.matches('/').count(); // how deep the link's directory is
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if depth == 0 => {
                return Err(PluginError::invalid(format!(
                    "symlink target `{target}` of `{link}` points outside the target's root"
                )))
            }
            ".." => depth -= 1,
            _ => depth += 1,
        }
    }
    Ok(())
}

/// Creates the link; its parent must exist.
pub async fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: Symlink = from_properties(properties)?;
    check_target(&desired.path, &desired.target)?;
    let path = root.new_entry(&desired.path).await?;
    tokio::fs::symlink(&desired.target, &path)
        .await
        .map_err(io_error(&desired.path))?;
    read(root, &desired.path).await
}

/// Reads the link's current properties.
pub async fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, to_properties(&current(root, native_id).await?)?)
}

async fn current(root: &Root, native_id: &str) -> Result<Symlink, PluginError> {
    let (path, _) = root.find(native_id, Kind::Symlink).await?;
    let target = tokio::fs::read_link(&path)
        .await
        .map_err(io_error(native_id))?;
    let target = target.to_str().ok_or_else(|| {
        PluginError::invalid(format!("target of symlink `{native_id}` is not UTF-8"))
    })?;
    Ok(Symlink {
        path: native_id.to_owned(),
        target: target.to_owned(),
    })
}

/// Confirms the current state: any change is `NotUpdatable`.
pub async fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: Symlink = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    let current = current(root, native_id).await?;
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
pub async fn delete(root: &Root, native_id: &str) -> OpResult {
    let (path, _) = root.find(native_id, Kind::Symlink).await?;
    tokio::fs::remove_file(&path)
        .await
        .map_err(io_error(native_id))?;
    deleted(native_id)
}

/// One page of the symlinks under the root, at any depth.
pub async fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let load = |path: String| async move { to_properties(&current(root, &path).await?) };
    root.list(Kind::Symlink, request, request.page_size, load)
        .await
}
