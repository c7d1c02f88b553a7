//! Attacks that try to walk the plugin out of its root through symlinks:
//! a helper link to the root used as a path component, links through
//! links, and a parent directory swapped for a link to an outside directory
//! while requests run. After each, nothing outside the root has changed.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use orrery_plugin_sdk::schema::{ErrorCode, OperationStatus, ProgressEvent, PropertyMap, Value};
use rustix::fs::{renameat_with, RenameFlags, CWD};
use tokio::task::JoinSet;

use crate::common::{failed, ok, props, Env, DIR, FILE, LINK};

fn link(path: &str, target: &str) -> PropertyMap {
    props([("path", path.into()), ("target", target.into())])
}

fn file(path: &str, content: &str) -> PropertyMap {
    props([("path", path.into()), ("content", content.into())])
}

#[tokio::test]
async fn a_helper_link_to_the_root_leads_nowhere_outside() {
    let env = Env::beside_outside().await;
    std::fs::write(env.outside().join("secret"), "outside").unwrap();
    let before = snapshot(&env.outside());
    ok(&env.create(LINK, link("h", ".")).await);

    // Each `h` is the root again, so each target climbs one level more than
    // the text of its path suggests.
    for (path, target) in [
        ("h/esc", "../outside"),
        ("h/h/etc", "../../etc"),
        ("h/h/h/up", "../../../outside/secret"),
    ] {
        let message = failed(
            &env.create(LINK, link(path, target)).await,
            ErrorCode::InvalidRequest,
        );
        assert!(message.contains(&format!("`{path}`")), "{message}");
        // Refused at the first link it goes through, before the target's
        // text is even looked at.
        assert!(message.contains("goes through a symlink"), "{message}");
    }
    // Paths that climb back out through the helper.
    for path in ["h/../outside/x", "h/h/../../outside/x", "h/../../x"] {
        for resource_type in [DIR, FILE] {
            let spec = props([("path", path.into())]);
            failed(
                &env.create(resource_type, spec).await,
                ErrorCode::InvalidRequest,
            );
        }
        failed(&env.read(FILE, path).await, ErrorCode::InvalidRequest);
        failed(&env.delete(FILE, path).await, ErrorCode::InvalidRequest);
    }
    // Nor does a path through the helper reach the root itself: `h/inside`
    // would be a second id of `inside` (issue 43: a stack reached another
    // stack's `index.html` through `up -> .`).
    std::fs::write(env.path("inside"), "theirs").unwrap();
    for path in ["h/inside", "h/h/inside"] {
        let message = failed(
            &env.create(FILE, file(path, "x")).await,
            ErrorCode::InvalidRequest,
        );
        assert!(message.contains("symlink"), "{message}");
        failed(&env.read(FILE, path).await, ErrorCode::InvalidRequest);
        failed(&env.delete(FILE, path).await, ErrorCode::InvalidRequest);
        failed(
            &env.update(FILE, path, file(path, "mine")).await,
            ErrorCode::InvalidRequest,
        );
    }
    assert_eq!(
        std::fs::read_to_string(env.path("inside")).unwrap(),
        "theirs"
    );

    assert_eq!(escaping_links(&env.root), Vec::<String>::new());
    assert_unchanged(&env.outside(), &before);
}

