//! Remote mode: the CLI drives a real `orrery primary` (with an API token)
//! through plan → apply → status --follow → status → cancel → history with
//! `--primary`, and prints what local mode prints for the same document
//! (apart from ids, times and who ran it).

use crate::common;

use std::process::Stdio;

use common::server::{Server, ADMIN_TOKEN};
use common::{Run, Scratch};

fn testbed_stack(name: &str, n: usize, config: &str) -> String {
    let mut doc = format!(
        "stack: {name}\ntargets:\n  - name: lab\n    plugin: testbed\n    config: {config}\nresources:\n"
    );
    for i in 0..n {
        doc.push_str(&format!(
            "  - label: thing-{i}\n    type: Testbed::Async::Thing\n    target: lab\n    properties: {{ name: thing-{i}, value: {i} }}\n"
        ));
    }
    doc
}

/// `orrery ARGS --primary URL` with the admin's token.
fn remote(scratch: &Scratch, server: &Server, args: &[&str]) -> Run {
    let url = server.url("");
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--primary", &url]);
    Run::from(
        scratch
            .command(&all)
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .output()
            .unwrap(),
    )
}

/// The command id in a summary line (`… Command <id>.`).
fn command_of(run: &Run) -> String {
    let line = run
        .stdout
        .lines()
        .find(|l| l.contains(" Command "))
        .unwrap_or_else(|| panic!("no summary: {run:?}"));
    line.rsplit(" Command ")
        .next()
        .unwrap()
        .trim_end_matches('.')
        .to_owned()
}

/// `text` with `id` and the elapsed time of a summary made neutral, its
/// lines sorted (operations run concurrently, in no fixed order).
fn normalized(text: &str, id: &str) -> Vec<String> {
    let mut lines: Vec<String> = text
        .lines()
        // The slowest operations differ from run to run.
        .filter(|l| !l.starts_with("  slowest: "))
        .map(|l| {
            let l = l.replace(id, "<id>");
            match (l.find(" in "), l.find("s: ")) {
                (Some(a), Some(b)) if a < b && l.starts_with("Done") => {
                    format!("{}{}", &l[..a], &l[b + 1..])
                }
                _ => l,
            }
        })
        .collect();
    lines.sort();
    lines
}

