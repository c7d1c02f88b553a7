//! Saved plans (issue 42, item 5): `orrery plan --out FILE` writes the plan
//! with what planning it again needs, and `orrery apply FILE` (locally and
//! through a primary) runs it only when planning again gives that very
//! plan; a saved plan never holds a secret; a damaged one is a typed error.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use crate::common::{self, Run, Scratch};

/// A stack of one `local` file per label, rooted at `root`.
fn files_doc(root: &Path, labels: &[&str]) -> String {
    let mut doc = format!(
        "stack: saved\ntargets:\n  - name: home\n    plugin: local\n    config: {{ root: \"{}\", create_root: true }}\nresources:\n",
        root.display()
    );
    for l in labels {
        doc.push_str(&format!(
            "  - {{ label: {l}, type: Local::Fs::File, target: home, properties: {{ path: {l}.txt, content: \"{l}\" }} }}\n"
        ));
    }
    doc
}

/// [`files_doc`] with one more file, `note`, whose content the document
/// reads from `note.src` beside it (`file()`).
fn with_note(root: &Path, labels: &[&str]) -> String {
    files_doc(root, labels)
        + "  - label: note\n    type: Local::Fs::File\n    target: home\n    properties:\n      path: note.txt\n      content: '${file(\"note.src\")}'\n"
}

/// `orrery ARGS`, its standard input closed: a question would fail it.
fn orrery(scratch: &Scratch, args: &[&str]) -> Run {
    let mut cmd = scratch.command(args);
    cmd.stdin(std::process::Stdio::null())
        .env_remove("ORRERY_PRIMARY")
        .env_remove("ORRERY_DATABASE_URL")
        .env_remove("ORRERY_NATS_URL");
    Run::from(cmd.output().unwrap())
}

