//! Discovery of 1,000 and 10,000 testbed things (a real plugin process,
//! `Testbed::Noop::Thing` created in-process first, each with a 256-byte
//! value; 10% of them managed by a stack) across `list` pages of 100, into
//! a fresh SQLite store:
//!
//! - **raw listing** (baseline): page through every page, count, drop;
//! - **discovery**: filter, check the managed index, record the unmanaged
//!   ones, page by page, unlimited rate;
//! - **again**: the same discovery with every record already there;
//! - **rate-limited**: discovery of a second, identical target at 10 pages/s
//!   with a burst of 5, against the floor that rate allows;
//! - **listing held** (baseline, run last so memory freed by the other
//!   phases cannot hide its growth): page through and keep every page, as a
//!   discovery holding all pages before recording would.
//!
//! For each phase: elapsed, pages, resources/s and the primary's peak
//! resident memory above its level at the start of the phase (VmHWM from
//! /proc/self/status, reset through /proc/self/clear_refs; the plugin is a
//! separate process and is not counted).
//!
//! `cargo build --workspace --bins && cargo bench -p orrery-primary --bench discovery`
//! `ORRERY_BENCH_QUICK=1` runs 500 things.

use orrery_testing::nats as common;

use std::time::{Duration, Instant};

use futures::StreamExt;
use orrery_bus::plugin_host::{PluginHost, PluginSpec};
use orrery_bus::transport::{LocalBus, Transport};
use orrery_plugin_sdk::Answer;
use orrery_primary::discovery::{self, Options, TargetRef};
use orrery_primary::scheduler::{BucketLimit, RateRegistry};
use orrery_primary::stack::{Catalog, TargetDecl};
use orrery_primary::state::{self, StoredResource};
use orrery_schema::{CreateRequest, ListRequest, ListedResource, PropertyMap, Request, Target};

const THING: &str = "Testbed::Noop::Thing";
const PAGE: u32 = 100;

fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    fn malloc_trim(pad: usize) -> i32;
}

/// Returns freed heap to the kernel (so that memory freed by an earlier
/// phase cannot hide a later phase's growth), then resets the peak (VmHWM)
/// to the current resident size; false when the kernel does not allow it.
fn reset_peak() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: glibc's malloc_trim only releases free heap pages.
    unsafe {
        malloc_trim(0);
    }
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

struct Phase {
    elapsed: Duration,
    pages: u64,
    resources: u64,
    peak_kb: u64,
    note: String,
}

/// Runs `f`, measuring wall time and the peak resident memory above the
/// resident size at its start.
async fn measure<F, Fut>(f: F) -> Phase
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = (u64, u64, String)>,
{
    reset_peak();
    let base = status_kb("VmRSS:").unwrap_or(0);
    let t = Instant::now();
    let (pages, resources, note) = f().await;
    let elapsed = t.elapsed();
    let peak = status_kb("VmHWM:").unwrap_or(0);
    Phase {
        elapsed,
        pages,
        resources,
        peak_kb: peak.saturating_sub(base),
        note,
    }
}

fn target(name: &str) -> Target {
    Target {
        name: name.into(),
        config: PropertyMap::new(),
        ..Default::default()
    }
}

async fn create_things(bus: &LocalBus, target_name: &str, n: usize) {
    let payload = "x".repeat(256);
    let request = |i: usize| {
        let mut properties = PropertyMap::new();
        properties.insert("name".into(), format!("thing-{i:06}").into());
        properties.insert("value".into(), payload.clone().into());
        Request::Create(CreateRequest {
            request_id: format!("{target_name}-{i}"),
            resource_type: THING.into(),
            label: format!("r{i}"),
            target: target(target_name),
            properties,
        })
    };
    futures::stream::iter(0..n)
        .map(|i| {
            let r = request(i);
            async move { bus.send("testbed", &r, Duration::from_secs(30)).await }
        })
        .buffer_unordered(64)
        .for_each(|a| async move {
            assert!(matches!(a, Ok(Answer::Progress(_))), "{a:?}");
        })
        .await;
}

/// Pages through every thing of `target_name`; keeps the pages when `hold`.
async fn raw_listing(bus: &LocalBus, target_name: &str, hold: bool) -> (u64, u64, String) {
    let mut token = None;
    let (mut pages, mut count) = (0, 0);
    let mut held: Vec<ListedResource> = Vec::new();
    loop {
        let request = Request::List(ListRequest {
            parent: None,
            request_id: uuid::Uuid::now_v7().to_string(),
            resource_type: THING.into(),
            target: target(target_name),
            page_size: PAGE,
            page_token: token.take(),
        });
        let Ok(Answer::List(page)) = bus.send("testbed", &request, Duration::from_secs(30)).await
        else {
            panic!("list failed");
        };
        pages += 1;
        count += page.resources.len() as u64;
        if hold {
            held.extend(page.resources);
        }
        match page.next_page_token {
            Some(t) => token = Some(t),
            None => break,
        }
    }
    let note = if hold {
        format!("{} held", held.len())
    } else {
        String::new()
    };
    drop(held);
    (pages, count, note)
}