#[test]
fn the_cli_drives_a_primary_as_it_runs_locally() {
    let server = Server::start();
    let local = Scratch::new();
    let client = Scratch::new();
    let file = local.write("lab.yaml", &testbed_stack("lab", 6, "{ polls: 1 }"));
    let file = file.to_str().unwrap();

    // plan: the same plan, exit 2 (changes) both ways.
    let here = local.orrery(&["plan", file]);
    let there = remote(&client, &server, &["plan", file]);
    assert_eq!((here.code, there.code), (2, 2), "{here:?}\n{there:?}");
    assert_eq!(here.stdout, there.stdout);
    assert!(there.stdout.contains("Plan: 6 to create"), "{there:?}");

    // An invalid document: the same diagnostics, against the file here.
    let bad = local.write(
        "bad.yaml",
        &testbed_stack("bad", 1, "{}").replace(
            "target: lab\n    properties",
            "target: nowhere\n    properties",
        ),
    );
    let bad = bad.to_str().unwrap();
    let here = local.orrery(&["plan", bad]);
    let there = remote(&client, &server, &["plan", bad]);
    assert_eq!((here.code, there.code), (1, 1), "{here:?}\n{there:?}");
    assert_eq!(here.stderr, there.stderr);
    assert!(
        there.stderr.contains("unknown target `nowhere`"),
        "{there:?}"
    );

    // apply: plan, one line per transition, the summary; exit 0.
    let here = local.orrery(&["apply", file, "--yes", "--verbose"]);
    let there = remote(&client, &server, &["apply", file, "--yes", "--verbose"]);
    assert_eq!((here.code, there.code), (0, 0), "{here:?}\n{there:?}");
    let id = command_of(&there);
    assert_eq!(
        normalized(&here.stdout, &command_of(&here)),
        normalized(&there.stdout, &id)
    );
    assert!(
        there.stdout.contains("  create thing-3: succeeded"),
        "{there:?}"
    );

    // status --follow reattaches (here to a finished command): the apply's
    // output without its plan, the same summary.
    let followed = remote(&client, &server, &["status", "--follow", &id, "--verbose"]);
    assert_eq!(followed.code, 0, "{followed:?}");
    let without_plan: Vec<&str> = there
        .stdout
        .lines()
        .filter(|l| !l.starts_with("    + ") && !l.starts_with("Plan: "))
        .collect();
    let mut expected = without_plan.clone();
    expected.sort();
    let mut got: Vec<&str> = followed.stdout.lines().collect();
    got.sort();
    assert_eq!(got, expected, "{followed:?}");

    // status: the command's record, as local mode prints its own.
    let here_status = local.orrery(&["status"]);
    let there_status = remote(&client, &server, &["status", &id]);
    assert_eq!((here_status.code, there_status.code), (0, 0));
    let neutral =
        |run: &Run, id: &str, who: &str| normalized(&run.stdout.replace(who, "<who>"), id);
    let local_who = format!("local:{}", orrery_primary_user());
    assert_eq!(
        neutral(&here_status, &command_of(&here), &local_who),
        neutral(&there_status, &id, "test-admin"),
    );

    // inventory: the same rendering from the API's pages.
    for args in [
        &["inventory"][..],
        &["inventory", "--stack", "lab"],
        &["inventory", "--output", "json"],
        &["inventory", "--unmanaged"],
    ] {
        let here = local.orrery(args);
        let there = remote(&client, &server, args);
        assert_eq!((here.code, there.code), (0, 0), "{here:?}\n{there:?}");
        assert_eq!(here.stdout, there.stdout, "{args:?}");
    }
    let listed = remote(&client, &server, &["inventory"]);
    assert!(listed.stdout.ends_with("\n6 resources\n"), "{listed:?}");

    // cancel: a slow apply is canceled from another CLI; the applying CLI
    // ends with the canceled operations counted, exit 1.
    let slow = client.write(
        "slow.yaml",
        &testbed_stack("slow", 200, "{ polls: 1, delay_ms: 1000 }"),
    );
    let url = server.url("");
    let applying = client
        .command(&["apply", slow.to_str().unwrap(), "--yes", "--primary", &url])
        .env("ORRERY_TOKEN", ADMIN_TOKEN)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    server.wait_for("/v1/commands?stack=slow", "the slow apply running", |v| {
        v["commands"][0]["active"] == true
    });
    let canceled = remote(&client, &server, &["cancel"]);
    assert_eq!(canceled.code, 0, "{canceled:?}");
    assert!(
        canceled.stdout.starts_with("Canceling command "),
        "{canceled:?}"
    );
    let applied = Run::from(applying.wait_with_output().unwrap());
    assert_eq!(applied.code, 1, "{applied:?}");
    let summary = applied
        .stdout
        .lines()
        .find(|l| l.starts_with("Finished with failures"))
        .unwrap_or_else(|| panic!("{applied:?}"));
    let canceled_count: usize = summary
        .split(", ")
        .find_map(|part| part.strip_suffix(" canceled").and_then(|n| n.parse().ok()))
        .unwrap_or_else(|| panic!("{summary}"));
    assert!(canceled_count > 0, "{summary}");
    let slow_id = command_of(&applied);
    // A command that is not running cannot be canceled: the API's 409, exit 1.
    let again = remote(&client, &server, &["cancel", &slow_id]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(again.stderr.contains("409"), "{again:?}");

    // history: who ran what, newest first, with the outcome.
    let history = remote(&client, &server, &["history"]);
    assert_eq!(history.code, 0, "{history:?}");
    let rows: Vec<&str> = history.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "{history:?}");
    assert!(
        rows[0].starts_with(&slow_id) && rows[0].ends_with("canceled"),
        "{history:?}"
    );
    assert!(
        rows[1].starts_with(&id) && rows[1].ends_with("completed"),
        "{history:?}"
    );
    assert!(
        rows[1].contains("test-admin") && rows[1].contains("6 succeeded"),
        "{history:?}"
    );
    let local_history = local.orrery(&["history", "--stack", "lab"]);
    assert_eq!(local_history.code, 0, "{local_history:?}");
    assert_eq!(
        local_history.stdout.lines().next(),
        history.stdout.lines().next(),
        "the same columns"
    );
    let local_row = local_history.stdout.lines().nth(1).unwrap();
    assert!(
        local_row.contains(&local_who) && local_row.ends_with("completed"),
        "{local_history:?}"
    );

    // output: the recorded outputs, from the API, rendered alike.
    let with_outputs = testbed_stack("out", 1, "{}").replace("thing-0", "out-0")
        + "outputs:\n  first: { value: \"${out-0.name}\" }\n  hidden: { value: 7, secret: true }\n";
    let out_file = local.write("out.yaml", &with_outputs);
    let out_file = out_file.to_str().unwrap();
    assert_eq!(local.orrery(&["apply", out_file, "--yes"]).code, 0);
    let applied = remote(&client, &server, &["apply", out_file, "--yes"]);
    assert_eq!(applied.code, 0, "{applied:?}");
    for args in [
        &["output", "--stack", "out"][..],
        &["output", "first", "--stack", "out"],
        &["output", "--stack", "out", "--output", "json"],
    ] {
        let here = local.orrery(args);
        let there = remote(&client, &server, args);
        assert_eq!((here.code, there.code), (0, 0), "{here:?}\n{there:?}");
        assert_eq!(here.stdout, there.stdout, "{args:?}");
    }
    let shown = remote(&client, &server, &["output", "--stack", "out"]);
    assert_eq!(shown.stdout, "first = out-0\nhidden = (sensitive)\n");
    let missing = remote(&client, &server, &["output", "--stack", "nope"]);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert_eq!(
        missing.stderr,
        local.orrery(&["output", "--stack", "nope"]).stderr,
        "one line, as local mode says it"
    );
    assert_eq!(
        missing.stderr,
        "error: stack `nope` has no recorded outputs (apply it first)\n"
    );

    // Without a token the primary refuses, and the CLI says so.
    let anonymous = Run::from(
        client
            .command(&["history", "--primary", &url])
            .env_remove("ORRERY_TOKEN")
            .output()
            .unwrap(),
    );
    assert_eq!(anonymous.code, 1, "{anonymous:?}");
    assert!(anonymous.stderr.contains("401"), "{anonymous:?}");
}

