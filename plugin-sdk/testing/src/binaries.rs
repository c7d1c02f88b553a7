//! The workspace's binaries, where cargo put them.

use std::path::PathBuf;

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
