//! A store call made from an async task does not hold up the runtime: on a
//! multi-thread runtime with a single worker, a call waiting on SQLite's
//! write lock (held by another connection) leaves a second task running.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use orrery_state::StoredResource;

#[test]
fn a_waiting_store_call_leaves_the_runtime_running() {
    let dir = tempfile::tempdir().unwrap();
    let store = orrery_state::open_dir(dir.path()).unwrap();
    // Another connection takes the write lock and holds it until told.
    let (locked_tx, locked) = mpsc::channel();
    let (release, release_rx) = mpsc::channel::<()>();
    let db = dir.path().join("state.db");
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(db).unwrap();
        conn.execute_batch("BEGIN EXCLUSIVE").unwrap();
        locked_tx.send(()).unwrap();
        let _ = release_rx.recv_timeout(Duration::from_secs(10));
        conn.execute_batch("COMMIT").unwrap();
    });
    locked.recv_timeout(Duration::from_secs(10)).unwrap();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_time()
        .build()
        .unwrap();
    let ticks = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicBool::new(false));
    runtime.block_on(async {
        let ticker = {
            let (ticks, done) = (ticks.clone(), done.clone());
            tokio::spawn(async move {
                while !done.load(Ordering::SeqCst) {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    ticks.fetch_add(1, Ordering::SeqCst);
                }
            })
        };
        let write = {
            let store = store.clone();
            tokio::spawn(async move {
                store.put_resource(&StoredResource {
                    stack: "s".into(),
                    label: "a".into(),
                    resource_type: "T".into(),
                    ..Default::default()
                })
            })
        };
        // While the write waits for the lock, the ticker keeps ticking.
        // (A blocking wait: this thread is not one of the runtime's.)
        let before = ticks.load(Ordering::SeqCst);
        orrery_testing::wait_until(
            "20 ticks while the store call waits (else the runtime stalled behind it)",
            Duration::from_secs(5),
            || ticks.load(Ordering::SeqCst) >= before + 20,
        );
        assert!(!write.is_finished(), "the write waited for the lock");
        release.send(()).unwrap();
        write.await.unwrap().unwrap();
        done.store(true, Ordering::SeqCst);
        ticker.await.unwrap();
    });
    holder.join().unwrap();
    assert_eq!(store.resources(Some("s")).unwrap().len(), 1);
}