/// Who the local CLI records as running its commands.
fn orrery_primary_user() -> String {
    ["USER", "LOGNAME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .unwrap_or_else(|| {
            use std::os::unix::fs::MetadataExt;
            format!("uid{}", std::fs::metadata("/proc/self").unwrap().uid())
        })
}

/// Sends SIGINT (what Ctrl-C sends) to `child`.
fn interrupt(child: &std::process::Child) {
    // SAFETY: kill only signals the process; the pid is our live child's.
    let sent = unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "{}", std::io::Error::last_os_error());
}

#[test]
fn ctrl_c_cancels_on_the_primary_and_twice_detaches() {
    let server = Server::start();
    let client = Scratch::new();
    let url = server.url("");
    let start = |stack: &str| {
        let file = client.write(
            &format!("{stack}.yaml"),
            &testbed_stack(stack, 200, "{ polls: 1, delay_ms: 1000 }"),
        );
        let child = client
            .command(&["apply", file.to_str().unwrap(), "--yes", "--primary", &url])
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        server.wait_for(
            &format!("/v1/commands?stack={stack}"),
            "the apply running",
            |v| v["commands"][0]["active"] == true,
        );
        child
    };

    // Once: the primary cancels; the CLI follows it to its end.
    let child = start("once");
    interrupt(&child);
    let run = Run::from(child.wait_with_output().unwrap());
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains("canceling: no new operations start"),
        "{run:?}"
    );
    assert!(run.stdout.contains("Finished with failures"), "{run:?}");
    let (_, listed) = server.get("/v1/commands?stack=once");
    assert_eq!(listed["commands"][0]["status"], "canceled", "{listed}");

    // Twice: the CLI detaches, the command goes on (its in-flight
    // operations take a second each), and status --follow reattaches.
    let mut child = start("twice");
    let (_, listed) = server.get("/v1/commands?stack=twice");
    let id = listed["commands"][0]["id"].as_str().unwrap().to_owned();
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    interrupt(&child);
    let mut said = String::new();
    while !said.contains("canceling") {
        let mut line = String::new();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "the CLI ended without canceling: {said}");
        said.push_str(&line);
    }
    interrupt(&child);
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.contains(&format!("detached; command {id} goes on")),
        "{said}"
    );
    assert!(
        said.contains(&format!("orrery status --follow {id}")),
        "{said}"
    );
    let followed = remote(&client, &server, &["status", "--follow", &id]);
    assert_eq!(followed.code, 1, "canceled: {followed:?}");
    assert!(
        followed.stdout.contains("Finished with failures"),
        "{followed:?}"
    );
}

