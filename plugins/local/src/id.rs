//! Native ids: the paths of entries relative to the root.
//!
//! An id has one spelling. Rather than normalise `./x`, `a//b`, `a/` or
//! `a/../b` (two ids for one entry, and `..` whose meaning depends on what
//! the components are), anything but plain names joined by single `/` is
//! refused as `InvalidRequest`, as are absolute paths and NUL bytes. Ids
//! stay textual: whether a component is a symlink is for the kernel to
//! judge at the moment of use (see `beneath.rs`).

use orrery_plugin_sdk::PluginError;

/// Longest name of one entry (Linux `NAME_MAX`).
const MAX_NAME_BYTES: usize = 255;

/// Longest id (Linux `PATH_MAX`, less the terminating NUL).
const MAX_ID_BYTES: usize = 4095;

/// One component of an id: never empty, `.`, `..`, and never holding `/` or
/// NUL, so that a call relative to a directory handle with it stays in
/// that directory.
#[derive(Clone, Copy, Debug)]
pub struct Name<'a>(&'a str);

impl<'a> Name<'a> {
    /// `name` if it is a single plain component.
    pub fn new(name: &'a str) -> Option<Name<'a>> {
        let plain = !matches!(name, "" | "." | "..") && !name.contains(['/', '\0']);
        (plain && name.len() <= MAX_NAME_BYTES).then_some(Name(name))
    }

    pub fn as_str(&self) -> &'a str {
        self.0
    }
}

/// Why an id is refused, as `InvalidRequest`.
#[derive(Debug, thiserror::Error)]
pub enum BadId {
    #[error("path must not be empty")]
    Empty,
    #[error("path `{0}` is absolute; paths are relative to the target's root")]
    Absolute(String),
    #[error("path {0:?} must not contain NUL bytes")]
    Nul(String),
    #[error("path `{0}` escapes the target's root: `..` is not allowed")]
    Climbs(String),
    #[error("path `{0}` must be a plain relative path, without `.` or empty components")]
    NotPlain(String),
    #[error(
        "path `{id}` is {len} bytes, or has a component of more than {}; at most {} are allowed",
        MAX_NAME_BYTES,
        MAX_ID_BYTES
    )]
    TooLong { id: String, len: usize },
}

impl From<BadId> for PluginError {
    fn from(e: BadId) -> PluginError {
        PluginError::invalid(e.to_string())
    }
}

/// Splits a canonical id into its parent's id (`None` at the top of the
/// root) and its last component, refusing ids that are not canonical.
pub fn split(id: &str) -> Result<(Option<&str>, Name<'_>), BadId> {
    check(id)?;
    let (parent, name) = match id.rsplit_once('/') {
        Some((parent, name)) => (Some(parent), name),
        None => (None, id),
    };
    Name::new(name)
        .map(|name| (parent, name))
        .ok_or_else(|| BadId::NotPlain(id.to_owned()))
}

/// Refuses ids that are not plain relative paths: empty, absolute, with
/// `..`, `.` or empty components, NUL bytes, or longer than Linux allows.
pub fn check(id: &str) -> Result<(), BadId> {
    let owned = || id.to_owned();
    if id.is_empty() {
        return Err(BadId::Empty);
    }
    if id.starts_with('/') {
        return Err(BadId::Absolute(owned()));
    }
    if id.contains('\0') {
        return Err(BadId::Nul(owned()));
    }
    let too_long = || BadId::TooLong {
        id: owned(),
        len: id.len(),
    };
    if id.len() > MAX_ID_BYTES {
        return Err(too_long());
    }
    for part in id.split('/') {
        match part {
            ".." => return Err(BadId::Climbs(owned())),
            "" | "." => return Err(BadId::NotPlain(owned())),
            _ if part.len() > MAX_NAME_BYTES => return Err(too_long()),
            _ => {}
        }
    }
    Ok(())
}
