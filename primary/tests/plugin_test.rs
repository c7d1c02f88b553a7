//! `orrery plugin test` against real plugin binaries: the local plugin
//! passes; each deliberately broken plugin fails, naming the check.

use std::path::PathBuf;
use std::process::Command;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn binary(name: &str) -> PathBuf {
    let path = root().join("target/debug").join(name);
    assert!(
        path.exists(),
        "{} is not built: run cargo build --workspace --bins",
        path.display()
    );
    path
}

fn plugin_test(plugin: &str, defect: Option<&str>, json: bool) -> (i32, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
    cmd.args(["plugin", "test"])
        .arg(binary(plugin))
        .arg("--fixtures")
        .arg(root().join("plugins/local/conformance"));
    if json {
        cmd.arg("--json");
    }
    if let Some(defect) = defect {
        cmd.env("ORRERY_BROKEN_DEFECT", defect);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_local_plugin_passes_every_check() {
    let (code, out) = plugin_test("orrery-plugin-local", None, false);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains(" 0 failed"), "{out}");
    assert!(
        out.contains("ok   list_includes_created [Local::Fs::File]"),
        "{out}"
    );
}

#[test]
fn json_output_is_machine_readable() {
    let (code, out) = plugin_test("orrery-plugin-local", None, true);
    assert_eq!(code, 0);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    let checks = report["checks"].as_array().unwrap();
    assert!(checks.len() > 40);
    assert!(checks.iter().all(|c| c["passed"] == true));
}

fn assert_fails(defect: &str, check: &str, resource_type: Option<&str>) {
    let (code, out) = plugin_test("orrery-plugin-broken", Some(defect), false);
    assert_eq!(code, 1, "defect {defect} must fail the suite:\n{out}");
    let line = match resource_type {
        Some(ty) => format!("FAIL {check} [{ty}]"),
        None => format!("FAIL {check}"),
    };
    assert!(
        out.contains(&line),
        "defect {defect}: expected `{line}` in\n{out}"
    );
}

#[test]
fn read_returning_a_write_only_field_fails_read_returns_no_write_only() {
    assert_fails(
        "read-returns-write-only",
        "read_returns_no_write_only",
        Some("Local::Fs::File"),
    );
}

#[test]
fn update_changing_the_native_id_fails_update_keeps_native_id() {
    assert_fails(
        "update-changes-native-id",
        "update_keeps_native_id",
        Some("Local::Fs::File"),
    );
}

#[test]
fn delete_leaving_the_resource_listable_fails_list_excludes_deleted() {
    assert_fails(
        "delete-leaves-listable",
        "list_excludes_deleted",
        Some("Local::Fs::Directory"),
    );
}

#[test]
fn a_panicking_handler_fails_create_and_the_plugin_keeps_serving() {
    assert_fails("handler-panics", "create", Some("Local::Fs::Directory"));
    let (_, out) = plugin_test("orrery-plugin-broken", Some("handler-panics"), false);
    assert!(
        out.contains("plugin handler panicked: deliberate panic in create"),
        "{out}"
    );
    assert!(
        out.contains("ok   link_healthy"),
        "a panic fails one request, not the process:\n{out}"
    );
}

#[test]
fn a_stray_print_on_stdout_fails_the_handshake() {
    assert_fails("stray-print", "handshake", None);
    let (_, out) = plugin_test("orrery-plugin-broken", Some("stray-print"), false);
    assert!(out.contains("stray print"), "{out}");
}
