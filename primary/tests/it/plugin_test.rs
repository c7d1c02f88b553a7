//! `orrery plugin test` against real plugin binaries: the local plugin
//! passes; each deliberately broken plugin fails, naming the check (and one
//! that is not broken at all, only newer, passes with warnings). Exit codes:
//! 0 pass, 1 a check failed, 2 the suite could not run.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn binary(name: &str) -> PathBuf {
    let path = orrery_testing::target_debug().join(name);
    assert!(
        path.exists(),
        "{} is not built: run cargo build --workspace --bins",
        path.display()
    );
    path
}

/// What one `orrery plugin test` run printed.
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn orrery_plugin_test(binary: &Path, fixtures: &Path, defect: Option<&str>, extra: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
    cmd.args(["plugin", "test"])
        .arg(binary)
        .arg("--fixtures")
        .arg(fixtures)
        .args(extra)
        // Panics in the broken plugin print a short message, not pages of frames.
        .env_remove("RUST_BACKTRACE")
        // The plugin starts with a cleared environment; its defect is named
        // in one the host passes on, as an operator would with --plugin-env.
        .env("ORRERY_PLUGIN_ENV", "ORRERY_BROKEN_DEFECT");
    match defect {
        Some(defect) => cmd.env("ORRERY_BROKEN_DEFECT", defect),
        None => cmd.env_remove("ORRERY_BROKEN_DEFECT"),
    };
    let out = cmd.output().unwrap();
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn local_fixtures() -> PathBuf {
    root().join("plugins/local/conformance")
}

fn run(plugin: &str, defect: Option<&str>, extra: &[&str]) -> Run {
    orrery_plugin_test(&binary(plugin), &local_fixtures(), defect, extra)
}

fn plugin_test(plugin: &str, defect: Option<&str>, json: bool) -> (i32, String) {
    let out = run(plugin, defect, if json { &["--json"] } else { &[] });
    (out.code, out.stdout)
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

#[test]
fn a_page_larger_than_page_size_fails_list_respects_page_size() {
    let (code, out) = plugin_test(
        "orrery-plugin-broken",
        Some("list-ignores-page-size"),
        false,
    );
    assert_eq!(code, 1, "{out}");
    for ty in [
        "Local::Fs::Directory",
        "Local::Fs::File",
        "Local::Fs::Symlink",
    ] {
        let line = format!("FAIL list_respects_page_size [{ty}]: ");
        assert!(out.contains(&line), "expected `{line}` in\n{out}");
    }
    assert!(
        out.contains("a page of 8 resources for page_size 2"),
        "the failure says what was asked and what came back:\n{out}"
    );
    // Only the page size is wrong: every resource is still listed.
    assert!(
        out.contains("ok   list_includes_all_created [Local::Fs::File]"),
        "{out}"
    );
}

#[test]
fn the_local_plugin_respects_page_size_over_more_resources_than_a_page() {
    let (code, out) = plugin_test("orrery-plugin-local", None, false);
    assert_eq!(code, 0, "{out}");
    for ty in [
        "Local::Fs::Directory",
        "Local::Fs::File",
        "Local::Fs::Symlink",
    ] {
        assert!(
            out.contains(&format!("ok   list_respects_page_size [{ty}]: ")),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "ok   list_includes_all_created [{ty}]: 8 resources"
            )),
            "{out}"
        );
    }
}

