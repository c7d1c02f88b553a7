//! Directory handles whose lookups the kernel keeps beneath them.
//!
//! Every path a request names is resolved by `openat2(2)` relative to an
//! open handle of the root, with `RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS`:
//! the kernel refuses (`EXDEV`) any step that would leave the handle's
//! directory (`..` above it, an absolute symlink, a symlink climbing out,
//! `/proc` magic links), and checks that during the lookup itself, so a
//! directory swapped for a symlink between a check and a use cannot lead
//! anywhere else. With `RESOLVE_NO_SYMLINKS` no symlink is followed at all
//! (`ELOOP`), even one that stays beneath: otherwise a link `up -> .` would
//! give `up/index.html` and `index.html` to one file, and a stack could
//! reach an entry another stack manages under a name of its own. An id
//! names an entry by its real directories, so each entry has one id. The entry itself
//! is then created, inspected, changed or removed relative to the handle of
//! the directory holding it (`mkdirat`, `unlinkat`, ...), by a [`Name`]
//! that cannot hold `/`, and never followed when it is a symlink.
//!
//! Why `rustix` rather than `cap-std`: cap-std does the same through
//! openat2 where the kernel has it, but quietly resolves in user space
//! where it does not. Here it is the kernel's guarantee or nothing: a
//! kernel without openat2 (before Linux 5.6, or behind a seccomp filter
//! denying it) gets [`FsError::Unsupported`] and no operation runs. rustix
//! is a thin safe layer over the system calls, already in the tree, and
//! keeps each call in view.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::path::Path;