#[test]
fn an_https_primary_is_checked_against_a_private_ca() {
    use common::certs::make_certs;
    use common::fleet::Killed;
    use common::server::{free_port, sha256_hex};

    let client = Scratch::new();
    let dir = client.path();
    assert!(make_certs(dir), "openssl failed");
    let tokens = client.write(
        "tokens.toml",
        &format!(
            "[[principal]]\nname = \"test-admin\"\ntoken_sha256 = \"{}\"\nroles = [\"admin\"]\n",
            sha256_hex(ADMIN_TOKEN)
        ),
    );
    let port = free_port();
    let _primary = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_orrery"))
            .args(["primary", "--listen", &format!("127.0.0.1:{port}")])
            .arg("--auth-tokens")
            .arg(&tokens)
            .arg("--api-tls-cert")
            .arg(dir.join("server.pem"))
            .arg("--api-tls-key")
            .arg(dir.join("server.key"))
            .env("ORRERY_DATA_DIR", dir.join("primary-state"))
            .env_remove("ORRERY_DATABASE_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("https://127.0.0.1:{port}");
    let ca = dir.join("ca.pem");
    let ca = ca.to_str().unwrap();
    let history = |extra: &[&str], env: Option<(&str, &str)>| {
        let mut cmd = client.command(&["history", "--primary", &url]);
        cmd.args(extra)
            .current_dir(dir)
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .env_remove("ORRERY_CA_FILE");
        if let Some((k, v)) = env {
            cmd.env(k, v);
        }
        Run::from(cmd.output().unwrap())
    };
    orrery_testing::wait_until(
        "the primary over TLS",
        std::time::Duration::from_secs(30),
        || history(&["--ca-file", ca], None).code == 0,
    );
    let listed = history(&["--ca-file", ca], None);
    assert!(listed.stdout.starts_with("COMMAND "), "{listed:?}");
    // The environment and orrery.toml name it too.
    assert_eq!(history(&[], Some(("ORRERY_CA_FILE", ca))).code, 0);
    let config = client.write("other.toml", &format!("ca_file = \"{ca}\"\n"));
    let configured = history(&["--config", config.to_str().unwrap()], None);
    assert_eq!(configured.code, 0, "{configured:?}");

    // Without it the public roots refuse the certificate: one line.
    let refused = history(&[], None);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .starts_with(&format!("error: cannot reach the primary at {url}: ")),
        "{refused:?}"
    );
    assert_eq!(refused.stderr.lines().count(), 1, "{refused:?}");
    // Another CA's certificate does not vouch for the server.
    let other = client.write(
        "other-ca.pem",
        &std::fs::read_to_string(dir.join("client.pem")).unwrap(),
    );
    let wrong = history(&["--ca-file", other.to_str().unwrap()], None);
    assert_eq!(wrong.code, 1, "{wrong:?}");
    // A file of no certificates is named.
    let empty = client.write("empty.pem", "not a certificate\n");
    let bad = history(&["--ca-file", empty.to_str().unwrap()], None);
    assert_eq!(bad.code, 1, "{bad:?}");
    assert!(bad.stderr.contains("holds no PEM certificate"), "{bad:?}");
}

