//! The kinds of directory entry the plugin manages, one per resource type.

use std::fmt;

use rustix::fs::{FileType, Stat};

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
    /// The kind of an entry of `file_type`; `None` for sockets, fifos and
    /// devices, which are not managed.
    pub fn of(file_type: FileType) -> Option<Kind> {
        match file_type {
            FileType::Symlink => Some(Kind::Symlink),
            FileType::Directory => Some(Kind::Directory),
            FileType::RegularFile => Some(Kind::File),
            _ => None,
        }
    }

    /// The kind of the entry `stat` describes.
    pub fn of_stat(stat: &Stat) -> Option<Kind> {
        Kind::of(FileType::from_raw_mode(stat.st_mode))
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
