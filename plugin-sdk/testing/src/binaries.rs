//! The workspace's binaries, where cargo put them.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The workspace root (this crate lives in `plugin-sdk/testing`).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.ancestors().nth(2).map(PathBuf::from).unwrap_or(here)
}

/// The directory debug binaries are built into: `$CARGO_TARGET_DIR/debug`
/// when that is set, else the `debug` directory beside the running test's
/// own profile directory (a test runs from `<target>/<profile>/deps/`, so a
/// `build.target-dir` in a cargo config is followed too), else
/// `<workspace>/target/debug`.
pub fn target_debug() -> PathBuf {
    if let Some(dir) = std::env::var_os("CARGO_TARGET_DIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        let dir = if dir.is_absolute() {
            dir
        } else {
            workspace_root().join(dir)
        };
        return dir.join("debug");
    }
    let beside_this_test = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(3).map(|target| target.join("debug")))
        .filter(|debug| debug.is_dir());
    beside_this_test.unwrap_or_else(|| workspace_root().join("target/debug"))
}

/// The path of binary `name` of this workspace.
///
/// # Panics
///
/// When it has not been built, saying how to build it: tests run
/// the binaries the test command builds first (`cargo build --workspace
/// --bins`), not stale or absent ones.
pub fn binary(name: &str) -> PathBuf {
    let path = target_debug().join(name);
    assert!(
        path.is_file(),
        "{} is not built: run `cargo build --workspace --bins` first (the test command does)",
        path.display()
    );
    path
}

/// A copy of a workspace plugin binary, stripped of debug info, with
/// `marker` appended so each copy has its own bytes. An ELF binary ignores
/// trailing bytes, so the copy still runs.
///
/// # Panics
///
/// When the binary cannot be copied or appended to.
pub fn plugin_copy(dir: &Path, name: &str, marker: &str) -> PathBuf {
    let dest = dir.join(format!("{name}-{marker}"));
    std::fs::copy(binary(name), &dest).expect("copy the plugin binary");
    let _ = Command::new("strip")
        .arg(&dest)
        .stderr(Stdio::null())
        .status();
    let mut file = std::fs::OpenOptions::new()
        .append(true)
        .open(&dest)
        .expect("open the copy");
    file.write_all(marker.as_bytes()).expect("mark the copy");
    dest
}
