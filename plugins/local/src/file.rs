//! `Local::Fs::File`: a UTF-8 text file under the target's root.
//!
//! Besides the directory's fields it shows the two hints a plugin must
//! honour itself: `sha256` is read-only (ignored on input, computed on every
//! read) and `owner_note` is write-only (accepted, never returned).

use std::io::{Read, Write};

use orrery_plugin_sdk::schema::{ErrorCode, ListRequest, PropertyMap, ResourceSchema};
use orrery_plugin_sdk::{deleted, done, field, from_properties, resource, to_properties};
use orrery_plugin_sdk::{ListPage, OpResult, PluginError};
use rustix::fs::{OFlags, Stat};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::beneath::{self, Dir};
use crate::error::FsError;
use crate::id::Name;
use crate::kind::Kind;
use crate::root::{self, Root};

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

/// Creates the file; its parent must exist.
pub fn create(root: &Root, properties: &PropertyMap) -> OpResult {
    let desired: File = from_properties(properties)?;
    check(&desired)?;
    let id = &desired.path;
    let (parent, name) = root.parent(id, ErrorCode::InvalidRequest)?;
    let mut file = parent.create_file(name).map_err(|e| FsError::at(id, e))?;
    let content = desired.content.as_deref().unwrap_or_default();
    file.write_all(content.as_bytes())
        .map_err(|e| FsError::io(id, e))?;
    if let Some(mode) = desired.mode {
        beneath::set_mode(&file, id, mode)?;
    }
    done(id, properties_at(&parent, name, id)?)
}

/// Reads the file's current properties.
pub fn read(root: &Root, native_id: &str) -> OpResult {
    done(native_id, properties(root, native_id)?)
}

fn properties(root: &Root, native_id: &str) -> Result<PropertyMap, PluginError> {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    properties_at(&parent, name, native_id)
}

/// The properties of the file `name` of `parent`.
fn properties_at(parent: &Dir, name: Name<'_>, id: &str) -> Result<PropertyMap, PluginError> {
    let (mut file, stat) = open(parent, name, id, OFlags::RDONLY)?;
    let too_large = |size: usize| {
        PluginError::invalid(format!(
            "`{id}` is {size} bytes; at most {MAX_CONTENT_BYTES} are managed"
        ))
    };
    let size = usize::try_from(stat.st_size).unwrap_or(usize::MAX);
    if size > MAX_CONTENT_BYTES {
        return Err(too_large(size));
    }
    // At most one byte more than managed, whatever the file grew to since.
    let mut bytes = Vec::with_capacity(size);
    (&mut file)
        .take(MAX_CONTENT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| FsError::io(id, e))?;
    if bytes.len() > MAX_CONTENT_BYTES {
        return Err(too_large(bytes.len()));
    }
    let sha256 = format!("{:x}", Sha256::digest(&bytes));
    let content = String::from_utf8(bytes)
        .map_err(|_| PluginError::invalid(format!("`{id}` is not UTF-8 text")))?;
    to_properties(&File {
        path: id.to_owned(),
        content: Some(content),
        mode: Some(root::mode_of(&stat)),
        sha256: Some(sha256),
        owner_note: None,
    })
}

/// Opens the regular file `name` of `parent` with `access` (`RDONLY`,
/// `WRONLY` or `PATH`), never through a symlink. Its kind is checked by
/// name first, so that nothing else (a fifo, a device) is ever opened, and
/// again on the open handle, which must be the entry checked.
fn open(
    parent: &Dir,
    name: Name<'_>,
    id: &str,
    access: OFlags,
) -> Result<(std::fs::File, Stat), FsError> {
    let found = root::entry(parent, name, id, Kind::File)?;
    // openat2 refuses other flags beside `PATH`.
    let flags = match access {
        OFlags::PATH => access,
        _ => access | OFlags::NONBLOCK | OFlags::NOCTTY,
    };
    let fd = parent
        .open(name, flags)
        .map_err(|e| FsError::reopen(id, Kind::File, e))?;
    let stat = beneath::stat(&fd).map_err(|e| FsError::at(id, e))?;
    if !root::same_entry(&found, &stat) {
        return Err(FsError::Changed(id.to_owned()));
    }
    Ok((std::fs::File::from(fd), stat))
}

/// Rewrites the content and mode when given; a different `path` is `NotUpdatable`.
pub fn update(root: &Root, native_id: &str, properties: &PropertyMap) -> OpResult {
    let desired: File = from_properties(properties)?;
    if desired.path != native_id {
        return Err(crate::not_updatable("path", native_id, &desired.path));
    }
    check(&desired)?;
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    let access = match desired.content {
        Some(_) => OFlags::WRONLY,
        None => OFlags::PATH, // enough to set the mode
    };
    let (mut file, _) = open(&parent, name, native_id, access)?;
    if let Some(content) = &desired.content {
        file.set_len(0)
            .and_then(|()| file.write_all(content.as_bytes()))
            .map_err(|e| FsError::io(native_id, e))?;
    }
    if let Some(mode) = desired.mode {
        beneath::set_mode(&file, native_id, mode)?;
    }
    done(native_id, properties_at(&parent, name, native_id)?)
}

/// Removes the file.
pub fn delete(root: &Root, native_id: &str) -> OpResult {
    let (parent, name) = root.parent(native_id, ErrorCode::NotFound)?;
    root::entry(&parent, name, native_id, Kind::File)?;
    parent
        .remove(name, false)
        .map_err(|e| FsError::reopen(native_id, Kind::File, e))?;
    deleted(native_id)
}

/// One page of the files under the root, at any depth. Files this type
/// cannot represent (too large, not UTF-8) are left out.
pub fn list(root: &Root, request: &ListRequest) -> Result<ListPage, PluginError> {
    let page_size = match request.page_size {
        0 => MAX_PAGE,
        n => n.min(MAX_PAGE),
    };
    let load = |path: &str| properties(root, path);
    root.list(Kind::File, request, page_size, load)
}
