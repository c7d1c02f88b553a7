//! What the satellite benches share: quick mode, the plugin binary to
//! supervise (release-built for a full run), the request they send.

use std::path::{Path, PathBuf};
use std::process::Command;

use orrery_plugin_sdk::schema::{CreateRequest, PropertyMap, Request, Target, Value};

use crate::common::{self, binary};

// The allocator of the `orrery-satellite` binary, whose relay these benches
// run in-process; raw NATS, measured beside it, gets it too.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub const PLUGIN: &str = "orrery-plugin-testbed";

pub fn quick() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // `cargo bench` passes `--bench`; `cargo test --benches` does not, and
    // then a smoke test is all that is wanted.
    args.iter().any(|a| a == "--quick")
        || std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !args.iter().any(|a| a == "--bench")
}

/// The target directory this bench was built into: the executable lives in
/// `<target>/<profile>/deps/`.
pub fn target_dir() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    Some(exe.parent()?.parent()?.parent()?.to_owned())
}

/// The plugin binary to supervise: release-built for a full run (see the
/// module comment), the debug build for a quick one.
pub fn plugin_binary(quick: bool) -> PathBuf {
    if let Some(path) = std::env::var_os("ORRERY_BENCH_PLUGIN") {
        return PathBuf::from(path);
    }
    if quick {
        return binary(PLUGIN);
    }
    let Some(target) = target_dir() else {
        eprintln!("warning: cannot locate the target directory; using the debug plugin build");
        return binary(PLUGIN);
    };
    let release = target.join("release").join(PLUGIN);
    match build_release_plugin(&target) {
        Ok(()) if release.exists() => return release,
        Ok(()) => eprintln!(
            "warning: cargo built {PLUGIN} but {} does not exist",
            release.display()
        ),
        Err(e) => eprintln!("warning: cannot build the release {PLUGIN}: {e}"),
    }
    if release.exists() {
        eprintln!(
            "warning: using the existing, possibly stale, {}",
            release.display()
        );
        return release;
    }
    eprintln!("warning: using the DEBUG {PLUGIN}; the figures overstate the plugin's cost");
    binary(PLUGIN)
}

pub fn build_release_plugin(target: &Path) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    eprintln!("building the release {PLUGIN} (cargo build --release -p {PLUGIN})");
    let status = Command::new(cargo)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            PLUGIN,
            "--bin",
            PLUGIN,
        ])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(common::workspace_root())
        .status()
        .map_err(|e| e.to_string())?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("cargo exited with {status}"))
    }
}

pub fn request(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("bench-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: "bench".into(),
        target: Target {
            name: "bench".into(),
            config: PropertyMap::new(),
        },
        properties: PropertyMap::from([
            ("name".to_owned(), Value::from(format!("thing-{i}"))),
            ("value".to_owned(), Value::from("x".repeat(150))),
        ]),
    })
}