fn managed_tenth(store: &dyn state::StateStore, target_name: &str, n: usize) {
    let decl = TargetDecl {
        name: target_name.into(),
        plugin: "testbed".into(),
        config: PropertyMap::new(),
    };
    let stack = format!("stack-{target_name}");
    let mut targets = store.targets(&stack).unwrap();
    targets.push(decl);
    store.put_targets(&stack, &targets).unwrap();
    for i in (0..n).step_by(10) {
        store
            .put_resource(&StoredResource {
                stack: stack.clone(),
                label: format!("r{i}"),
                resource_type: THING.into(),
                target: target_name.into(),
                plugin: "testbed".into(),
                native_id: format!("thing-{i:06}"),
                managed: true,
                ..Default::default()
            })
            .unwrap();
    }
}

async fn run_discovery(
    bus: &LocalBus,
    catalog: &Catalog,
    store: &dyn state::StateStore,
    target_name: &str,
    options: &Options,
) -> (u64, u64, String) {
    let targets: Vec<TargetRef> =
        discovery::targets_to_discover(store, Some(&format!("stack-{target_name}")), None).unwrap();
    let r = discovery::discover(
        bus,
        catalog,
        &RateRegistry::local(),
        store,
        &targets,
        options,
    )
    .await
    .unwrap();
    assert!(r.failures.is_empty(), "{r:?}");
    (
        r.pages,
        r.listed,
        format!(
            "{} unmanaged, {} managed, {} written, rate-limited {} ms",
            r.unmanaged, r.managed, r.written, r.rate_limited_ms
        ),
    )
}

fn row(n: usize, name: &str, p: &Phase, baseline: Option<&Phase>) {
    let ratio = baseline
        .map(|b| format!("{:.2}", p.elapsed.as_secs_f64() / b.elapsed.as_secs_f64()))
        .unwrap_or_else(|| "-".into());
    println!(
        "| {n} | {name} | {:.3} s | {} | {:.0} | {:.1} | {ratio} | {} |",
        p.elapsed.as_secs_f64(),
        p.pages,
        p.resources as f64 / p.elapsed.as_secs_f64(),
        p.peak_kb as f64 / 1024.0,
        p.note
    );
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let quick = std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !std::env::args().any(|a| a == "--bench");
    let sizes: &[usize] = if quick { &[500] } else { &[1_000, 10_000] };
    let host = PluginHost::start(PluginSpec::new(common::binary("orrery-plugin-testbed")))
        .await
        .unwrap();
    let mut catalog = Catalog::new();
    catalog.insert(host.announcement().clone());
    let bus = LocalBus::new([host]);
    let resettable = reset_peak();

    println!(
        "| things | phase | elapsed | pages | resources/s | primary peak above start (MiB) | time vs raw listing | notes |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        let (a, b) = (format!("lab-{n}"), format!("limited-{n}"));
        create_things(&bus, &a, n).await;
        create_things(&bus, &b, n).await;
        let dir = tempfile::tempdir().unwrap();
        let store = state::open_dir(dir.path()).unwrap();
        managed_tenth(store.as_ref(), &a, n);
        managed_tenth(store.as_ref(), &b, n);
        let unlimited = Options {
            page_size: PAGE,
            ..Options::default()
        };

        let raw = measure(|| raw_listing(&bus, &a, false)).await;
        row(n, "raw listing (baseline)", &raw, None);
        let first = measure(|| run_discovery(&bus, &catalog, store.as_ref(), &a, &unlimited)).await;
        row(n, "discovery (records written)", &first, Some(&raw));
        let again = measure(|| run_discovery(&bus, &catalog, store.as_ref(), &a, &unlimited)).await;
        row(n, "discovery again (nothing new)", &again, Some(&raw));
        let limit = BucketLimit {
            rate_per_sec: 10.0,
            burst: 5,
        };
        let limited_options = Options {
            rate_overrides: [(format!("Testbed/{b}"), limit)].into(),
            ..unlimited.clone()
        };
        let limited =
            measure(|| run_discovery(&bus, &catalog, store.as_ref(), &b, &limited_options)).await;
        // Floor: every page after the burst waits 1/rate.
        let floor = (limited.pages.saturating_sub(limit.burst as u64)) as f64 / limit.rate_per_sec;
        let mut limited = limited;
        limited.note = format!(
            "{}; 10 pages/s burst 5: floor {floor:.2} s, {:.1} pages/s observed",
            limited.note,
            limited.pages as f64 / limited.elapsed.as_secs_f64()
        );
        assert!(
            limited.elapsed.as_secs_f64() >= floor * 0.99,
            "rate exceeded"
        );
        row(n, "discovery, rate-limited", &limited, Some(&raw));
        // Last, so that memory freed by the phases above cannot hide its growth.
        let held = measure(|| raw_listing(&bus, &a, true)).await;
        row(n, "listing, all pages held (baseline)", &held, Some(&raw));
        let unmanaged = store.resources(Some("")).unwrap().len();
        assert_eq!(unmanaged, 2 * (n - n.div_ceil(10)));
    }
    println!(
        "\nPeak memory: primary process only (the plugin is a separate process){}; VmHWM at exit {} MiB.",
        if resettable {
            ", peak reset before each phase"
        } else {
            " — VmHWM could not be reset: figures are cumulative"
        },
        status_kb("VmHWM:").unwrap_or(0) / 1024
    );
    bus.stop(Duration::from_secs(5)).await;
}
