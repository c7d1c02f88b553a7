//! What can go wrong touching an entry beneath the root, and how each
//! failure maps onto the error vocabulary.

use orrery_plugin_sdk::schema::ErrorCode;
use orrery_plugin_sdk::PluginError;
use rustix::io::Errno;

use crate::kind::Kind;

/// A failure of a file-system call on an entry, named by its id.
#[derive(Debug, thiserror::Error)]
pub enum FsError {
    /// The kernel cannot confine lookups to the root. Fail closed: no
    /// operation runs on a path the kernel has not checked.
    #[error(
        "the local plugin resolves every path with openat2(2) beneath the root, which this \
         kernel refuses ({0}); it needs Linux 5.6 or later without a seccomp filter denying \
         openat2, and does nothing without it"
    )]
    Unsupported(Errno),
    /// A symlink (absolute, or climbing out) would lead the lookup out of
    /// the root.
    #[error("path `{0}` escapes the target's root through a symlink")]
    Escapes(String),
    /// The directory that should hold the entry is not there.
    #[error("parent directory `{parent}` of `{id}` {why}")]
    Parent {
        id: String,
        parent: String,
        why: &'static str,
        /// `InvalidRequest` when creating, `NotFound` otherwise.
        code: ErrorCode,
    },
    #[error("no {kind} at `{id}`")]
    Missing { id: String, kind: Kind },
    #[error("`{id}` is a {found}, not a {kind}")]
    WrongKind { id: String, found: Kind, kind: Kind },
    /// A socket, fifo or device.
    #[error("`{id}` is not a {kind}")]
    Unmanaged { id: String, kind: Kind },
    #[error("`{0}` already exists")]
    Exists(String),
    #[error("directory `{0}` is not empty; delete what it contains first")]
    NotEmpty(String),
    /// The entry was replaced between two calls, or the kernel saw a
    /// rename race while resolving: trying again sees the new state.
    #[error("`{0}` changed while it was being worked on")]
    Changed(String),
    /// Setting a mode through an `O_PATH` handle needs `/proc/self/fd`.
    #[error("cannot set the mode of `{0}`: /proc is not mounted")]
    NoProc(String),
    #[error("`{id}`: {errno}")]
    Io { id: String, errno: Errno },
}

impl FsError {
    /// The failure of a call on the entry `id`.
    pub fn at(id: &str, errno: Errno) -> FsError {
        match errno {
            Errno::NOSYS => FsError::Unsupported(errno),
            Errno::XDEV => FsError::Escapes(id.to_owned()),
            Errno::AGAIN => FsError::Changed(id.to_owned()),
            Errno::EXIST => FsError::Exists(id.to_owned()),
            _ => FsError::Io {
                id: id.to_owned(),
                errno,
            },
        }
    }

    /// The failure of an I/O call on the open entry `id`.
    pub fn io(id: &str, e: std::io::Error) -> FsError {
        FsError::at(id, Errno::from_io_error(&e).unwrap_or(Errno::IO))
    }

    /// The failure to open the entry `id` of `kind` just found by name:
    /// gone since, or replaced by something else.
    pub fn reopen(id: &str, kind: Kind, errno: Errno) -> FsError {
        match errno {
            Errno::NOENT => FsError::Missing {
                id: id.to_owned(),
                kind,
            },
            Errno::LOOP | Errno::NOTDIR | Errno::ISDIR | Errno::NXIO => {
                FsError::Changed(id.to_owned())
            }
            _ => FsError::at(id, errno),
        }
    }

    /// The failure to open `parent`, the directory that holds `id`.
    pub fn parent(id: &str, parent: &str, errno: Errno, code: ErrorCode) -> FsError {
        let (why, code) = match errno {
            Errno::NOENT => ("does not exist", code),
            Errno::NOTDIR => ("is not a directory", code),
            // A path through a link is a second name for an entry: never
            // valid, whatever the request (`beneath.rs`).
            Errno::LOOP => (
                "is or goes through a symlink: a path names an entry through its real directories, never a link",
                ErrorCode::InvalidRequest,
            ),
            _ => return FsError::at(parent, errno),
        };
        FsError::Parent {
            id: id.to_owned(),
            parent: parent.to_owned(),
            why,
            code,
        }
    }

    fn code(&self) -> ErrorCode {
        match self {
            FsError::Unsupported(_) | FsError::NoProc(_) => ErrorCode::InternalFailure,
            FsError::Escapes(_) => ErrorCode::InvalidRequest,
            FsError::Parent { code, .. } => code.clone(),
            FsError::Missing { .. } | FsError::WrongKind { .. } | FsError::Unmanaged { .. } => {
                ErrorCode::NotFound
            }
            FsError::Exists(_) => ErrorCode::AlreadyExists,
            // What a directory holds stays until someone removes it:
            // asking again cannot succeed, so it is not a conflict (which
            // the runtime retries) but a request that cannot be carried out.
            FsError::NotEmpty(_) => ErrorCode::InvalidRequest,
            FsError::Changed(_) => ErrorCode::ResourceConflict,
            FsError::Io { errno, .. } => {
                PluginError::from(std::io::Error::from_raw_os_error(errno.raw_os_error())).code
            }
        }
    }
}

impl From<FsError> for PluginError {
    fn from(e: FsError) -> PluginError {
        PluginError::new(e.code(), e.to_string())
    }
}
