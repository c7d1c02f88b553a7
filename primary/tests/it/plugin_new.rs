//! `orrery plugin new`: the scaffolded crate builds outside the workspace
//! (inside an unrelated parent workspace, even) and passes `orrery plugin
//! test` unchanged; its stack applies. Names and directories that must not
//! be written to are refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The first build compiles the SDK's dependencies into
/// `target/plugin-new` (about 3 minutes on a loaded 2-core machine); later
/// runs reuse them and compile only the plugin.
const BUILD_TIMEOUT: Duration = Duration::from_secs(900);

fn orrery(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_orrery"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A target directory beside the workspace's own: cargo locks a target
/// directory for a whole `cargo test`, so the workspace's is not usable
/// from inside one, and a fixed one keeps the compiled dependencies.
fn scaffold_target() -> PathBuf {
    let debug = orrery_testing::target_debug();
    debug.parent().unwrap().join("plugin-new")
}

/// Runs `cargo build --offline` in `dir`, bounded by [`BUILD_TIMEOUT`];
/// returns how long it took.
fn cargo_build(dir: &Path, target: &Path) -> Duration {
    let log_path = dir.join("cargo-build.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let started = Instant::now();
    let mut child = Command::new(cargo)
        .args(["build", "--offline"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", target)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    let mut status = None;
    let finished = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        orrery_testing::wait_until("cargo build of the scaffold", BUILD_TIMEOUT, || {
            status = child.try_wait().unwrap();
            status.is_some()
        })
    }));
    if finished.is_err() {
        child.kill().ok();
        child.wait().ok();
    }
    let log = std::fs::read_to_string(&log_path).unwrap_or_default();
    assert!(
        status.is_some_and(|s| s.success()),
        "cargo build of the scaffold failed or timed out ({status:?}):\n{log}"
    );
    started.elapsed()
}

#[test]
fn the_scaffold_builds_outside_the_workspace_and_passes_conformance() {
    let tmp = tempfile::tempdir().unwrap();
    // An unrelated workspace above the crate: without a [workspace] table
    // of its own, cargo would refuse to build it there.
    std::fs::write(tmp.path().join("Cargo.toml"), "[workspace]\nmembers = []\n").unwrap();

    let out = orrery(tmp.path(), &["plugin", "new", "acme"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("cargo build"),
        "{}",
        text(&out.stdout)
    );
    let crate_dir = tmp.path().join("acme");
    for file in [
        "Cargo.toml",
        "src/main.rs",
        "conformance/note.json",
        "README.md",
        ".gitignore",
    ] {
        assert!(crate_dir.join(file).is_file(), "{file} not written");
    }

    let target = scaffold_target();
    let took = cargo_build(&crate_dir, &target);
    println!(
        "cargo build --offline of the scaffold: {:.1}s",
        took.as_secs_f64()
    );

    let binary = target.join("debug/orrery-plugin-acme");
    let out = orrery(
        &crate_dir,
        &[
            "plugin",
            "test",
            binary.to_str().unwrap(),
            "--fixtures",
            "conformance",
        ],
    );
    let report = text(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{report}\n{}",
        text(&out.stderr)
    );
    assert!(
        report.contains("concurrent_operations [Acme::Note]"),
        "{report}"
    );
    assert!(report.contains(" 0 failed"), "{report}");

    // The README's third command, with the notes kept in the temp dir.
    let notes = tmp.path().join("notes");
    let stack = std::fs::read_to_string(crate_dir.join("stack.yaml")).unwrap();
    let stack = stack.replace("/tmp/acme-notes", notes.to_str().unwrap());
    std::fs::write(crate_dir.join("stack.yaml"), stack).unwrap();
    let plugin_dir = target.join("debug");
    let data_dir = tmp.path().join("data");
    let common = [
        "--plugin-dir",
        plugin_dir.to_str().unwrap(),
        "--data-dir",
        data_dir.to_str().unwrap(),
    ];
    let out = orrery(
        &crate_dir,
        &[&["apply", "stack.yaml", "-y"][..], &common].concat(),
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let note = std::fs::read_to_string(notes.join("hello.json")).unwrap();
    assert!(note.contains("Hello from the acme plugin"), "{note}");
    let out = orrery(&crate_dir, &[&["plan", "stack.yaml"][..], &common].concat());
    assert!(
        text(&out.stdout).contains("No changes"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn names_that_are_paths_and_non_empty_directories_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    for name in ["../escape", "a/b", "Acme", "1acme", "acme-"] {
        let out = orrery(tmp.path(), &["plugin", "new", name]);
        assert!(!out.status.success(), "{name:?} accepted");
        assert!(
            text(&out.stderr).contains("plugin name"),
            "{}",
            text(&out.stderr)
        );
    }
    assert!(
        !tmp.path().join("escape").exists()
            && !tmp.path().parent().unwrap().join("escape").exists()
    );

    let taken = tmp.path().join("taken");
    std::fs::create_dir(&taken).unwrap();
    std::fs::write(taken.join("keep.txt"), "mine").unwrap();
    let out = orrery(tmp.path(), &["plugin", "new", "acme", "--dir", "taken"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(std::fs::read_dir(&taken).unwrap().count(), 1);

    // An empty directory is fine, and --sdk-version depends on the registry.
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    let out = orrery(
        tmp.path(),
        &[
            "plugin",
            "new",
            "acme",
            "--dir",
            "empty",
            "--sdk-version",
            "0.1",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let manifest = std::fs::read_to_string(tmp.path().join("empty/Cargo.toml")).unwrap();
    assert!(
        manifest.contains("orrery-plugin-sdk = \"0.1\""),
        "{manifest}"
    );
    assert!(!tmp.path().join("empty/Cargo.lock").exists());
}