/// `--var`, `--var-file` and `ORRERY_VAR_*` reach a remote primary as they
/// reach local mode: text typed by the parameter's declaration, `--var`
/// over the environment; the plans are the same.
#[test]
fn parameter_values_reach_a_remote_primary_as_they_reach_local_mode() {
    let server = Server::start();
    let local = Scratch::new();
    let client = Scratch::new();
    let doc = "stack: params\nparameters:\n  n: { type: number }\n  name: { type: string, default: plain }\n  tags: { type: list, default: [] }\ntargets:\n  - name: lab\n    plugin: testbed\nresources:\n  - label: thing\n    type: Testbed::Async::Thing\n    target: lab\n    properties: { name: \"${param.name}-${length(param.tags)}\", value: \"${param.n + 1}\" }\n";
    let file = local.write("params.yaml", doc);
    let file = file.to_str().unwrap();
    let var_file = local.write("vars.yaml", "tags: [a, b, c]\n");
    let var_file = var_file.to_str().unwrap();
    let args = [
        "plan",
        file,
        "--var",
        "n=41",
        "--var",
        "name=given",
        "--var-file",
        var_file,
        "--output",
        "json",
    ];
    let here = Run::from(
        local
            .command(&args)
            .env("ORRERY_VAR_name", "from-env")
            .output()
            .unwrap(),
    );
    let url = server.url("");
    let mut remote_args = args.to_vec();
    remote_args.extend(["--primary", &url]);
    let there = Run::from(
        client
            .command(&remote_args)
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .env("ORRERY_VAR_name", "from-env")
            .output()
            .unwrap(),
    );
    assert_eq!((here.code, there.code), (2, 2), "{here:?}\n{there:?}");
    let json = |run: &Run| -> serde_json::Value { serde_json::from_str(&run.stdout).unwrap() };
    assert_eq!(json(&here), json(&there));
    assert!(there.stdout.contains("given-3"), "{there:?}");
    assert!(there.stdout.contains("42"), "{there:?}");

    // Only the environment: it is used remotely too.
    let env_only = Run::from(
        client
            .command(&[
                "plan",
                file,
                "--var",
                "n=1",
                "--output",
                "json",
                "--primary",
                &url,
            ])
            .env("ORRERY_TOKEN", ADMIN_TOKEN)
            .env("ORRERY_VAR_name", "from-env")
            .output()
            .unwrap(),
    );
    assert_eq!(env_only.code, 2, "{env_only:?}");
    assert!(env_only.stdout.contains("from-env-0"), "{env_only:?}");
}

