//! Running a process on a pseudo-terminal, to see what it shows a person.

use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::process::Command;

/// Runs `cmd` with its stdin, stdout and stderr on a new pseudo-terminal
/// of 40 rows and 160 columns; returns its exit code and everything it
/// wrote to the terminal.
pub fn run(mut cmd: Command) -> (i32, String) {
    let (mut master, mut slave) = (0, 0);
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: openpty writes two descriptors into the given integers; the
    // name and termios arguments may be null.
    let made = unsafe {
        libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            &size,
        )
    };
    assert_eq!(made, 0, "openpty: {}", std::io::Error::last_os_error());
    // SAFETY: both descriptors were just opened and are owned here only.
    let (mut master, slave) = unsafe { (File::from_raw_fd(master), File::from_raw_fd(slave)) };
    cmd.stdin(slave.try_clone().unwrap())
        .stdout(slave.try_clone().unwrap())
        .stderr(slave);
    let mut child = cmd.spawn().unwrap();
    // The parent's copies of the terminal's side close with the command,
    // so reading ends when the child's do.
    drop(cmd);
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut buf = [0u8; 8192];
        // Linux answers EIO once the last writer closed: the end.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 {
                break;
            }
            out.extend_from_slice(&buf[..n]);
        }
        out
    });
    let status = child.wait().unwrap();
    let out = reader.join().unwrap();
    (
        status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out).into_owned(),
    )
}
