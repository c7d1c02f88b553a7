//! The main job in embedded mode: the quickstart stack applied, re-applied,
//! edited and destroyed through real `local` plugin processes, with the
//! files on disk checked at every step.

use crate::common;

use std::path::Path;

use common::{root, Scratch};

fn quickstart(scratch: &Scratch) -> std::path::PathBuf {
    let text = std::fs::read_to_string(root().join("examples/quickstart/stack.yaml")).unwrap();
    scratch.write("stack.yaml", &text)
}

fn tree(dir: &Path) -> Vec<String> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            let rel = p.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&p).unwrap();
            if meta.file_type().is_symlink() {
                out.push(format!(
                    "{rel} -> {}",
                    std::fs::read_link(&p).unwrap().display()
                ));
            } else if meta.is_dir() {
                out.push(format!("{rel}/"));
                walk(base, &p, out);
            } else {
                out.push(rel);
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

#[test]
fn quickstart_applies_is_idempotent_edits_precisely_and_destroys() {
    let scratch = Scratch::new();
    let stack = quickstart(&scratch);
    let stack = stack.to_str().unwrap();
    let site = scratch.path().join("site");

    let run = scratch.orrery(&["apply", stack, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("Plan: 12 to create"), "{run:?}");
    assert_eq!(
        tree(&site),
        [
            "app/",
            "app/README.md",
            "app/config/",
            "app/config/settings.toml",
            "app/logs/",
            "app/logs/current.log",
            "app/public -> static",
            "app/settings.toml -> config/settings.toml",
            "app/static/",
            "app/static/css/",
            "app/static/css/site.css",
            "app/static/index.html",
        ]
    );
    assert_eq!(
        std::fs::read_to_string(site.join("app/static/index.html")).unwrap(),
        "<h1>Hello from Orrery</h1>\n"
    );

    // A second apply changes nothing; plan says so with exit 0.
    let run = scratch.orrery(&["apply", stack, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stdout.contains("No changes: 12 resources up to date."),
        "{run:?}"
    );
    assert_eq!(scratch.orrery(&["plan", stack]).code, 0);

    // The write-only field is never stored in clear.
    let state = std::fs::read(scratch.path().join("state/state.db")).unwrap();
    assert!(!String::from_utf8_lossy(&state).contains("write-only: sent to the plugin"));

    // Edit: one in-place change, one create-only change (replacement).
    let edited = std::fs::read_to_string(stack)
        .unwrap()
        .replace("Hello from Orrery", "Hello again")
        .replace("${app.path}/README.md", "${app.path}/README.txt");
    let edited = scratch.write("edited.yaml", &edited);
    let edited = edited.to_str().unwrap();
    let run = scratch.orrery(&["plan", edited, "--output", "json"]);
    assert_eq!(run.code, 2, "plan with changes exits 2: {run:?}");
    let plan: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let changed: Vec<(String, String)> = plan["changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op")
        .map(|c| {
            (
                c["label"].as_str().unwrap().to_owned(),
                c["action"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        changed,
        [
            ("readme".to_owned(), "replace".to_owned()),
            ("index".to_owned(), "update".to_owned())
        ]
    );
    let run = scratch.orrery(&["apply", edited, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        std::fs::read_to_string(site.join("app/static/index.html")).unwrap(),
        "<h1>Hello again</h1>\n"
    );
    assert!(site.join("app/README.txt").exists() && !site.join("app/README.md").exists());
    assert_eq!(
        scratch.orrery(&["plan", edited]).code,
        0,
        "converged after the edit"
    );

    // Destroy by stack name alone: targets come from the state store.
    let run = scratch.orrery(&["destroy", "--stack", "quickstart", "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(tree(&site), Vec::<String>::new());
    let run = scratch.orrery(&["inventory", "--output", "json"]);
    assert_eq!(run.stdout.trim(), "[]");
    let run = scratch.orrery(&["status", "--output", "json"]);
    let status: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    assert_eq!(status["status"], "completed");
    assert_eq!(status["kind"], "destroy");
}

#[test]
fn patch_mode_never_deletes_and_reconcile_does() {
    let scratch = Scratch::new();
    let stack = quickstart(&scratch);
    assert_eq!(
        scratch
            .orrery(&["apply", stack.to_str().unwrap(), "--yes"])
            .code,
        0
    );
    let text = std::fs::read_to_string(&stack).unwrap();
    let cut = text.find("  - label: docroot-link").unwrap();
    // The outputs stay: dropping one is a change of its own.
    let outputs = text.find("\noutputs:").unwrap();
    let smaller = scratch.write(
        "smaller.yaml",
        &format!("{}{}", &text[..cut], &text[outputs..]),
    );
    let smaller = smaller.to_str().unwrap();
    let run = scratch.orrery(&["plan", smaller, "--mode", "patch"]);
    assert_eq!(
        run.code, 0,
        "patch mode ignores undeclared resources: {run:?}"
    );
    let run = scratch.orrery(&["apply", smaller, "--yes"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(run.stdout.contains("2 to delete"), "{run:?}");
    assert!(!scratch.path().join("site/app/public").exists());
}
