//! Guarding stdout: frames get a private descriptor, descriptor 1 becomes stderr.

use std::fs::File;
use std::os::fd::FromRawFd;

/// Duplicates stdout into a new descriptor reserved for frames, then points
/// descriptor 1 at stderr so that stray prints become log lines.
pub(crate) fn take_stdout_for_frames() -> std::io::Result<File> {
    // SAFETY: dup/dup2 on the process's own standard descriptors; the new
    // descriptor is owned by the returned File and by nothing else.
    unsafe {
        let frames = libc::dup(libc::STDOUT_FILENO);
        if frames < 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::dup2(libc::STDERR_FILENO, libc::STDOUT_FILENO) < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(File::from_raw_fd(frames))
    }
}
