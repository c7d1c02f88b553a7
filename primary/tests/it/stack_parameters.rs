//! Stack parameters through `orrery plan|apply`: values from `--var`,
//! `--var-file` and `ORRERY_VAR_*`; a secret parameter reaches the plugin
//! but never the plan output, the process output or the SQLite store.

use crate::common;

use common::{Run, Scratch};

const SECRET: &str = "s3cret-param-8d41c7";
const OTHER_SECRET: &str = "s3cret-param-other-55e0";

const DOC: &str = r#"stack: params
parameters:
  site_root: { type: string, default: site }
  greeting: { type: string, description: The first line of the page. }
  mode: { type: number, default: 420, min: 256, max: 511 }
  password: { type: secret, pattern: "[a-z0-9-]{12,}" }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/${param.site_root}", create_root: true }
resources:
  - label: page
    type: Local::Fs::File
    target: home
    properties:
      path: index.html
      content: "${param.greeting}\n"
      mode: "${param.mode}"
  - label: creds
    type: Local::Fs::File
    target: home
    properties:
      path: creds.txt
      content: "password=${param.password}\n"
"#;

fn orrery(scratch: &Scratch, args: &[&str], password: &str) -> Run {
    let mut cmd = scratch.command(args);
    cmd.env("ORRERY_VAR_password", password)
        .env("RUST_LOG", "debug")
        .env_remove("ORRERY_DATABASE_URL")
        .env_remove("ORRERY_NATS_URL");
    Run::from(cmd.output().unwrap())
}

/// The bytes of every file of the embedded store that holds `needle`.
fn store_files_holding(scratch: &Scratch, needle: &str) -> Vec<String> {
    std::fs::read_dir(scratch.state())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            std::fs::read(p)
                .map(|b| b.windows(needle.len()).any(|w| w == needle.as_bytes()))
                .unwrap_or(false)
        })
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn parameters_come_from_flags_files_and_env_and_secrets_stay_hidden() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", DOC);
    let vars = scratch.write("vars.yaml", "greeting: Hello from a var file\nmode: 384\n");
    let (file, vars) = (file.to_str().unwrap(), vars.to_str().unwrap());

    let plan = orrery(
        &scratch,
        &["plan", file, "--var-file", vars, "--output", "json"],
        SECRET,
    );
    assert_eq!(plan.code, 2, "{plan:?}");
    assert!(
        !plan.stdout.contains(SECRET) && !plan.stderr.contains(SECRET),
        "{plan:?}"
    );
    let view: serde_json::Value = serde_json::from_str(plan.stdout.trim()).unwrap();
    let creds = view["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["label"] == "creds")
        .unwrap();
    let content = creds["diffs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["field"] == "content")
        .unwrap();
    assert_eq!(content["sensitive"], true, "{content}");

    // --var wins over --var-file.
    let apply = orrery(
        &scratch,
        &[
            "apply",
            file,
            "--yes",
            "--var-file",
            vars,
            "--var",
            "mode=416",
        ],
        SECRET,
    );
    assert_eq!(apply.code, 0, "{apply:?}");
    assert!(
        !apply.stdout.contains(SECRET) && !apply.stderr.contains(SECRET),
        "{apply:?}"
    );
    let site = scratch.path().join("site");
    assert_eq!(
        std::fs::read_to_string(site.join("index.html")).unwrap(),
        "Hello from a var file\n"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(site.join("index.html"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 416, "--var mode=416 (0o640)");
    // The plugin got the secret; the store did not.
    assert_eq!(
        std::fs::read_to_string(site.join("creds.txt")).unwrap(),
        format!("password={SECRET}\n")
    );
    assert_eq!(store_files_holding(&scratch, SECRET), Vec::<String>::new());
    assert!(
        !store_files_holding(&scratch, "Hello from a var file").is_empty(),
        "the store is readable as searched"
    );

    // The same values plan no change: the secret is compared by its hash.
    let again = orrery(
        &scratch,
        &["plan", file, "--var-file", vars, "--var", "mode=416"],
        SECRET,
    );
    assert_eq!(again.code, 0, "{again:?}");
    // Another secret is a change, shown as sensitive.
    let changed = orrery(
        &scratch,
        &["plan", file, "--var-file", vars, "--var", "mode=416"],
        OTHER_SECRET,
    );
    assert_eq!(changed.code, 2, "{changed:?}");
    assert!(
        changed.stdout.contains("content: (sensitive)"),
        "{changed:?}"
    );
    assert!(!changed.stdout.contains(OTHER_SECRET) && !changed.stdout.contains(SECRET));
}

#[test]
fn missing_and_invalid_values_are_errors_naming_the_parameter() {
    let scratch = Scratch::new();
    let file = scratch.write("stack.yaml", DOC);
    let file = file.to_str().unwrap();
    let path = format!("{}/stack.yaml", scratch.path().display());
    // The message, then where (as a compiler prints it).
    let cases: [(&[&str], &str, String); 4] = [
        (&[], SECRET, format!("error: parameter `greeting`: has no default and no value was given\n  --> {path}:4:3\n")),
        (&["--var", "greeting=hi", "--var", "mode=9999"], SECRET, format!("error: parameter `mode`: `9999` is more than the maximum 511\n  --> {path}:5:3\n")),
        (&["--var", "greeting=hi"], "short", format!("error: parameter `password`: the value does not match the pattern `[a-z0-9-]{{12,}}`\n  --> {path}:6:3\n")),
        (&["--var", "greeting=hi", "--var", "colour=red"], SECRET, format!("error: {path}: parameter `colour`: a value was given, but the document declares no such parameter")),
    ];
    for (args, password, expected) in cases {
        let mut all = vec!["plan", file];
        all.extend_from_slice(args);
        let run = orrery(&scratch, &all, password);
        assert_eq!(run.code, 1, "{run:?}");
        assert!(
            run.stderr.contains(&expected),
            "expected {expected:?} in {run:?}"
        );
        assert!(
            !run.stderr.contains("short"),
            "the secret is not shown: {run:?}"
        );
    }
    assert!(!scratch.path().join("site").exists(), "nothing was created");
}
