//! The hub library against a real nats-server with JetStream and real
//! plugin binaries: publish, install, mirror. (Serving what is installed,
//! and rolling on a lock change, is tested with the satellite:
//! `satellite/tests/it/hub.rs`.)

use crate::common;

use std::time::{Duration, Instant};

use common::NatsServer;
use orrery_hub::package;
use orrery_hub::testing::{build, requirement};
use orrery_hub::{host_platform, Hub, Installer, LockEntry, PublisherKey, TrustedKeys};
use orrery_testing::plugin_copy;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_20_mib_artifact_publishes_and_installs_on_two_satellites_at_once() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let bin = plugin_copy(dir.path(), "orrery-plugin-local", "big");
    let size = 20 * 1024 * 1024;
    let file = std::fs::OpenOptions::new().write(true).open(&bin).unwrap();
    assert!(file.metadata().unwrap().len() <= size);
    file.set_len(size).unwrap();
    drop(file);
    let p = build(&bin, "3.0.0", Some(&key), &dir.path().join("pkg"), None).await;
    assert_eq!(p.manifest.manifest.artifacts[&host_platform()].size, size);

    let hub = Hub::nats(server.client().await).await.unwrap();
    let started = Instant::now();
    hub.publish(&p).await.unwrap();
    let publish = started.elapsed();

    let installer = |n: usize| {
        let trusted = trusted.clone();
        let cache = dir.path().join(format!("cache-{n}"));
        let server = &server;
        async move {
            let hub = Hub::nats_existing(server.client().await).await.unwrap();
            let installer = Installer::new(hub, trusted, cache);
            let started = Instant::now();
            let installed = installer
                .install(&requirement("local@^3"), None)
                .await
                .unwrap();
            (installed, started.elapsed())
        }
    };
    let ((a, ta), (b, tb)) = tokio::join!(installer(1), installer(2));
    eprintln!("20 MiB: publish {publish:.2?}, two concurrent installs {ta:.2?} and {tb:.2?}");
    assert_eq!(a.sha256, b.sha256);
    assert_eq!(std::fs::metadata(&a.path).unwrap().len(), size);
    assert_eq!(
        std::fs::read(&a.path).unwrap(),
        std::fs::read(&b.path).unwrap()
    );
    // The installed binary is the real plugin and runs.
    let announcement = package::read_announcement(&b.path, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(announcement.name, "local");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_hub_mirrored_from_jetstream_serves_an_air_gapped_satellite() {
    let server = NatsServer::start().await;
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let bin = plugin_copy(dir.path(), "orrery-plugin-local", "mirror");
    let p = build(&bin, "1.4.0", Some(&key), &dir.path().join("pkg"), None).await;
    let hub = Hub::nats(server.client().await).await.unwrap();
    hub.publish(&p).await.unwrap();
    hub.yank("local", "1.4.0", true, "superseded", &key)
        .await
        .unwrap();

    let offline = Hub::dir(dir.path().join("usb")).unwrap();
    assert_eq!(hub.mirror_to(&offline).await.unwrap(), 1);
    assert_eq!(hub.mirror_to(&offline).await.unwrap(), 0, "idempotent");
    let entry = offline.entry("local", "1.4.0").await.unwrap();
    assert!(
        entry.is_yanked(&trusted),
        "the signed yank travels with the entry"
    );

    // Yanked: a fresh resolve refuses, a pin installs (signature intact).
    let installer = Installer::new(offline, trusted, dir.path().join("cache"));
    let e = installer
        .install(&requirement("local@^1"), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "all-yanked", "{e}");
    let pin = LockEntry {
        name: "local".into(),
        version: "1.4.0".into(),
        ..LockEntry::default()
    };
    let installed = installer
        .install(&requirement("local@^1"), Some(&pin))
        .await
        .unwrap();
    assert!(installed.yanked);
    assert_eq!(installed.manifest.version, "1.4.0");
}
