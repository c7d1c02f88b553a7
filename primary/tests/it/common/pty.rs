//! Running a process on a pseudo-terminal, to see what it shows a person.

use std::ffi::CStr;
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;

/// Opens a pseudo-terminal of 40 rows and 160 columns: (master, slave).
///
/// Both ends are opened close-on-exec (as `File::open` does), not with
/// `openpty`: every test shares this process, and a descriptor without
/// the flag would be inherited by whatever another test spawns meanwhile
/// (a server, a nats-server), which would then hold the terminal open and
/// keep the reader below from ever seeing its end.
fn open_pty() -> (File, File) {
    let master = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open("/dev/ptmx")
        .unwrap();
    let fd = master.as_raw_fd();
    let mut name = [0 as libc::c_char; 128];
    // SAFETY: plain calls on a descriptor owned here; ptsname_r writes a
    // NUL-terminated name of at most `name.len()` bytes.
    let path = unsafe {
        assert_eq!(
            libc::grantpt(fd),
            0,
            "grantpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::unlockpt(fd),
            0,
            "unlockpt: {}",
            std::io::Error::last_os_error()
        );
        assert_eq!(
            libc::ptsname_r(fd, name.as_mut_ptr(), name.len()),
            0,
            "ptsname_r"
        );
        CStr::from_ptr(name.as_ptr()).to_str().unwrap().to_owned()
    };
    let slave = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(path)
        .unwrap();
    let size = libc::winsize {
        ws_row: 40,
        ws_col: 160,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCSWINSZ reads one winsize from the given pointer.
    let sized = unsafe { libc::ioctl(slave.as_raw_fd(), libc::TIOCSWINSZ, &size) };
    assert_eq!(sized, 0, "TIOCSWINSZ: {}", std::io::Error::last_os_error());
    (master, slave)
}

/// Runs `cmd` with its stdin, stdout and stderr on a new pseudo-terminal
/// of 40 rows and 160 columns; returns its exit code and everything it
/// wrote to the terminal.
pub fn run(mut cmd: Command) -> (i32, String) {
    let (mut master, slave) = open_pty();
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