/// A document that reads files (a module, `file()`) plans and applies
/// through a primary as it does locally: the CLI sends what the document
/// reads, and the primary reads none of its own files.
#[test]
fn a_document_with_modules_and_files_applies_through_a_primary() {
    let server = Server::start();
    let client = Scratch::new();
    std::fs::create_dir(client.path().join("modules")).unwrap();
    client.write(
        "modules/thing.yaml",
        "parameters:\n  n: { type: number }\nresources:\n  - label: t\n    type: Testbed::Async::Thing\n    target: lab\n    properties: { name: \"mod-${param.n}\", value: \"${param.n}\" }\noutputs:\n  name: { value: \"${t.name}\" }\n",
    );
    client.write("note.txt", "from-a-file");
    let file = client.write(
        "stack.yaml",
        "stack: files\ntargets:\n  - name: lab\n    plugin: testbed\nmodules:\n  - name: m\n    source: ./modules/thing.yaml\n    with: { n: 7 }\nresources:\n  - label: noted\n    type: Testbed::Async::Thing\n    target: lab\n    properties: { name: \"${file(\\\"note.txt\\\")}\", value: 1 }\n",
    );
    let file = file.to_str().unwrap();
    let here = client.orrery(&["plan", file, "--output", "json"]);
    let there = remote(&client, &server, &["plan", file, "--output", "json"]);
    assert_eq!((here.code, there.code), (2, 2), "{here:?}\n{there:?}");
    let json = |run: &Run| -> serde_json::Value { serde_json::from_str(&run.stdout).unwrap() };
    assert_eq!(json(&here), json(&there));
    assert!(there.stdout.contains("from-a-file"), "{there:?}");
    assert!(there.stdout.contains("mod-7"), "{there:?}");
    let apply = remote(&client, &server, &["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");

    // A request naming a file it did not bring is refused by name: the
    // primary reads none of its own files.
    let body = serde_json::json!({
        "document": "stack: f2\ntargets:\n  - name: lab\n    plugin: testbed\nresources:\n  - label: x\n    type: Testbed::Async::Thing\n    target: lab\n    properties: { name: \"${file(\\\"note.txt\\\")}\", value: 1 }\n",
    });
    let (status, answer) = server.post("/v1/stacks/plan", &body);
    assert_eq!(status, 422, "{answer}");
    let text = answer.to_string();
    assert!(text.contains("no files can be read"), "{answer}");
    let mut with_other = body.clone();
    with_other["files"] = serde_json::json!({ "other.txt": "x" });
    let (status, answer) = server.post("/v1/stacks/plan", &with_other);
    assert_eq!(status, 422, "{answer}");
    let text = answer.to_string();
    assert!(
        text.contains("the request brought no file `note.txt`"),
        "{answer}"
    );
}

#[test]
fn a_refreshed_remote_plan_reports_drift_as_local_mode_does() {
    let server = Server::start();
    let client = Scratch::new();
    let site = client.path().join("site");
    let file = client.write(
        "stack.yaml",
        &format!(
            "stack: fresh\ntargets:\n  - name: home\n    plugin: local\n    config: {{ root: \"{}\", create_root: true }}\nresources:\n  - label: note\n    type: Local::Fs::File\n    target: home\n    properties: {{ path: note.txt, content: \"as declared\" }}\n",
            site.display()
        ),
    );
    let file = file.to_str().unwrap();
    let apply = remote(&client, &server, &["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    std::fs::write(site.join("note.txt"), "edited by hand").unwrap();

    let plain = remote(&client, &server, &["plan", file]);
    assert_eq!(plain.code, 0, "the records know of no change: {plain:?}");
    let refreshed = remote(&client, &server, &["plan", file, "--refresh"]);
    assert_eq!(refreshed.code, 2, "{refreshed:?}");
    assert!(
        refreshed.stdout.contains(
            "  drift fresh/note [Local::Fs::File] note.txt: changed out of band (content); the next apply restores it"
        ),
        "{refreshed:?}"
    );
    assert!(
        refreshed.stdout.contains("Plan: 0 to create, 1 to update"),
        "{refreshed:?}"
    );
}

/// `orrery cancel --force`: the command ends `canceled` at once, its
/// operations in flight recorded sent without an outcome (as a crash
/// leaves them); the next apply settles them by reading, once: each create
/// that landed is adopted, none is sent again.
#[test]
fn a_forced_cancel_leaves_in_flight_operations_for_the_next_apply_to_settle() {
    use std::time::{Duration, Instant};
    const DELAY_MS: u64 = 3000;
    let server = Server::start();
    let client = Scratch::new();
    // Each request answers after the delay (`polls: 0`: a create is done
    // when answered), the four creates at once.
    let doc = testbed_stack(
        "forced",
        4,
        &format!("{{ polls: 0, delay_ms: {DELAY_MS} }}"),
    );
    let file = client.write("forced.yaml", &doc);
    let (status, accepted) =
        server.post("/v1/stacks/apply", &serde_json::json!({ "document": doc }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    server.wait_for(&format!("/v1/commands/{id}"), "four creates sent", |c| {
        c["operations"].as_array().is_some_and(|o| o.len() == 4)
    });

    let asked = Instant::now();
    let run = remote(&client, &server, &["cancel", "--force", &id]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("by force"), "{run:?}");
    let command = server.wait_command(&id);
    let took = asked.elapsed();
    assert!(
        took < Duration::from_millis(DELAY_MS * 2 / 3),
        "ended in {took:?}, not waiting for the in-flight creates: {command}"
    );
    assert_eq!(command["status"], "canceled", "{command}");
    let statuses: Vec<&str> = command["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["status"].as_str().unwrap())
        .collect();
    assert_eq!(
        statuses, ["running"; 4],
        "recorded sent, no outcome: {command}"
    );
    assert_eq!(
        command["report"]["unsettled"].as_array().map(Vec::len),
        Some(4),
        "{command}"
    );

    // The next apply reads (lists) before it plans: the creates landed
    // meanwhile (the listing is answered after them), so each is adopted
    // and nothing is created again.
    let again = remote(
        &client,
        &server,
        &["apply", file.to_str().unwrap(), "--yes"],
    );
    assert_eq!(again.code, 0, "{again:?}");
    let settled = server.get(&format!("/v1/commands/{id}")).1;
    for op in settled["operations"].as_array().unwrap() {
        assert_eq!(op["status"], "succeeded", "adopted once: {settled}");
    }
    let next = command_of(&again);
    let next = server.wait_command(&next);
    assert_eq!(next["status"], "completed", "{next}");
    assert!(
        next["operations"]
            .as_array()
            .unwrap()
            .iter()
            .all(|o| o["operation"] != "create"),
        "no create sent again: {next}"
    );
    let (_, resources) = server.get("/v1/resources?stack=forced");
    assert_eq!(
        resources["resources"].as_array().unwrap().len(),
        4,
        "{resources}"
    );
    // Settled once: a further plan finds nothing to change.
    let third = remote(&client, &server, &["plan", file.to_str().unwrap()]);
    assert_eq!(third.code, 0, "{third:?}");
    assert!(third.stdout.contains("No changes"), "{third:?}");
}

/// Locally, a first Ctrl-C cancels gracefully and a second stops waiting
/// for the operations in flight, saying so; the next apply settles them.
#[test]
fn locally_a_second_ctrl_c_cancels_by_force_and_the_next_apply_settles() {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    const DELAY_MS: u64 = 4000;
    let client = Scratch::new();
    // Things kept in a file, so they outlive the plugin process.
    let things = client.path().join("things.db");
    let config = format!(
        "{{ polls: 0, delay_ms: {DELAY_MS}, store: \"{}\" }}",
        things.display()
    );
    let file = client.write("local.yaml", &testbed_stack("local", 4, &config));
    let file = file.to_str().unwrap();
    let mut child = client
        .command(&["apply", file, "--yes", "--verbose"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    // Ctrl-C cancels once the operations are sent (before, it ends the
    // process as usual).
    while seen.matches(": started").count() < 4 {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "the apply ended before sending: {seen}");
        seen.push_str(&line);
    }
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let asked = Instant::now();
    interrupt(&child);
    let mut said = String::new();
    while !said.contains("Ctrl-C again") {
        let mut line = String::new();
        let n = stderr.read_line(&mut line).unwrap();
        assert!(n > 0, "the CLI ended without canceling: {said}");
        said.push_str(&line);
    }
    interrupt(&child);
    // The command ends at once, its summary naming what it left in
    // flight (the plugins may still finish it before the process exits).
    while !seen.contains("unsettled: ") {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(n > 0, "no summary of what was left: {seen}");
        seen.push_str(&line);
    }
    let took = asked.elapsed();
    assert!(
        took < Duration::from_millis(DELAY_MS * 3 / 4),
        "not waiting for the in-flight creates: {took:?}"
    );
    std::io::Read::read_to_string(&mut stderr, &mut said).unwrap();
    std::io::Read::read_to_string(&mut stdout, &mut seen).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(1), "{seen}\n{said}");
    assert!(said.contains("canceling by force"), "{said}");
    assert!(
        seen.contains("unsettled: 4 operation(s) in flight"),
        "{seen}"
    );

    let again = client.orrery(&["apply", file, "--yes"]);
    assert_eq!(again.code, 0, "{again:?}");
    let line = again
        .stdout
        .lines()
        .find(|l| l.starts_with("Settling what command "))
        .unwrap_or_else(|| panic!("nothing settled: {again:?}"));
    assert!(line.contains(" 4 operation(s) settled"), "{line}");
    let count = |word: &str| -> usize {
        line.split(", ")
            .find(|part| part.contains(word))
            .and_then(|part| part.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `{word}` in {line}"))
    };
    let (adopted, recreated) = (
        count("found and adopted"),
        count("to create again") + count("still landing"),
    );
    assert_eq!(adopted + recreated, 4, "{line}");
    let planned = match recreated {
        0 => "No changes: 4 resources up to date.".to_owned(),
        n => format!("Plan: {n} to create"),
    };
    assert!(
        again.stdout.contains(&planned),
        "only what did not land is created: {again:?}"
    );
    // All four recorded, none twice (a second create of one that landed
    // would have failed `AlreadyExists`).
    let plan = client.orrery(&["plan", file]);
    assert_eq!(plan.code, 0, "{plan:?}");
    assert!(plan.stdout.contains("No changes: 4 resources"), "{plan:?}");
}
