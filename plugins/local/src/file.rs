//! `Local::Fs::File`: a UTF-8 text file under the target's root.
//!
//! Besides the directory's fields it shows the two hints a plugin must
//! honour itself: `sha256` is read-only (ignored on input, computed on every
//! read) and `owner_note` is write-only (accepted, never returned).

use std::path::Path;

use orrery_plugin_sdk::schema::{ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use tokio::io::AsyncWriteExt;

use crate::root::{self, io_error, Kind, Root};

/// The resource type name.
pub const TYPE: &str = "Local::Fs::File";

/// Largest content managed, so that a read answer fits a message.
const MAX_CONTENT_BYTES: usize = 256 * 1024;

/// Largest list page: at most 8 MiB of content, half the message limit.
const MAX_PAGE: u32 = 32;

/// The properties of a file, as on the wire.
#[derive(Debug, Serialize, Deserialize)]
struct File {
    /// Relative to the root; also the native id.
    path: String,
    /// The text; absent on create means empty, absent on update means unchanged.
    content: Option<String>,
    /// Permission bits; absent on create means "as the umask decides".
    mode: Option<u32>,
    /// Read-only: hex SHA-256 of the content. Ignored on input.
    sha256: Option<String>,
    /// Write-only example: accepted, kept nowhere, never serialized back.
    #[serde(skip_serializing)]
    #[allow(dead_code)] // deserialized to check its type, then dropped
    owner_note: Option<String>,
}

/// The schema, with a read-only and a write-only field.
pub fn schema() -> ResourceSchema {
    resource(TYPE)
        .describe("A UTF-8 text file (at most 256 KiB) under the target's root")
        .identifier(["path"])
        .field(
            field::string("path")
                .required()
                .create_only()
                .describe("Path relative to the root, e.g. `www/index.html`; the native id"),
        )
        .field(
            field::string("content")
                .provider_default()
                .describe("The file's text; empty when absent on create"),
        )
        .field(
            field::integer("mode")
                .provider_default()
                .describe("Permission bits, e.g. 420 (0o644)"),
        )
        .field(
            field::string("sha256")
                .read_only()
                .describe("Hex SHA-256 of the content, computed"),
        )
        .field(field::string("owner_note").write_only().opaque().describe(
            "Example write-only secret: accepted on create and update, never returned or stored",
        ))
        .build()
}

fn check(desired: &File) -> Result<(), PluginError> {
    root::check_mode(desired.mode)?;
    match &desired.content {
        Some(content) if content.len() > MAX_CONTENT_BYTES => Err(PluginError::invalid(format!(
            "content of `{}` is {} bytes; at most {MAX_CONTENT_BYTES} are managed",
            desired.path,
            content.len()
        ))),
        _ => Ok(()),
    }
}

/// Writes `content` to the file at `path`, never through a symlink.
async fn write(path: &Path, rel: &str, content: &str, create_new: bool) -> Result<(), PluginError> {
    let mut options = tokio::fs::OpenOptions::new();
    options.write(true).custom_flags(libc::O_NOFOLLOW);
    if create_new {
        options.create_new(true);
    } else {
        options.truncate(true);
    }
    let mut file = options.open(path).await.map_err(io_error(rel))?;
    file.write_all(content.as_bytes())
        .await
        .map_err(io_error(rel))?;
    file.flush().await.map_err(io_error(rel))
}

/// Creates the file; its parent must exist.
pub async fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: File = from_properties(properties)?;
    check(&desired)?;
    let path = root.new_entry(&desired.path).await?;
    let content = desired.content.as_deref().unwrap_or_default();
    write(&path, &desired.path, content, true).await?;
    if let Some(mode) = desired.mode {
        root::set_mode(&path, &desired.path, mode).await?;
    }
    read(root, &desired.path).await
}

/// Reads the file's current properties.
pub async fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, properties(root, native_id).await?)
}

async fn properties(root: &Root, native_id: &str) -> Result<PropertyMap, PluginError> {
    let (path, meta) = root.find(native_id, Kind::File).await?;
    if meta.len() > MAX_CONTENT_BYTES as u64 {
        return Err(PluginError::invalid(format!(
            "`{native_id}` is {} bytes; at most {MAX_CONTENT_BYTES} are managed",
            meta.len()
        )));
    }
    let bytes = tokio::fs::read(&path).await.map_err(io_error(native_id))?;
    let sha256 = format!("{:x}", Sha256::digest(&bytes));
    let content = String::from_utf8(bytes)
        .map_err(|_| PluginError::invalid(format!("`{native_id}` is not UTF-8 text")))?;
    to_properties(&File {
        path: native_id.to_owned(),
        content: Some(content),
        mode: Some(root::mode_of(&meta)),
        sha256: Some(sha256),
        owner_note: None,
    })
}

/// Rewrites the content and mode when given; a different `path` is `NotUpdatable`.
pub async fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: File = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    check(&desired)?;
    let (path, _) = root.find(native_id, Kind::File).await?;
    if let Some(content) = &desired.content {
        write(&path, native_id, content, false).await?;
    }
    if let Some(mode) = desired.mode {
        root::set_mode(&path, native_id, mode).await?;
    }
    read(root, native_id).await
}

/// Removes the file.
pub async fn delete(root: &Root, native_id: &str) -> OpResult {
    let (path, _) = root.find(native_id, Kind::File).await?;
    tokio::fs::remove_file(&path)
        .await
        .map_err(io_error(native_id))?;
    deleted(native_id)
}

/// One page of the files under the root, at any depth. Files this type
/// cannot represent (too large, not UTF-8) are left out.
pub async fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let page_size = match request.page_size {
        0 => MAX_PAGE,
        n => n.min(MAX_PAGE),
    };
    let load = |path: String| async move { properties(root, &path).await };
    root.list(Kind::File, request, page_size, load).await
}