#[test]
fn unknown_enum_values_pass_with_warnings_naming_each_field() {
    let out = run("orrery-plugin-broken", Some("unknown-enum-values"), &[]);
    assert_eq!(
        out.code, 0,
        "the host accepts unknown names, so must the suite:\n{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("WARN announcement_valid: 3 resource types\n"),
        "{}",
        out.stdout
    );
    for warning in [
        "     warning: resources[Local::Fs::File].fields.mode.type: unknown field type `octal`; the host treats it as `any`",
        "     warning: resources[Local::Fs::File].fields.content.hints.update_method: unknown update method `patch`",
        "     warning: resources[Local::Fs::Symlink].fields.target.hints.edge_kind: unknown edge kind `weakReference`",
        "     warning: discovery_filters[3].exclude_when[0].op: unknown match operator `glob`",
    ] {
        assert!(out.stdout.contains(warning), "missing `{warning}` in\n{}", out.stdout);
    }
    assert!(!out.stdout.contains("unknown hint value"), "{}", out.stdout);
    assert!(
        out.stdout.contains(" 0 failed, 1 with warnings\n"),
        "{}",
        out.stdout
    );

    let json = run(
        "orrery-plugin-broken",
        Some("unknown-enum-values"),
        &["--json"],
    );
    assert_eq!(json.code, 0);
    let report: serde_json::Value = serde_json::from_str(&json.stdout).unwrap();
    let announcement = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == "announcement_valid")
        .unwrap();
    assert_eq!(announcement["passed"], true);
    assert_eq!(announcement["warnings"].as_array().unwrap().len(), 4);
}

#[test]
fn an_oversized_reply_fails_by_name_at_once_instead_of_hanging() {
    let started = Instant::now();
    let out = run(
        "orrery-plugin-broken",
        Some("oversized-reply"),
        &["--timeout", "30"],
    );
    let took = started.elapsed();
    assert_eq!(out.code, 1, "{}", out.stdout);
    // The host closes the link on reading the length: nothing waits for
    // the 30 s call timeout.
    assert!(
        took < Duration::from_secs(25),
        "took {took:?}:\n{}",
        out.stdout
    );
    assert!(
        out.stdout.contains(
            "FAIL list_includes_created [Local::Fs::Directory]: list failed: the plugin link closed (see link_healthy)"
        ),
        "{}",
        out.stdout
    );
    let healthy = out
        .stdout
        .lines()
        .find(|l| l.starts_with("FAIL link_healthy: the link closed during the run: "))
        .unwrap_or_else(|| panic!("no link_healthy failure in\n{}", out.stdout));
    assert!(
        healthy.contains("exceeds the limit of 16777216 bytes"),
        "{healthy}"
    );
    assert!(
        healthy.contains("not run: the rest of Local::Fs::Directory, 2 fixture(s)"),
        "{healthy}"
    );
    // The reason is said once, by link_healthy.
    assert_eq!(
        out.stdout.matches("exceeds the limit").count(),
        1,
        "{}",
        out.stdout
    );
}