#[tokio::test]
async fn a_link_through_a_link_cannot_lead_outside() {
    let env = Env::beside_outside().await;
    std::fs::write(env.outside().join("secret"), "outside").unwrap();
    let before = snapshot(&env.outside());

    // `a` → `b`, and `b` → `../outside` made through a helper link, so
    // that its text looks one level deep.
    ok(&env.create(LINK, link("a", "b")).await);
    ok(&env.create(LINK, link("h", ".")).await);
    let message = failed(
        &env.create(LINK, link("h/b", "../outside")).await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("`h/b`"), "{message}");
    // `..` after a link: `d/up` is the root, so `up/../outside` from `d`
    // is outside it.
    ok(&env.create(DIR, props([("path", "d".into())])).await);
    ok(&env.create(LINK, link("d/up", "..")).await);
    let message = failed(
        &env.create(LINK, link("d/l", "up/../outside")).await,
        ErrorCode::InvalidRequest,
    );
    assert!(message.contains("`d/l`"), "{message}");
    // Creating the link before the name it climbs through does not help:
    // `m` → `.` would make it leave the root.
    failed(
        &env.create(LINK, link("l", "m/../outside")).await,
        ErrorCode::InvalidRequest,
    );
    ok(&env.create(LINK, link("m", ".")).await);

    // Someone else plants `b` → `../outside`: nothing goes through `a`.
    std::os::unix::fs::symlink("../outside", env.path("b")).unwrap();
    for path in ["a/x", "a/secret"] {
        for resource_type in [DIR, FILE] {
            let message = failed(
                &env.create(resource_type, props([("path", path.into())]))
                    .await,
                ErrorCode::InvalidRequest,
            );
            assert!(message.contains("symlink"), "{path}: {message}");
        }
        failed(
            &env.create(LINK, link(path, "y")).await,
            ErrorCode::InvalidRequest,
        );
        failed(&env.read(FILE, path).await, ErrorCode::InvalidRequest);
        let update = props([("path", path.into()), ("mode", 0o777.into())]);
        failed(
            &env.update(FILE, path, update).await,
            ErrorCode::InvalidRequest,
        );
        failed(
            &env.update(FILE, path, file(path, "changed")).await,
            ErrorCode::InvalidRequest,
        );
        failed(&env.delete(FILE, path).await, ErrorCode::InvalidRequest);
    }

    // Only through the planted `b`.
    assert_eq!(escaping_links(&env.root), ["a", "b"]);
    assert_unchanged(&env.outside(), &before);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_while_a_parent_is_swapped_for_a_link_stay_inside() {
    let env = Arc::new(Env::beside_outside().await);
    std::fs::create_dir(env.path("d")).unwrap();
    let swapper = Swapper::start(&env, "d");

    let swaps_before = swapper.swaps();
    let mut requests = JoinSet::new();
    for i in 0..400 {
        let env = env.clone();
        requests.spawn(async move {
            let path = format!("d/f{i}");
            let event = env.create(FILE, file(&path, "inside")).await;
            (path, event)
        });
    }
    let events = requests.join_all().await;
    let swaps_during = swapper.swaps() - swaps_before;
    swapper.stop();

    assert!(swaps_during > 0, "the directory was never swapped");
    assert_unchanged(&env.outside(), &BTreeMap::new());
    let mut created = 0;
    for (path, event) in &events {
        if event.status == OperationStatus::Success {
            created += 1;
            let content = std::fs::read_to_string(env.path(path));
            assert_eq!(content.ok().as_deref(), Some("inside"), "{path}");
        } else {
            assert_refused(event);
        }
    }
    eprintln!("{created} of 400 created over {swaps_during} swaps");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_chmods_and_deletes_through_a_swapped_parent_touch_nothing_outside() {
    let env = Arc::new(Env::beside_outside().await);
    // The same names inside (`root/d`) and outside, to be found through `d`
    // when it is the link.
    for dir in [env.path("d"), env.outside()] {
        std::fs::create_dir_all(&dir).unwrap();
        let content = if dir == env.outside() {
            "outside"
        } else {
            "inside"
        };
        for i in 0..100 {
            let path = dir.join(format!("f{i}"));
            std::fs::write(&path, content).unwrap();
            std::fs::set_permissions(&path, PermissionsExt::from_mode(0o640)).unwrap();
        }
        for i in 0..50 {
            let path = dir.join(format!("sub{i}"));
            std::fs::create_dir(&path).unwrap();
            std::fs::set_permissions(&path, PermissionsExt::from_mode(0o750)).unwrap();
            std::os::unix::fs::symlink("x", dir.join(format!("l{i}"))).unwrap();
        }
    }
    let before = snapshot(&env.outside());
    let swapper = Swapper::start(&env, "d");

    let swaps_before = swapper.swaps();
    let mut requests = JoinSet::new();
    let mut send = |op: Op, resource_type: &'static str, path: String| {
        let env = env.clone();
        requests.spawn(async move {
            let event = match op {
                Op::Read => env.read(resource_type, &path).await,
                Op::Chmod => {
                    let spec = props([("path", path.as_str().into()), ("mode", 0o777.into())]);
                    env.update(resource_type, &path, spec).await
                }
                Op::Write => {
                    env.update(resource_type, &path, file(&path, "changed"))
                        .await
                }
                Op::Delete => env.delete(resource_type, &path).await,
            };
            (op, path, event)
        });
    };
    for i in 0..100 {
        for op in [Op::Read, Op::Chmod, Op::Write, Op::Delete] {
            send(op, FILE, format!("d/f{i}"));
        }
    }
    for i in 0..50 {
        for op in [Op::Read, Op::Chmod, Op::Delete] {
            send(op, DIR, format!("d/sub{i}"));
        }
        for op in [Op::Read, Op::Delete] {
            send(op, LINK, format!("d/l{i}"));
        }
    }
    let events = requests.join_all().await;
    let swaps_during = swapper.swaps() - swaps_before;
    swapper.stop();

    assert!(swaps_during > 0, "the directory was never swapped");
    assert_unchanged(&env.outside(), &before);
    let mut succeeded = 0;
    for (op, path, event) in &events {
        match event.status {
            OperationStatus::Success => {
                succeeded += 1;
                let content = event.properties.as_ref().and_then(|p| p.get("content"));
                assert_ne!(content, Some(&Value::from("outside")), "{op:?} {path}");
            }
            // Deleted by a concurrent request, missing for a moment, or refused.
            _ if event.error_code == Some(ErrorCode::NotFound) => {}
            _ => assert_refused(event),
        }
    }
    eprintln!(
        "{succeeded} of {} succeeded over {swaps_during} swaps",
        events.len()
    );
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    Read,
    Chmod,
    Write,
    Delete,
}

/// A request refused because its parent was a link out of the root, or
/// missing for a moment, or changed while it ran: never a failure of the
/// plugin itself.
#[track_caller]
fn assert_refused(event: &ProgressEvent) {
    assert_eq!(event.status, OperationStatus::Failure, "{event:?}");
    let code = event.error_code.as_ref();
    assert!(
        matches!(
            code,
            Some(ErrorCode::InvalidRequest | ErrorCode::ResourceConflict)
        ),
        "{event:?}"
    );
}

/// Swaps a directory of the root with a symlink to the outside directory
/// and back, over and over on a thread of its own, until stopped: each
/// swap is one `renameat2(RENAME_EXCHANGE)` of `<dir>` and `<dir>.link`, so
/// `<dir>` is always one or the other.
struct Swapper {
    stop: Arc<AtomicBool>,
    swaps: Arc<AtomicUsize>,
    thread: JoinHandle<()>,
}

impl Swapper {
    /// Starts swapping and returns once the first swap is done.
    fn start(env: &Env, dir: &str) -> Swapper {
        let real = env.path(dir);
        let link = env.path(&format!("{dir}.link"));
        std::os::unix::fs::symlink(env.outside(), &link).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let swaps = Arc::new(AtomicUsize::new(0));
        let thread = std::thread::spawn({
            let (stop, swaps) = (stop.clone(), swaps.clone());
            move || {
                let exchange = || {
                    renameat_with(CWD, &real, CWD, &link, RenameFlags::EXCHANGE)
                        .unwrap_or_else(|e| panic!("exchanging {real:?} and {link:?}: {e}"));
                };
                while !stop.load(Ordering::Relaxed) {
                    exchange(); // `dir` is the link
                    swaps.fetch_add(1, Ordering::Relaxed);
                    exchange(); // `dir` is the directory again
                }
            }
        });
        let swapper = Swapper {
            stop,
            swaps,
            thread,
        };
        orrery_testing::wait_until("the swapper's first swap", Duration::from_secs(10), || {
            swapper.swaps() > 0
        });
        swapper
    }

    fn swaps(&self) -> usize {
        self.swaps.load(Ordering::Relaxed)
    }

    /// Stops swapping, leaving the real directory in place.
    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().expect("the swapper failed");
    }
}

