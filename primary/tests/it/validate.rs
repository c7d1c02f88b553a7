//! `orrery validate`: a document checked offline against the schemas the
//! last plan cached (or `--schemas`), no plugin started; errors printed
//! as a compiler prints them.

use crate::common;

use std::path::{Path, PathBuf};

use common::{Run, Scratch};

fn good(scratch: &Scratch) -> PathBuf {
    scratch.write(
        "good.yaml",
        "stack: good\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources:\n  - label: app\n    type: Local::Fs::Directory\n    target: home\n    properties: { path: app }\n",
    )
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/errors")
}

/// The schemas cached by a plan of the good document (which starts the
/// local plugin), copied out as a `--schemas` file.
fn cached_schemas(scratch: &Scratch) -> PathBuf {
    let plan = scratch.orrery(&["plan", good(scratch).to_str().unwrap()]);
    assert_eq!(plan.code, 2, "the plan has changes: {plan:?}");
    let cache = scratch.state().join("schemas.json");
    let copy = scratch.path().join("schemas.json");
    std::fs::copy(&cache, &copy).expect("plan caches the schemas");
    copy
}

fn without(run: &Run, dir: &Path) -> String {
    run.stderr.replace(&format!("{}/", dir.display()), "")
}

#[test]
fn validate_uses_the_schemas_the_last_plan_cached() {
    let scratch = Scratch::new();
    let file = good(&scratch);
    let file = file.to_str().unwrap();
    // Nothing cached yet: it cannot check, and says how to fix it.
    let before = scratch.orrery(&["validate", file]);
    assert_eq!(before.code, 2, "{before:?}");
    assert!(
        before
            .stderr
            .contains("error: cannot check: no schema of plugin `local` in ")
            && before.stderr.contains("run `orrery plan ")
            && before.stderr.contains("or give them with --schemas FILE"),
        "{before:?}"
    );
    cached_schemas(&scratch);
    // No plugin can start now: validation needs none.
    let run = scratch
        .command(&["validate", file])
        .env("ORRERY_PLUGIN_DIR", scratch.path().join("no-plugins"))
        .env("PATH", "")
        .output()
        .unwrap();
    let run = Run::from(run);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.stdout,
        format!("{file}: valid (1 resource on 1 target)\n")
    );
    // Nothing was applied by either.
    assert!(!scratch.path().join("site/app").exists());
}

#[test]
fn every_bad_fixture_is_reported_exactly() {
    let scratch = Scratch::new();
    let schemas = cached_schemas(&scratch);
    let mut checked = 0;
    let mut names: Vec<_> = std::fs::read_dir(fixtures())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    names.sort();
    for doc in names {
        let expected = std::fs::read_to_string(doc.with_extension("txt"))
            .unwrap_or_else(|e| panic!("{}: {e}", doc.with_extension("txt").display()));
        let run = scratch.orrery(&[
            "validate",
            "--schemas",
            schemas.to_str().unwrap(),
            doc.to_str().unwrap(),
        ]);
        assert_eq!(run.code, 1, "{}: {run:?}", doc.display());
        assert_eq!(without(&run, &fixtures()), expected, "{}", doc.display());
        checked += 1;
    }
    assert!(checked >= 4, "{checked} fixtures");
}

#[test]
fn schemas_that_lack_a_plugin_cannot_check() {
    let scratch = Scratch::new();
    let schemas = scratch.write("schemas.json", "[]");
    let file = good(&scratch);
    let run = scratch.orrery(&[
        "validate",
        "--schemas",
        schemas.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("no schema of plugin `local`"),
        "{run:?}"
    );
    let broken = scratch.write("broken.json", "{ not json");
    let run = scratch.orrery(&[
        "validate",
        "--schemas",
        broken.to_str().unwrap(),
        file.to_str().unwrap(),
    ]);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr
            .contains("is not a JSON array of plugin announcements"),
        "{run:?}"
    );
}