use rustix::fs::{AtFlags, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

use crate::error::FsError;
use crate::id::Name;

/// How every lookup is confined.
const RESOLVE: ResolveFlags = ResolveFlags::BENEATH
    .union(ResolveFlags::NO_MAGICLINKS)
    .union(ResolveFlags::NO_SYMLINKS);

/// How often a lookup is retried when the kernel reports a concurrent
/// rename somewhere on the system (`EAGAIN`) while it resolved `..`.
const RACE_RETRIES: usize = 16;

/// Deepest directory [`Dir::depth_below`] looks for the root from; deeper
/// than any path Linux can name (`PATH_MAX` / 2).
const MAX_DEPTH: usize = 2048;

/// An open directory: the root, or one found beneath it.
#[derive(Debug)]
pub struct Dir(OwnedFd);

impl Dir {
    /// Opens the root at `path`, following symlinks in it: the operator
    /// chose it. Fails closed when the kernel cannot confine lookups.
    pub fn open_root(path: &Path) -> Result<Dir, Errno> {
        let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
        let root = Dir(rustix::fs::open(path, flags, Mode::empty())?);
        match root.open_dir(".") {
            // A seccomp filter denying openat2 tends to answer EPERM, which
            // this lookup cannot otherwise get.
            Err(Errno::PERM) => Err(Errno::NOSYS),
            Err(e) => Err(e),
            Ok(_) => Ok(root),
        }
    }

    /// Opens the directory at `path` beneath this one, following no
    /// symlink.
    pub fn open_dir(&self, path: &str) -> Result<Dir, Errno> {
        let flags = OFlags::PATH | OFlags::DIRECTORY;
        self.open_beneath(path, flags, Mode::empty()).map(Dir)
    }

    /// Opens the subdirectory `name`, failing (`ENOTDIR`) when it is a
    /// symlink, even to a directory.
    pub fn subdir(&self, name: Name<'_>) -> Result<Dir, Errno> {
        self.open(name, OFlags::PATH | OFlags::DIRECTORY).map(Dir)
    }

    /// Opens the entry `name` of this directory with `flags`, never
    /// following it when it is a symlink: that fails (`ELOOP`), or with
    /// `O_PATH` opens the link itself.
    pub fn open(&self, name: Name<'_>, flags: OFlags) -> Result<OwnedFd, Errno> {
        self.open_beneath(name.as_str(), flags | OFlags::NOFOLLOW, Mode::empty())
    }

    /// Creates the file `name`, which must not exist, for writing.
    pub fn create_file(&self, name: Name<'_>) -> Result<File, Errno> {
        let flags = OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW;
        let mode = Mode::from_raw_mode(0o666); // then the umask, as for any new file
        self.open_beneath(name.as_str(), flags, mode)
            .map(File::from)
    }

    /// Opens this directory for reading its entries.
    pub fn entries(&self) -> Result<rustix::fs::Dir, Errno> {
        let fd = self.open_beneath(".", OFlags::RDONLY | OFlags::DIRECTORY, Mode::empty())?;
        rustix::fs::Dir::new(fd)
    }

    fn open_beneath(&self, path: &str, flags: OFlags, mode: Mode) -> Result<OwnedFd, Errno> {
        let flags = flags | OFlags::CLOEXEC;
        let mut tries = 0;
        loop {
            match rustix::fs::openat2(&self.0, path, flags, mode, RESOLVE) {
                Err(Errno::AGAIN) if tries < RACE_RETRIES => tries += 1,
                // A struct size the kernel does not know: as good as none.
                Err(Errno::TOOBIG) => return Err(Errno::NOSYS),
                result => return result,
            }
        }
    }

    /// The status of the entry `name`, not following it.
    pub fn stat(&self, name: Name<'_>) -> Result<Stat, Errno> {
        rustix::fs::statat(&self.0, name.as_str(), AtFlags::SYMLINK_NOFOLLOW)
    }

    /// Creates the directory `name` (mode 0o777, less the umask).
    pub fn mkdir(&self, name: Name<'_>) -> Result<(), Errno> {
        rustix::fs::mkdirat(&self.0, name.as_str(), Mode::from_raw_mode(0o777))
    }

    /// Creates the symlink `name` pointing to `target`.
    pub fn symlink(&self, target: &str, name: Name<'_>) -> Result<(), Errno> {
        rustix::fs::symlinkat(target, &self.0, name.as_str())
    }

    /// The target of the symlink `name`, as bytes.
    pub fn read_link(&self, name: Name<'_>) -> Result<Vec<u8>, Errno> {
        rustix::fs::readlinkat(&self.0, name.as_str(), Vec::new()).map(|t| t.into_bytes())
    }

    /// Removes the entry `name`: an empty directory when `dir`, else a
    /// file or symlink (never what a symlink points to).
    pub fn remove(&self, name: Name<'_>, dir: bool) -> Result<(), Errno> {
        let flags = if dir {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        rustix::fs::unlinkat(&self.0, name.as_str(), flags)
    }

    /// How many directories this one is below `root` (0: it is the root),
    /// climbing real parents (`..`) until the root's inode; `None` when the
    /// file system's root comes first. This is the depth a symlink's `..`
    /// climbs from, whatever links the path to this directory went through.
    pub fn depth_below(&self, root: &Dir) -> Result<Option<usize>, Errno> {
        let key = |stat: Stat| (stat.st_dev, stat.st_ino);
        let root = key(rustix::fs::fstat(&root.0)?);
        let mut up: Option<OwnedFd> = None;
        for depth in 0..MAX_DEPTH {
            let here = up.as_ref().map_or(self.0.as_fd(), |fd| fd.as_fd());
            let at = key(rustix::fs::fstat(here)?);
            if at == root {
                return Ok(Some(depth));
            }
            // Plain openat: climbing is the point, and `..` is never a symlink.
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
            let parent = rustix::fs::openat(here, "..", flags, Mode::empty())?;
            if key(rustix::fs::fstat(&parent)?) == at {
                return Ok(None);
            }
            up = Some(parent);
        }
        Ok(None)
    }
}

impl AsFd for Dir {
    fn as_fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.0.as_fd()
    }
}

/// The status of the entry open at `fd`.
pub fn stat(fd: impl AsFd) -> Result<Stat, Errno> {
    rustix::fs::fstat(fd)
}

/// Sets the permission bits of the entry open at `fd`. An `O_PATH` handle
/// (all a directory or an unreadable file needs to be found) cannot be
/// `fchmod`ed; `/proc/self/fd/N` names exactly its inode, so the mode is
/// set through that, never through a path that could have changed.
pub fn set_mode(fd: &impl AsFd, id: &str, mode: u32) -> Result<(), FsError> {
    let mode = Mode::from_raw_mode(mode);
    let fd = fd.as_fd();
    match rustix::fs::fchmod(fd, mode) {
        Err(Errno::BADF) => {}
        result => return result.map_err(|e| FsError::at(id, e)),
    }
    let proc_path = format!("/proc/self/fd/{}", fd.as_raw_fd());
    match rustix::fs::chmod(proc_path.as_str(), mode) {
        Err(Errno::NOENT) if !Path::new("/proc/self/fd").exists() => {
            Err(FsError::NoProc(id.to_owned()))
        }
        result => result.map_err(|e| FsError::at(id, e)),
    }
}