/// Every entry under `dir` (not following links): its kind, mode and
/// content or link target, by relative path.
fn snapshot(dir: &Path) -> BTreeMap<String, String> {
    let mut entries = BTreeMap::new();
    snapshot_into(dir, "", &mut entries);
    entries
}

fn snapshot_into(dir: &Path, prefix: &str, entries: &mut BTreeMap<String, String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let rel = format!("{prefix}{}", entry.file_name().to_str().unwrap());
        let meta = std::fs::symlink_metadata(entry.path()).unwrap();
        let mode = meta.permissions().mode() & 0o7777;
        let what = if meta.is_symlink() {
            format!("link -> {:?}", std::fs::read_link(entry.path()).unwrap())
        } else if meta.is_dir() {
            snapshot_into(&entry.path(), &format!("{rel}/"), entries);
            format!("dir {mode:o}")
        } else {
            let content = std::fs::read_to_string(entry.path()).unwrap();
            format!("file {mode:o} {content:?}")
        };
        entries.insert(rel, what);
    }
}

/// Asserts that `dir` still holds what `before` recorded, naming each
/// entry that differs.
#[track_caller]
fn assert_unchanged(dir: &Path, before: &BTreeMap<String, String>) {
    let after = snapshot(dir);
    let changed: Vec<String> = before
        .keys()
        .chain(after.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .filter(|rel| before.get(*rel) != after.get(*rel))
        .map(|rel| format!("{rel}: {:?} -> {:?}", before.get(rel), after.get(rel)))
        .collect();
    assert!(
        changed.is_empty(),
        "{} changed outside the root: {changed:#?}",
        changed.len()
    );
}

/// The symlinks under `root` that lead outside it: followed when they
/// resolve, else taken lexically from their real directory.
fn escaping_links(root: &Path) -> Vec<String> {
    let root = root.canonicalize().unwrap();
    snapshot(&root)
        .into_iter()
        .filter(|(_, what)| what.starts_with("link"))
        .map(|(rel, _)| rel)
        .filter(|rel| {
            let link = root.join(rel);
            let resolved = link.canonicalize().unwrap_or_else(|_| {
                let parent = link.parent().unwrap().canonicalize().unwrap();
                normalize(&parent.join(std::fs::read_link(&link).unwrap()))
            });
            !resolved.starts_with(&root)
        })
        .collect()
}

/// `path` with `.` and `..` taken lexically.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}
