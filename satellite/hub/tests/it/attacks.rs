//! Attacks on the hub's trust model (issue #14, item 7), each played
//! against a directory hub through the storage layer, the way someone with
//! write access to the hub (but no trusted publisher's secret key) could.
//! Each of these failed before yanks were signed, keys were bound to plugin
//! names, untrusted versions were skipped and index keys were checked.
//! (Rolling a serving satellite back by editing its lock file is in
//! `satellite/tests/it/hub.rs`, which has a satellite to roll.)
//!
//! The packages are built by hand (no plugin binary is run): these tests
//! resolve and install, which verify and download, but never execute.

use std::path::Path;

use orrery_hub::manifest::{Artifact, Manifest, MANIFEST_FORMAT};
use orrery_hub::package::{Package, MANIFEST_FILE};
use orrery_hub::store::index_key;
use orrery_hub::yank::{SignedYank, YankStatement};
use orrery_hub::{
    binary_name, host_platform, sha256_hex, Hub, Installer, LockEntry, PublisherKey, Requirement,
    TrustedKeys,
};

/// A signed package of `name@version` whose "binary" is a small script.
fn package(dir: &Path, name: &str, version: &str, key: &PublisherKey) -> Package {
    let out = dir.join(format!("pkg-{name}-{version}-{}", key.key_id()));
    let platform = host_platform();
    std::fs::create_dir_all(out.join(&platform)).unwrap();
    let file = format!("{platform}/{}", binary_name(name));
    let bytes = format!("#!/bin/sh\n# {name} {version}\n");
    std::fs::write(out.join(&file), &bytes).unwrap();
    let mut manifest = Manifest {
        format: MANIFEST_FORMAT,
        name: name.into(),
        version: version.into(),
        announced_version: version.into(),
        protocol: orrery_schema::PROTOCOL_MAJOR,
        min_orrery: "0.1.0".into(),
        artifacts: [(
            platform,
            Artifact {
                file,
                size: bytes.len() as u64,
                sha256: sha256_hex(bytes.as_bytes()),
            },
        )]
        .into(),
        ..Manifest::default()
    };
    manifest.sign(key).unwrap();
    std::fs::write(out.join(MANIFEST_FILE), manifest.to_json_pretty().unwrap()).unwrap();
    Package::load(&out).unwrap()
}

/// Rewrites the stored index entry `key` with `edit`, as a compromised hub.
async fn edit_entry(hub: &Hub, key: &str, edit: impl FnOnce(&mut serde_json::Value)) {
    let stored = hub.store().get_entry(key).await.unwrap().unwrap();
    let mut doc: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
    edit(&mut doc);
    hub.store()
        .put_entry(key, &serde_json::to_vec(&doc).unwrap())
        .await
        .unwrap();
}

fn req(s: &str) -> Requirement {
    s.parse().unwrap()
}

/// A directory hub with `local` 1.0.0 and 1.1.0 signed by `key`.
async fn two_versions(dir: &Path, key: &PublisherKey) -> Hub {
    let hub = Hub::dir(dir.join("hub")).unwrap();
    for v in ["1.0.0", "1.1.0"] {
        hub.publish(&package(dir, "local", v, key)).await.unwrap();
    }
    hub
}

async fn resolved(installer: &Installer, requirement: &str) -> String {
    installer
        .resolve(&req(requirement))
        .await
        .unwrap()
        .manifest
        .manifest
        .version
}

#[tokio::test]
async fn editing_the_index_does_not_unyank_a_version() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = two_versions(dir.path(), &key).await;
    hub.yank("local", "1.1.0", true, "corrupts symlinks", &key)
        .await
        .unwrap();
    let installer = Installer::new(
        hub.clone(),
        TrustedKeys::from_keys([key.verifying_key()]),
        dir.path().join("cache"),
    );
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");

    // The attacker clears the flag, then also rewrites the signed
    // statement to an un-yank with a higher sequence.
    let key_110 = index_key("local", "1.1.0");
    edit_entry(&hub, &key_110, |doc| {
        doc["yanked"] = false.into();
        doc["yank_reason"] = "".into();
    })
    .await;
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");
    edit_entry(&hub, &key_110, |doc| {
        let mut forged = doc["yanks"][0].clone();
        forged["yanked"] = false.into();
        forged["sequence"] = 99.into();
        doc["yanks"].as_array_mut().unwrap().push(forged);
    })
    .await;
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");
    // An un-yank signed by a key of the attacker's own does not count either.
    let stranger = PublisherKey::generate().unwrap();
    hub.yank("local", "1.1.0", false, "", &stranger)
        .await
        .unwrap();
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");
    assert!(
        hub.entry("local", "1.1.0")
            .await
            .unwrap()
            .is_yanked(&TrustedKeys::from_keys([key.verifying_key()])),
        "still yanked for whoever trusts only the publisher"
    );

    // The publisher's own signed un-yank, newer than the yank, does.
    hub.yank("local", "1.1.0", false, "", &key).await.unwrap();
    assert_eq!(resolved(&installer, "local@^1").await, "1.1.0");
}

