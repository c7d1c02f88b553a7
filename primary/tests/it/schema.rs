//! `orrery schema`: every example document validates against the JSON
//! Schema it writes (with the local plugin's types, from the schemas a
//! plan cached), and typos and wrong types on typed resources do not.

use crate::common;

use std::path::{Path, PathBuf};

use common::Scratch;
use serde_json::{json, Value};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn yaml(text: &str) -> Value {
    orrery_primary::stack::yaml::read(text, &Default::default()).expect("YAML")
}

/// The schema `orrery schema --output` writes once a plan has cached the
/// local plugin's schemas.
fn schema(scratch: &Scratch) -> Value {
    let doc = scratch.write(
        "good.yaml",
        "stack: good\ntargets:\n  - name: home\n    plugin: local\n    config: { root: \"${stack_dir}/site\", create_root: true }\nresources: []\n",
    );
    let plan = scratch.orrery(&["plan", doc.to_str().unwrap()]);
    assert_eq!(plan.code, 0, "{plan:?}");
    let out = scratch.path().join("stack.schema.json");
    let run = scratch.orrery(&["schema", "--output", out.to_str().unwrap()]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(!run.stderr.contains("warning"), "{run:?}");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn documents() -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in ["examples"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let d = entry.unwrap().path();
            for f in std::fs::read_dir(&d).into_iter().flatten() {
                let f = f.unwrap().path();
                if f.extension().is_some_and(|e| e == "yaml") {
                    out.push(f);
                }
            }
        }
    }
    // Documents only: module files (in `modules/` beside them) are not
    // stack documents.
    for dir in ["primary/tests/fixtures/stacks/good"] {
        for entry in std::fs::read_dir(root().join(dir)).unwrap() {
            let path = entry.unwrap().path();
            if path.is_file() {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn every_example_validates_and_typos_do_not() {
    let scratch = Scratch::new();
    let schema = schema(&scratch);
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    let validator = jsonschema::draft7::new(&schema).expect("a valid draft-07 schema");
    let docs = documents();
    assert!(docs.len() >= 6, "{docs:?}");
    for doc in &docs {
        let instance = yaml(&std::fs::read_to_string(doc).unwrap());
        let errors: Vec<String> = validator
            .iter_errors(&instance)
            .map(|e| format!("{} at {}", e, e.instance_path()))
            .collect();
        assert!(errors.is_empty(), "{}: {errors:#?}", doc.display());
    }

    let base = "stack: s\ntargets:\n  - name: home\n    plugin: local\nresources:\n  - label: app\n    type: Local::Fs::Directory\n    target: home\n    properties:\n";
    let check = |props: &str| validator.is_valid(&yaml(&format!("{base}{props}")));
    assert!(check("      path: app\n      mode: 493\n"));
    // An expression stands for any value.
    assert!(check("      path: app\n      mode: \"${param.mode}\"\n"));
    // An unknown property on a typed resource.
    assert!(!check("      path: app\n      colour: blue\n"));
    // A wrong type.
    assert!(!check("      path: app\n      mode: rwx\n"));
    // A missing required property.
    assert!(!check("      mode: 493\n"));
    // A typo in a resource's own key, and at the top level.
    assert!(!validator.is_valid(&yaml(&base.replace("target: home", "targte: home"))));
    let mut top = yaml(&format!("{base}      path: app\n"));
    top["resource"] = json!([]);
    assert!(!validator.is_valid(&top));
}

#[test]
fn without_cached_schemas_the_document_keys_are_still_described() {
    let scratch = Scratch::new();
    let run = scratch.orrery(&["schema"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert!(
        run.stderr.contains("warning: no plugin schemas in "),
        "{run:?}"
    );
    let schema: Value = serde_json::from_str(&run.stdout).unwrap();
    let validator = jsonschema::draft7::new(&schema).unwrap();
    // Any properties, then, but still only the document's keys.
    let doc = "stack: s\nresources:\n  - label: a\n    type: Any::Type\n    target: t\n    properties: { colour: blue }\n";
    assert!(validator.is_valid(&yaml(doc)));
    assert!(!validator.is_valid(&yaml(&doc.replace("label: a", "lable: a"))));
}
