//! What the satellite benches share: quick mode, the plugin binary to
//! supervise (release-built for a full run), the request they send.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use orrery_plugin_sdk::schema::{
    CreateRequest, PropertyMap, Request, Target, UpdateRequest, Value,
};

use futures::StreamExt;
use orrery_satellite::bus::NatsBus;

use crate::common::{self, binary};

// The allocator of the `orrery-satellite` binary, whose relay these benches
// run in-process; raw NATS, measured beside it, gets it too.
#[global_allocator]
static ALLOCATOR: orrery_plugin_sdk::Allocator = orrery_plugin_sdk::Allocator;

/// How many things the benches' updates cycle through.
pub const THINGS: usize = 1_024;

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

/// The requests Orrery's calls send, built before the clock starts (raw
/// NATS's payload is built once too): updates of `n` things, handed out in
/// turn. An update answers with the thing's properties, as a create does,
/// but leaves the plugin holding `n` things however many calls run; a
/// create per call would time the testbed's growing map, and a repeated
/// create its `AlreadyExists` failure.
pub struct Requests {
    built: Vec<Request>,
    next: std::sync::atomic::AtomicUsize,
}

impl Requests {
    /// Updates of the things `request(0..n)` creates.
    pub fn new(n: usize) -> Self {
        Requests {
            built: (0..n.max(1)).map(update).collect(),
            next: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The creates to send, untimed, before the updates.
    pub fn creates(&self) -> impl Iterator<Item = Request> {
        (0..self.built.len()).map(request)
    }

    /// The next request.
    pub fn next(&self) -> &Request {
        let i = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.built[i % self.built.len()]
    }
}

/// Creates the things `requests` update, each `times` times.
pub async fn populate(bus: &NatsBus, requests: &Requests, times: usize) {
    let creates: Vec<_> = requests.creates().collect();
    futures::stream::iter((0..times).flat_map(|_| creates.iter()))
        .for_each_concurrent(64, |create| async move {
            bus.send("testbed", create, Duration::from_secs(60))
                .await
                .unwrap();
        })
        .await;
}

/// An update of the thing `request(i)` creates, to the same properties.
fn update(i: usize) -> Request {
    let Request::Create(create) = request(i) else {
        unreachable!("`request` builds creates")
    };
    Request::Update(UpdateRequest {
        request_id: create.request_id,
        resource_type: create.resource_type,
        label: create.label,
        target: create.target,
        native_id: format!("thing-{i}"),
        prior_properties: PropertyMap::new(),
        properties: create.properties,
    })
}

pub fn request(i: usize) -> Request {
    Request::Create(CreateRequest {
        request_id: format!("bench-{i}"),
        resource_type: "Testbed::Noop::Thing".into(),
        label: "bench".into(),
        target: Target {
            name: "bench".into(),
            config: PropertyMap::new(),
            ..Default::default()
        },
        properties: PropertyMap::from([
            ("name".to_owned(), Value::from(format!("thing-{i}"))),
            ("value".to_owned(), Value::from("x".repeat(150))),
        ]),
    })
}

/// CPU time (user + system) a process has used so far: the run time of each
/// of its threads, from Linux's `/proc/<pid>/task/*/schedstat` (threads that
/// exited during the run are missed; the runtimes here keep theirs).
pub fn cpu_time(pid: u32) -> Option<Duration> {
    let mut total = 0u64;
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let path = task.ok()?.path().join("schedstat");
        if let Ok(stat) = std::fs::read_to_string(path) {
            total += stat.split_whitespace().next()?.parse::<u64>().ok()?;
        }
    }
    Some(Duration::from_nanos(total))
}

/// Children of this process with the command name `name`.
pub fn children_named(name: &str) -> Vec<u32> {
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid ...`; comm may hold spaces and parens.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                return false;
            };
            let ppid = stat[close + 1..].split_whitespace().nth(1);
            &stat[open + 1..close] == name && ppid == Some(me.to_string().as_str())
        })
        .collect()
}