#[tokio::test]
async fn an_unsigned_or_forged_yank_does_not_roll_new_installs_back() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = two_versions(dir.path(), &key).await;
    let installer = Installer::new(
        hub.clone(),
        TrustedKeys::from_keys([key.verifying_key()]),
        dir.path().join("cache"),
    );
    let key_110 = index_key("local", "1.1.0");
    // The unsigned flag, as an older hub wrote it, or an attacker.
    edit_entry(&hub, &key_110, |doc| {
        doc["yanked"] = true.into();
        doc["yank_reason"] = "trust me".into();
    })
    .await;
    assert_eq!(resolved(&installer, "local@^1").await, "1.1.0");
    // A yank statement signed by a stranger's key.
    let stranger = PublisherKey::generate().unwrap();
    hub.yank("local", "1.1.0", true, "forged", &stranger)
        .await
        .unwrap();
    assert_eq!(resolved(&installer, "local@^1").await, "1.1.0");
    // The publisher's real yank of 1.0.0, copied onto 1.1.0: a statement
    // about another version.
    hub.yank("local", "1.0.0", true, "old", &key).await.unwrap();
    let stored = hub
        .store()
        .get_entry(&index_key("local", "1.0.0"))
        .await
        .unwrap()
        .unwrap();
    let doc: serde_json::Value = serde_json::from_slice(&stored.bytes).unwrap();
    let statement = doc["yanks"][0].clone();
    assert!(SignedYank::from_json(statement.clone())
        .unwrap()
        .verify_self_consistent()
        .is_ok());
    edit_entry(&hub, &key_110, |doc| {
        doc["yanks"].as_array_mut().unwrap().push(statement);
    })
    .await;
    let entry = hub.entry("local", "1.1.0").await.unwrap();
    assert!(!entry.is_yanked(&TrustedKeys::from_keys([key.verifying_key()])));
    let e = installer.resolve(&req("local@^1")).await;
    assert_eq!(e.unwrap().manifest.manifest.version, "1.1.0");
    // And a hand-made statement with a garbage signature is ignored, not
    // an error for the entry.
    let junk = SignedYank::from_json(
        serde_json::to_value(YankStatement {
            name: "local".into(),
            version: "1.1.0".into(),
            yanked: true,
            sequence: 7,
            signature: "AAAA".into(),
            ..YankStatement::default()
        })
        .unwrap(),
    )
    .unwrap();
    edit_entry(&hub, &key_110, |doc| {
        doc["yanks"]
            .as_array_mut()
            .unwrap()
            .push(junk.json().clone());
        doc["yanks"]
            .as_array_mut()
            .unwrap()
            .push("not a statement".into());
    })
    .await;
    assert_eq!(resolved(&installer, "local@^1").await, "1.1.0");
}

#[tokio::test]
async fn a_key_trusted_only_for_acme_plugins_cannot_publish_local() {
    let dir = tempfile::tempdir().unwrap();
    let acme = PublisherKey::generate().unwrap();
    let hub = Hub::dir(dir.path().join("hub")).unwrap();
    hub.publish(&package(dir.path(), "local", "1.0.0", &acme))
        .await
        .unwrap();
    hub.publish(&package(dir.path(), "acme-dns", "1.0.0", &acme))
        .await
        .unwrap();
    let mut trusted = TrustedKeys::default();
    trusted
        .insert_for(acme.verifying_key(), vec!["acme-*".into()])
        .unwrap();
    let installer = Installer::new(hub.clone(), trusted.clone(), dir.path().join("cache"));
    let e = installer.install(&req("local"), None).await.unwrap_err();
    assert_eq!(e.kind(), "key-not-trusted-for-plugin", "{e}");
    assert!(
        e.to_string().contains("trusted only for plugins acme-*"),
        "{e}"
    );
    // Pinned in a lock, it is refused the same way.
    let pin = LockEntry {
        name: "local".into(),
        version: "1.0.0".into(),
        ..LockEntry::default()
    };
    let e = installer
        .install(&req("local"), Some(&pin))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "key-not-trusted-for-plugin", "{e}");
    // Its own plugins install.
    let ok = installer.install(&req("acme-dns"), None).await.unwrap();
    assert_eq!(ok.manifest.label(), "acme-dns@1.0.0");
    // Nor can it yank (or un-yank) a plugin it is not trusted for.
    let owner = PublisherKey::generate().unwrap();
    hub.publish(&package(dir.path(), "local", "1.1.0", &owner))
        .await
        .unwrap();
    trusted
        .insert_for(owner.verifying_key(), vec!["local".into()])
        .unwrap();
    hub.yank("local", "1.1.0", true, "sabotage", &acme)
        .await
        .unwrap();
    let installer = Installer::new(hub, trusted, dir.path().join("cache"));
    assert_eq!(resolved(&installer, "local").await, "1.1.0");
}