fn path(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mode_of(p: &Path) -> u32 {
    std::fs::metadata(p).unwrap().permissions().mode() & 0o777
}

/// Applies `doc` (written to `name`) locally, without a question.
fn apply_doc(scratch: &Scratch, name: &str, doc: &str) {
    let file = scratch.write(name, doc);
    let run = orrery(scratch, &["apply", path(&file), "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
}

/// (1) `plan --out` then `apply FILE`: exactly the saved plan runs, with no
/// question; the same file again is refused, its creates being done.
#[test]
fn a_saved_plan_applies_exactly_the_plan_it_saved() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    apply_doc(&scratch, "first.yaml", &files_doc(&root, &["a"]));
    let mine = scratch.write("mine.yaml", &with_note(&root, &["a", "b"]));
    scratch.write("note.src", "as planned");
    let saved = scratch.path().join("mine.plan");

    let plan = orrery(&scratch, &["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(plan.stdout.contains("2 to create"), "{plan:?}");
    assert!(plan.stdout.contains("Saved the plan to"), "{plan:?}");
    assert_eq!(mode_of(&saved), 0o600, "only its owner reads a saved plan");
    let file: serde_json::Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(file["orrery_saved_plan"], 1, "{file}");
    assert_eq!(file["plan_hash"].as_str().unwrap().len(), 64, "{file}");
    assert_eq!(file["plan"]["summary"]["create"], 2, "{file}");
    assert_eq!(file["files"]["note.src"], "as planned", "{file}");
    // The document and what it reads may change on disk: the saved plan
    // carries its own.
    std::fs::write(&mine, files_doc(&root, &["a", "b", "z"])).unwrap();
    scratch.write("note.src", "edited since");

    let apply = orrery(&scratch, &["apply", path(&saved)]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(!apply.stdout.contains("[y/N]"), "no question: {apply:?}");
    assert_eq!(std::fs::read_to_string(root.join("b.txt")).unwrap(), "b");
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "as planned"
    );
    assert!(root.join("a.txt").is_file() && !root.join("z.txt").exists());

    // Applied once, the plan is spent: planned again it does nothing.
    let again = orrery(&scratch, &["apply", path(&saved)]);
    assert_eq!(again.code, 1, "{again:?}");
    assert!(
        again
            .stderr
            .contains("the stack changed since your plan; plan again"),
        "{again:?}"
    );
    assert!(
        again.stderr.contains("`b`: confirmed create, now nothing"),
        "{again:?}"
    );
}

/// (2) Another apply moves the stack after `plan --out`: `apply FILE`
/// exits 1 naming what changed, and nothing runs.
#[test]
fn a_saved_plan_is_refused_when_the_stack_changed_and_nothing_runs() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    apply_doc(&scratch, "first.yaml", &files_doc(&root, &["a"]));
    let mine = scratch.write("mine.yaml", &files_doc(&root, &["a", "b"]));
    let saved = scratch.path().join("mine.plan");
    let plan = orrery(&scratch, &["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");

    // A colleague's apply: one more file.
    apply_doc(&scratch, "theirs.yaml", &files_doc(&root, &["a", "c"]));
    let apply = orrery(&scratch, &["apply", path(&saved)]);
    assert_eq!(apply.code, 1, "{apply:?}");
    assert!(
        apply
            .stderr
            .contains("the stack changed since your plan; plan again"),
        "{apply:?}"
    );
    assert!(
        apply.stderr.contains("`c`: confirmed nothing, now delete"),
        "{apply:?}"
    );
    assert!(
        root.join("c.txt").is_file(),
        "the delete never shown did not run"
    );
    assert!(!root.join("b.txt").exists(), "nothing ran: {apply:?}");

    // Planned again and saved again: that plan runs.
    let plan = orrery(&scratch, &["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");
    let apply = orrery(&scratch, &["apply", path(&saved)]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(root.join("b.txt").is_file() && !root.join("c.txt").exists());
}

/// Applies `doc` through the primary's API, as a colleague would, and
/// waits for it to end `completed`.
fn colleague_applies(server: &common::server::Server, doc: &str) {
    let (status, accepted) =
        server.post("/v1/stacks/apply", &serde_json::json!({ "document": doc }));
    assert_eq!(status, 202, "{accepted}");
    let id = accepted["command_id"].as_str().unwrap().to_owned();
    let done = server.wait_command(&id);
    assert_eq!(done["status"], "completed", "{done}");
}

/// (3) The same through a primary: `plan --out --primary`, `apply FILE
/// --primary` runs it; after a colleague's apply it is refused (the
/// primary's 409), and nothing ran.
#[test]
fn a_saved_plan_through_a_primary_runs_or_is_refused() {
    let server = common::server::Server::start();
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let url = server.url("");
    colleague_applies(&server, &files_doc(&root, &["a"]));
    let remote = |args: &[&str]| {
        let mut cmd = scratch.command(args);
        cmd.args(["--primary", &url])
            .env("ORRERY_TOKEN", common::server::ADMIN_TOKEN)
            .stdin(std::process::Stdio::null());
        Run::from(cmd.output().unwrap())
    };
    let mine = scratch.write("mine.yaml", &with_note(&root, &["a", "b"]));
    scratch.write("note.src", "as planned");
    let saved = scratch.path().join("mine.plan");

    let plan = remote(&["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");
    assert_eq!(mode_of(&saved), 0o600);
    colleague_applies(&server, &files_doc(&root, &["a", "c"]));
    let refused = remote(&["apply", path(&saved)]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused
            .stderr
            .contains("the stack changed since your plan; plan again"),
        "{refused:?}"
    );
    assert!(
        refused
            .stderr
            .contains("`c`: confirmed nothing, now delete"),
        "{refused:?}"
    );
    assert!(root.join("c.txt").is_file() && !root.join("b.txt").exists());

    let plan = remote(&["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");
    // The primary reads no files: the saved plan brings what was read.
    scratch.write("note.src", "edited since");
    let apply = remote(&["apply", path(&saved)]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(!apply.stdout.contains("[y/N]"), "no question: {apply:?}");
    assert!(root.join("b.txt").is_file() && !root.join("c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(root.join("note.txt")).unwrap(),
        "as planned"
    );
}

const SECRET: &str = "s3cret-saved-plan-7f21c9";

/// A stack with a secret parameter, written into a file's content and into
/// the `local` plugin's write-only `owner_note`.
const SECRET_DOC: &str = r#"stack: secretive
parameters:
  greeting: { type: string }
  password: { type: secret }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - label: page
    type: Local::Fs::File
    target: home
    properties: { path: index.html, content: "${param.greeting}" }
  - label: creds
    type: Local::Fs::File
    target: home
    properties:
      path: creds.txt
      content: "password=${param.password}\n"
      owner_note: "${param.password}"
"#;

/// (4) A saved plan holds no secret value: secret parameters are named
/// only and asked for again at apply, where another value is refused; a
/// document that writes a secret out itself cannot be saved.
#[test]
fn a_saved_plan_holds_no_secret_value() {
    let scratch = Scratch::new();
    let doc = scratch.write("stack.yaml", SECRET_DOC);
    let saved = scratch.path().join("secret.plan");
    let with_secret = |args: &[&str], secret: Option<&str>| {
        let mut cmd = scratch.command(args);
        cmd.stdin(std::process::Stdio::null())
            .env_remove("ORRERY_PRIMARY")
            .env_remove("ORRERY_VAR_password");
        if let Some(secret) = secret {
            cmd.env("ORRERY_VAR_password", secret);
        }
        Run::from(cmd.output().unwrap())
    };

    let plan = with_secret(
        &[
            "plan",
            path(&doc),
            "--var",
            "greeting=hello",
            "--out",
            path(&saved),
        ],
        Some(SECRET),
    );
    assert_eq!(plan.code, 2, "{plan:?}");
    let bytes = std::fs::read(&saved).unwrap();
    assert!(
        !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
        "the saved plan holds the secret: {}",
        String::from_utf8_lossy(&bytes)
    );
    let file: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(file["secret_parameters"], serde_json::json!(["password"]));
    assert_eq!(file["var_texts"]["greeting"], "hello", "{file}");

    // Not given again: refused before anything is planned.
    let missing = with_secret(&["apply", path(&saved)], None);
    assert_eq!(missing.code, 1, "{missing:?}");
    assert!(
        missing
            .stderr
            .contains("needs its secret parameter `password` again"),
        "{missing:?}"
    );
    // Another value: not the plan that was saved.
    let other = with_secret(&["apply", path(&saved)], Some("another-secret-value"));
    assert_eq!(other.code, 1, "{other:?}");
    assert!(
        other
            .stderr
            .contains("a secret parameter's value is not the one the plan was made with"),
        "{other:?}"
    );
    // A parameter the plan fixed cannot be given again.
    let fixed = with_secret(
        &["apply", path(&saved), "--var", "greeting=bye"],
        Some(SECRET),
    );
    assert_eq!(fixed.code, 1, "{fixed:?}");
    assert!(
        fixed.stderr.contains("fixes parameter `greeting`"),
        "{fixed:?}"
    );
    let site = scratch.path().join("site");
    assert!(!site.join("creds.txt").exists(), "nothing ran");

    let apply = with_secret(&["apply", path(&saved)], Some(SECRET));
    assert_eq!(apply.code, 0, "{apply:?}");
    assert_eq!(
        std::fs::read_to_string(site.join("creds.txt")).unwrap(),
        format!("password={SECRET}\n")
    );
    assert_eq!(
        std::fs::read_to_string(site.join("index.html")).unwrap(),
        "hello"
    );

    // A write-only field given in the document's own text is refused.
    let literal = scratch.write(
        "literal.yaml",
        &SECRET_DOC.replace(
            "owner_note: \"${param.password}\"",
            "owner_note: written-out-secret",
        ),
    );
    let out = scratch.path().join("literal.plan");
    let refused = with_secret(
        &[
            "plan",
            path(&literal),
            "--var",
            "greeting=hi",
            "--out",
            path(&out),
        ],
        Some(SECRET),
    );
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains("would hold a secret in clear")
            && refused
                .stderr
                .contains("resource `creds`: field `owner_note`"),
        "{refused:?}"
    );
    assert!(!out.exists(), "nothing was saved");
}

/// (5) A truncated, corrupt, foreign or newer saved plan is a typed error
/// (exit 1, one line), never a panic, and nothing runs; a document edited
/// inside the plan plans otherwise and is refused.
#[test]
fn a_damaged_saved_plan_is_a_typed_error() {
    let scratch = Scratch::new();
    let root = scratch.path().join("site");
    let mine = scratch.write("mine.yaml", &files_doc(&root, &["a"]));
    let saved = scratch.path().join("mine.plan");
    let plan = orrery(&scratch, &["plan", path(&mine), "--out", path(&saved)]);
    assert_eq!(plan.code, 2, "{plan:?}");
    let good = std::fs::read_to_string(&saved).unwrap();

    let refused = |name: &str, bytes: &[u8], expected: &str| {
        let file = scratch.path().join(name);
        std::fs::write(&file, bytes).unwrap();
        let run = orrery(&scratch, &["apply", path(&file)]);
        assert_eq!(run.code, 1, "{name}: {run:?}");
        assert!(run.stderr.contains(expected), "{name}: {run:?}");
        assert!(!run.stderr.contains("panicked"), "{name}: {run:?}");
        assert!(!root.exists(), "{name}: nothing ran");
    };
    refused(
        "truncated.plan",
        &good.as_bytes()[..good.len() / 2],
        "is truncated or corrupt",
    );
    refused(
        "shape.plan",
        br#"{"orrery_saved_plan": 1, "stack": 5}"#,
        "is truncated or corrupt",
    );
    refused(
        "newer.plan",
        good.replacen("\"orrery_saved_plan\":1", "\"orrery_saved_plan\":99", 1)
            .as_bytes(),
        "has format 99, newer than this orrery reads (1)",
    );
    let hash = serde_json::from_str::<serde_json::Value>(&good).unwrap()["plan_hash"]
        .as_str()
        .unwrap()
        .to_owned();
    refused(
        "rehashed.plan",
        good.replacen(&hash, &"0".repeat(64), 1).as_bytes(),
        "its hash is not its plan's",
    );
    refused(
        "foreign.plan",
        b"PK\x03\x04\x14\x00\x00\x00\x08\x00\xff\xfe terraform plan",
        "is neither a stack document nor a saved plan",
    );
    // The document edited inside the file: the plan made of it is another.
    refused(
        "edited.plan",
        good.replacen("content: \\\"a\\\"", "content: \\\"edited\\\"", 1)
            .as_bytes(),
        "the stack changed since your plan; plan again",
    );
    // A saved plan fixes its own selection.
    let targeted = orrery(&scratch, &["apply", path(&saved), "--target", "a"]);
    assert_eq!(targeted.code, 1, "{targeted:?}");
    assert!(
        targeted.stderr.contains("--target cannot be given with it"),
        "{targeted:?}"
    );
    assert!(!root.exists(), "nothing ran");
}