#[test]
fn no_fixtures_exits_2_saying_so_once() {
    let empty = tempfile::tempdir().unwrap();
    let out = orrery_plugin_test(&binary("orrery-plugin-local"), empty.path(), None, &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.is_empty(), "{}", out.stdout);
    assert_eq!(out.stderr.matches("error: ").count(), 1, "{}", out.stderr);
    assert!(
        out.stderr.contains("no *.json fixtures in"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_binary_that_cannot_be_executed_exits_2() {
    let missing = orrery_testing::target_debug().join("orrery-plugin-that-does-not-exist");
    let out = orrery_plugin_test(&missing, &local_fixtures(), None, &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    assert!(
        out.stderr.contains("error: cannot start plugin `") && out.stderr.contains("No such file"),
        "{}",
        out.stderr
    );
}

#[test]
fn a_protocol_mismatch_exits_2_printed_once_with_the_plugins_stderr() {
    let out = run("orrery-plugin-broken", Some("protocol-mismatch"), &[]);
    assert_eq!(out.code, 2, "{}{}", out.stdout, out.stderr);
    let mismatch = "speaks protocol 2 but this host speaks protocol 1";
    assert_eq!(
        out.stderr.matches(mismatch).count() + out.stdout.matches(mismatch).count(),
        1,
        "stdout:\n{}\nstderr:\n{}",
        out.stdout,
        out.stderr
    );
    assert!(
        out.stderr.contains("error: cannot test plugin `"),
        "{}",
        out.stderr
    );
    assert!(
        out.stderr
            .contains("orrery-plugin-broken: defect protocol-mismatch"),
        "the plugin's stderr is shown when the suite cannot run:\n{}",
        out.stderr
    );
}

#[test]
fn the_plugins_stderr_is_shown_on_failure_and_with_show_logs_only() {
    let failing = run("orrery-plugin-broken", Some("handler-panics"), &[]);
    assert_eq!(failing.code, 1);
    assert!(
        failing
            .stderr
            .contains("orrery-plugin-broken: defect handler-panics")
            && failing.stderr.contains("deliberate panic in create"),
        "a failing run shows the plugin's stderr:\n{}",
        failing.stderr
    );
    assert!(
        !failing.stdout.contains("orrery-plugin-broken: defect"),
        "the plugin's stderr stays off stdout:\n{}",
        failing.stdout
    );

    let quiet = run("orrery-plugin-broken", Some("unknown-enum-values"), &[]);
    assert_eq!(quiet.code, 0);
    assert!(
        !quiet.stderr.contains("orrery-plugin-broken: defect"),
        "{}",
        quiet.stderr
    );

    let shown = run(
        "orrery-plugin-broken",
        Some("unknown-enum-values"),
        &["--show-logs", "--json"],
    );
    assert_eq!(shown.code, 0);
    assert!(
        shown
            .stderr
            .contains("orrery-plugin-broken: defect unknown-enum-values"),
        "{}",
        shown.stderr
    );
    // Logs never get in the way of the JSON report.
    serde_json::from_str::<serde_json::Value>(&shown.stdout).unwrap();
}

#[test]
fn an_answer_that_fits_a_message_but_not_a_frame_fails_by_name() {
    // The body is under the 16 MiB message limit, the envelope around it
    // over the frame limit. The SDK measures the answer and answers
    // MessageTooLarge instead of dropping it: a FAIL naming the File type
    // and the code, exit 1, no hang.
    let started = Instant::now();
    let out = run(
        "orrery-plugin-broken",
        Some("reply-at-frame-limit"),
        &["--timeout", "2"],
    );
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
    let failed: Vec<&str> = out
        .stdout
        .lines()
        .filter(|l| l.starts_with("FAIL "))
        .collect();
    assert!(
        !failed.is_empty()
            && failed
                .iter()
                .all(|l| l.contains("[Local::Fs::File]") && l.contains("read")),
        "only reads of files fail:\n{}",
        out.stdout
    );
    assert!(
        failed.iter().any(|l| l.contains("MessageTooLarge")),
        "the SDK answered why:\n{}",
        out.stdout
    );
    assert!(out.stdout.contains("ok   link_healthy"), "{}", out.stdout);
}

/// `orrery plugin test` starts the plugin as a satellite does: with a
/// cleared environment, so a secret in the tester's environment does not
/// reach the plugin under test unless named with `--plugin-env`.
#[test]
fn the_plugin_under_test_does_not_get_the_hosts_secrets() {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_orrery"));
    cmd.args(["plugin", "test"])
        .arg(binary("orrery-plugin-broken"))
        .arg("--fixtures")
        .arg(local_fixtures())
        .arg("--show-logs")
        .env("ORRERY_PLUGIN_ENV", "ORRERY_BROKEN_DEFECT")
        .env("ORRERY_BROKEN_DEFECT", "unknown-enum-values")
        .env("ORRERY_TEST_DATABASE_PASSWORD", "hunter2-not-for-plugins");
    let out = cmd.output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let environment = stderr
        .lines()
        .find_map(|l| l.split_once("orrery-plugin-broken: environment "))
        .map(|(_, names)| names.to_owned())
        .unwrap_or_else(|| panic!("the plugin's environment line is missing: {stderr}"));
    let names: Vec<&str> = environment.split(',').collect();
    assert!(names.contains(&"ORRERY_BROKEN_DEFECT"), "{environment}");
    assert!(
        !names.contains(&"ORRERY_TEST_DATABASE_PASSWORD"),
        "{environment}"
    );
    assert!(!stderr.contains("hunter2-not-for-plugins"), "{stderr}");
}