#[tokio::test]
async fn an_untrusted_newer_version_does_not_block_installs() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let stranger = PublisherKey::generate().unwrap();
    let hub = Hub::dir(dir.path().join("hub")).unwrap();
    hub.publish(&package(dir.path(), "local", "1.0.0", &key))
        .await
        .unwrap();
    hub.publish(&package(dir.path(), "local", "9.9.9", &stranger))
        .await
        .unwrap();
    let installer = Installer::new(
        hub,
        TrustedKeys::from_keys([key.verifying_key()]),
        dir.path().join("cache"),
    );
    let installed = installer.install(&req("local"), None).await.unwrap();
    assert_eq!(installed.manifest.version, "1.0.0");
    // Asked for exactly, the untrusted version is still refused by name.
    let e = installer
        .install(&req("local@=9.9.9"), None)
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "untrusted-key", "{e}");
}

#[tokio::test]
async fn an_entry_holding_another_versions_or_plugins_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = Hub::dir(dir.path().join("hub")).unwrap();
    hub.publish(&package(dir.path(), "local", "1.0.0", &key))
        .await
        .unwrap();
    hub.publish(&package(dir.path(), "other", "1.3.0", &key))
        .await
        .unwrap();
    // Validly signed manifests, moved under keys that name something else.
    let copy = |from: String, to: String| {
        let hub = hub.clone();
        async move {
            let stored = hub.store().get_entry(&from).await.unwrap().unwrap();
            hub.store().put_entry(&to, &stored.bytes).await.unwrap();
        }
    };
    copy(index_key("local", "1.0.0"), index_key("local", "1.2.0")).await;
    copy(index_key("other", "1.3.0"), index_key("local", "1.3.0")).await;
    for version in ["1.2.0", "1.3.0"] {
        let e = hub.entry("local", version).await.unwrap_err();
        assert_eq!(e.kind(), "entry-mismatch", "{e}");
    }
    let versions: Vec<String> = hub
        .versions("local")
        .await
        .unwrap()
        .iter()
        .map(|e| e.version.to_string())
        .collect();
    assert_eq!(versions, ["1.0.0"], "moved entries are not listed");
    // A lock pinning 1.2.0 does not get 1.0.0's bytes under 1.2.0's name.
    let installer = Installer::new(
        hub,
        TrustedKeys::from_keys([key.verifying_key()]),
        dir.path().join("cache"),
    );
    let pin = LockEntry {
        name: "local".into(),
        version: "1.3.0".into(),
        ..LockEntry::default()
    };
    let e = installer
        .install(&req("local"), Some(&pin))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "entry-mismatch", "{e}");
    assert_eq!(resolved(&installer, "local").await, "1.0.0");
}

/// Deletes the stored index entry `name@version`, as a compromised hub
/// writer (a directory hub: `index/<key>.json`).
fn delete_entry(dir: &Path, name: &str, version: &str) {
    let path = dir
        .join("hub/index")
        .join(format!("{}.json", index_key(name, version)));
    std::fs::remove_file(&path).unwrap();
}

#[tokio::test]
async fn a_rollback_by_deleting_an_index_entry_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = two_versions(dir.path(), &key).await;
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let installer = Installer::new(hub.clone(), trusted.clone(), dir.path().join("cache"));
    let installed = installer.install(&req("local@^1"), None).await.unwrap();
    assert_eq!(installed.manifest.version, "1.1.0");

    // The writer deletes 1.1.0's entry: without a memory of the index, a
    // resolution silently picks 1.0.0 (the attack).
    delete_entry(dir.path(), "local", "1.1.0");
    let fresh = Installer::new(hub.clone(), trusted.clone(), dir.path().join("fresh-cache"));
    assert_eq!(resolved(&fresh, "local@^1").await, "1.0.0");

    // The installer that saw 1.1.0 refuses, naming the entry, for a new
    // resolution and for an install alike.
    for attempt in [
        installer.resolve(&req("local@^1")).await.map(|_| ()),
        installer.install(&req("local@^1"), None).await.map(|_| ()),
    ] {
        let e = attempt.unwrap_err();
        assert_eq!(e.kind(), "index-rollback", "{e}");
        let text = e.to_string();
        assert!(
            text.contains("local.1.1.0") && text.contains("local@1.1.0"),
            "{text}"
        );
        assert!(text.contains("gone"), "{text}");
    }
    // The memory lives in the cache directory and survives a new installer
    // (a restarted satellite).
    let restarted = Installer::new(hub, trusted, dir.path().join("cache"));
    let e = restarted.resolve(&req("local")).await.unwrap_err();
    assert_eq!(e.kind(), "index-rollback", "{e}");
    // Deleting every entry is named too, not just "not on the hub".
    delete_entry(dir.path(), "local", "1.0.0");
    let e = restarted.resolve(&req("local")).await.unwrap_err();
    assert_eq!(e.kind(), "index-rollback", "{e}");
    assert!(e.to_string().contains("local.1.0.0"), "{e}");
}

#[tokio::test]
async fn an_unyank_by_deleting_the_yank_statement_is_refused_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = two_versions(dir.path(), &key).await;
    hub.yank("local", "1.1.0", true, "corrupts symlinks", &key)
        .await
        .unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let installer = Installer::new(hub.clone(), trusted.clone(), dir.path().join("cache"));
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");

    // The writer removes the signed statement (and the unsigned flag):
    // every signature left holds, and a fresh installer picks 1.1.0 again.
    edit_entry(&hub, &index_key("local", "1.1.0"), |doc| {
        doc["yanks"] = serde_json::json!([]);
        doc["yanked"] = false.into();
        doc["yank_reason"] = "".into();
    })
    .await;
    let fresh = Installer::new(hub.clone(), trusted.clone(), dir.path().join("fresh-cache"));
    assert_eq!(resolved(&fresh, "local@^1").await, "1.1.0");

    // The installer that saw the yank refuses the resolution, and an
    // install of the version (a lock moving to it) as well.
    let e = installer.resolve(&req("local@^1")).await.unwrap_err();
    assert_eq!(e.kind(), "index-rollback", "{e}");
    let text = e.to_string();
    assert!(
        text.contains("local.1.1.0")
            && text.contains("sequence 0")
            && text.contains("sequence 1 (yanked)"),
        "{text}"
    );
    let entry = hub.entry("local", "1.1.0").await.unwrap();
    let e = installer.install_entry(&entry, None).await.unwrap_err();
    assert_eq!(e.kind(), "index-rollback", "{e}");
    assert!(e.to_string().contains("local.1.1.0"), "{e}");
}

#[tokio::test]
async fn the_honest_index_still_installs_upgrades_yanks_and_unyanks() {
    let dir = tempfile::tempdir().unwrap();
    let key = PublisherKey::generate().unwrap();
    let hub = Hub::dir(dir.path().join("hub")).unwrap();
    hub.publish(&package(dir.path(), "local", "1.0.0", &key))
        .await
        .unwrap();
    let trusted = TrustedKeys::from_keys([key.verifying_key()]);
    let installer = Installer::new(hub.clone(), trusted, dir.path().join("cache"));
    let first = installer.install(&req("local@^1"), None).await.unwrap();
    assert_eq!(first.manifest.version, "1.0.0");
    // The publisher releases 1.1.0: the upgrade installs.
    hub.publish(&package(dir.path(), "local", "1.1.0", &key))
        .await
        .unwrap();
    let second = installer.install(&req("local@^1"), None).await.unwrap();
    assert_eq!(second.manifest.version, "1.1.0");
    // A signed yank and a signed un-yank both move the index forwards.
    hub.yank("local", "1.1.0", true, "broken", &key)
        .await
        .unwrap();
    assert_eq!(resolved(&installer, "local@^1").await, "1.0.0");
    hub.yank("local", "1.1.0", false, "", &key).await.unwrap();
    assert_eq!(resolved(&installer, "local@^1").await, "1.1.0");
    let seen = orrery_hub::seen::SeenIndex::load(installer.seen_file().unwrap()).unwrap();
    let local = &seen.plugins["local"];
    assert_eq!(local.keys().collect::<Vec<_>>(), ["1.0.0", "1.1.0"]);
    assert_eq!(local["1.1.0"].yank_sequence, 2);
    assert!(!local["1.1.0"].yanked);
}
