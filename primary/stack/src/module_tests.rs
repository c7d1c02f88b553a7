//! Modules: addresses under the module's path, outputs, nesting, the
//! bounds, and errors that name the module's file and the use's line.

use std::collections::BTreeMap;

use orrery_plugin_sdk::{field, resource};
use orrery_schema::Value;

use super::*;
use crate::test_support as ts;

fn catalog() -> Catalog {
    ts::catalog(vec![
        resource("Dir")
            .field(field::string("path").required())
            .field(field::string("owner"))
            .build(),
        resource("File")
            .field(field::string("path").required())
            .field(field::string("content"))
            .build(),
    ])
}

const DB: &str = "\
parameters:
  region: { type: string }
  password: { type: secret, default: \"not-a-password-000\" }
resources:
  - label: data
    type: Dir
    target: t
    properties: { path: \"db-${param.region}\" }
  - label: conf
    type: File
    target: t
    properties:
      path: \"${data.path}/db.conf\"
      content: \"pw=${param.password}\"
outputs:
  dir: { value: \"${data.path}\" }
  region: { value: \"${param.region}\" }
";

/// Parses `text` (as `stack.yaml`) with `files` as the stack's directory.
fn parse_in(text: &str, files: &[(&str, &str)]) -> Result<Stack, StackError> {
    let files: BTreeMap<String, String> = files
        .iter()
        .map(|(p, t)| ((*p).to_owned(), (*t).to_owned()))
        .collect();
    let read = move |p: &str| {
        files
            .get(p)
            .cloned()
            .ok_or_else(|| format!("no such file `{p}`"))
    };
    parse_with_inputs(
        "dir/stack.yaml",
        text,
        "/srv",
        &Inputs {
            files: &read,
            ..Inputs::default()
        },
    )
}

const HEAD: &str = "stack: s\ntargets:\n  - name: t\n    plugin: p\n";

fn labels(stack: &Stack) -> Vec<&str> {
    stack.resources.iter().map(|r| r.label.as_str()).collect()
}

#[test]
fn a_module_per_region_addresses_its_resources_under_the_module() {
    let text = format!(
        "{HEAD}modules:\n  - name: db\n    source: ./modules/db.yaml\n    for_each: [eu, us]\n    with: {{ region: \"${{each.key}}\" }}\nresources:\n  - label: index\n    type: File\n    target: t\n    properties:\n      path: \"${{module.db[\\\"eu\\\"].outputs.dir}}/index\"\n      content: \"${{module.db[\\\"us\\\"].outputs.region}}\"\noutputs:\n  eu: {{ value: \"${{module.db[\\\"eu\\\"].outputs.dir}}\" }}\n"
    );
    let stack = parse_in(&text, &[("modules/db.yaml", DB)]).unwrap();
    assert_eq!(
        labels(&stack),
        [
            "module.db[\"eu\"].data",
            "module.db[\"eu\"].conf",
            "module.db[\"us\"].data",
            "module.db[\"us\"].conf",
            "index"
        ]
    );
    // A reference inside the module is to the module's own instance.
    let conf = stack.resource("module.db[\"us\"].conf").unwrap();
    let mut refs = Vec::new();
    conf.properties["path"].references(&mut refs);
    assert_eq!(refs[0].resource, "module.db[\"us\"].data");
    // A known output is a value; one over a resource stays a reference.
    let index = stack.resource("index").unwrap();
    assert_eq!(
        literal(&index.properties["content"]),
        Some(&Value::from("us"))
    );
    let mut refs = Vec::new();
    index.properties["path"].references(&mut refs);
    assert_eq!(refs[0].resource, "module.db[\"eu\"].data");
    let mut refs = Vec::new();
    stack.outputs["eu"].value.references(&mut refs);
    assert_eq!(refs[0].resource, "module.db[\"eu\"].data");
    // Validation and the graph see one flat stack.
    let graph = validate(&stack, &catalog()).unwrap();
    let at = |l: &str| stack.resources.iter().position(|r| r.label == l).unwrap();
    assert!(graph.deps[at("index")]
        .iter()
        .any(|(d, _)| *d == at("module.db[\"eu\"].data")));
    assert!(
        stack.supplied,
        "a document reading modules is not recorded for resume"
    );
}

#[test]
fn secrets_passed_into_a_module_stay_secret() {
    let text = format!(
        "{HEAD}parameters:\n  pw: {{ type: secret, default: \"s3cret-s3cret-s3cret\" }}\nmodules:\n  - name: db\n    source: db.yaml\n    with: {{ region: \"${{param.pw}}\" }}\n"
    );
    let stack = parse_in(&text, &[("db.yaml", DB)]).unwrap();
    let data = stack.resource("module.db.data").unwrap();
    assert!(data.secret.contains("path"), "{:?}", data.secret);
    // The module's own secret default is secret too.
    assert!(stack
        .resource("module.db.conf")
        .unwrap()
        .secret
        .contains("content"));
    // And an output computed from it.
    let text = format!(
        "{HEAD}parameters:\n  pw: {{ type: secret, default: \"s3cret-s3cret-s3cret\" }}\nmodules:\n  - name: db\n    source: db.yaml\n    with: {{ region: \"${{param.pw}}\" }}\noutputs:\n  r: {{ value: \"${{module.db.outputs.region}}\" }}\n"
    );
    let stack = parse_in(&text, &[("db.yaml", DB)]).unwrap();
    assert!(stack.outputs["r"].secret);
    // A secret the module refuses is not shown in the message.
    let strict = "parameters:\n  region: { allowed: [eu] }\n";
    let e = parse_in(&text, &[("db.yaml", strict)]).unwrap_err();
    assert!(!e.to_string().contains("s3cret"), "{e}");
}

#[test]
fn modules_nest_and_can_be_counted_or_disabled() {
    let outer = "parameters:\n  n: { type: number }\nmodules:\n  - name: inner\n    source: ../inner/main.yaml\n    count: \"${param.n}\"\n    with: { region: \"r${count.index}\" }\n  - name: off\n    source: ../inner/main.yaml\n    enabled: false\n";
    let text = format!(
        "{HEAD}modules:\n  - name: outer\n    source: ./outer/main.yaml\n    with: {{ n: 2 }}\n"
    );
    let stack = parse_in(
        &text,
        &[("outer/main.yaml", outer), ("inner/main.yaml", DB)],
    )
    .unwrap();
    assert_eq!(
        labels(&stack),
        [
            "module.outer.module.inner[0].data",
            "module.outer.module.inner[0].conf",
            "module.outer.module.inner[1].data",
            "module.outer.module.inner[1].conf",
        ]
    );
    validate(&stack, &catalog()).unwrap();
}

#[test]
fn a_module_using_itself_is_refused_naming_the_circle() {
    let me = "modules:\n  - name: again\n    source: ./a.yaml\n";
    let text = format!("{HEAD}modules:\n  - name: a\n    source: ./a.yaml\n");
    let e = parse_in(&text, &[("a.yaml", me)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "dir/stack.yaml:6: in module `a`: dir/a.yaml:2: module `again`: `source`: the module uses itself: a.yaml -> a.yaml"
    );
}

#[test]
fn nesting_is_bounded() {
    let files: Vec<(String, String)> = (0..12)
        .map(|i| {
            (
                format!("m{i}.yaml"),
                format!("modules:\n  - name: m\n    source: ./m{}.yaml\n", i + 1),
            )
        })
        .collect();
    let refs: Vec<(&str, &str)> = files
        .iter()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    let text = format!("{HEAD}modules:\n  - name: m\n    source: ./m0.yaml\n");
    let e = parse_in(&text, &refs).unwrap_err();
    assert!(
        e.to_string()
            .ends_with("module `m`: `source`: modules nest more than 8 deep"),
        "{e}"
    );
}

#[test]
fn module_instances_are_bounded_across_levels() {
    let wide = "modules:\n  - name: m\n    source: ./leaf.yaml\n    count: 200\n";
    let text = format!("{HEAD}modules:\n  - name: w\n    source: ./wide.yaml\n    count: 100\n");
    let e = parse_in(&text, &[("wide.yaml", wide), ("leaf.yaml", "")]).unwrap_err();
    assert!(
        e.to_string()
            .contains("the document expands to more than 10000 module instances"),
        "{e}"
    );
}

#[test]
fn sources_outside_the_stack_directory_are_refused() {
    for (source, why) in [
        ("../secrets.yaml", "`../secrets.yaml` leaves the stack's directory"),
        ("./a/../../x.yaml", "`./a/../../x.yaml` leaves the stack's directory"),
        ("/etc/passwd", "`/etc/passwd`: a module's source is a path relative to the file using it"),
        ("hub:db@1.2", "`hub:db@1.2`: modules from the hub are not supported yet; use a path (`./modules/db.yaml`)"),
    ] {
        let text = format!("{HEAD}modules:\n  - name: x\n    source: \"{source}\"\n");
        let e = parse_in(&text, &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!("dir/stack.yaml:6: module `x`: `source`: {why}"),
        );
    }
    // From inside a module too: the stack's directory is the bound.
    let climb = "modules:\n  - name: up\n    source: ../../x.yaml\n";
    let text = format!("{HEAD}modules:\n  - name: x\n    source: ./sub/m.yaml\n");
    let e = parse_in(&text, &[("sub/m.yaml", climb)]).unwrap_err();
    assert!(
        e.to_string().ends_with("leaves the stack's directory"),
        "{e}"
    );
    let missing = format!("{HEAD}modules:\n  - name: x\n    source: ./nope.yaml\n");
    assert_eq!(
        parse_in(&missing, &[]).unwrap_err().to_string(),
        "dir/stack.yaml:6: module `x`: `source`: `nope.yaml`: no such file `nope.yaml`"
    );
}

#[test]
fn errors_inside_a_module_name_its_file_and_line_and_the_use() {
    // Found while parsing.
    let bad = "resources:\n  - label: data\n    type: Dir\n    target: t\n    properties: { path: \"${param.nope}\" }\n";
    let text = format!("{HEAD}modules:\n  - name: db\n    source: ./db.yaml\n    for_each: [eu]\n");
    let e = parse_in(&text, &[("db.yaml", bad)]).unwrap_err();
    assert_eq!(
        e.to_string(),
        "dir/stack.yaml:6: in module `db[\"eu\"]`: dir/db.yaml:2: resource `module.db[\"eu\"].data`: property `path`: `param.nope`: the document declares no parameter `nope`"
    );
    // Found while validating, two levels down.
    let leaf = "resources:\n  - label: d\n    type: Dir\n    target: t\n    properties: { colour: blue }\n";
    let mid = "\nmodules:\n  - name: leaf\n    source: ./leaf.yaml\n";
    let text = format!("{HEAD}modules:\n  - name: mid\n    source: ./mid.yaml\n");
    let stack = parse_in(&text, &[("mid.yaml", mid), ("leaf.yaml", leaf)]).unwrap();
    let errors: Vec<String> = validate(&stack, &catalog())
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        errors,
        [
            "dir/stack.yaml:6: in module `mid`: dir/mid.yaml:3: in module `leaf`: dir/leaf.yaml:2: resource `module.mid.module.leaf.d`: missing required field `path`",
            "dir/stack.yaml:6: in module `mid`: dir/mid.yaml:3: in module `leaf`: dir/leaf.yaml:2: resource `module.mid.module.leaf.d`: unknown field `colour` for type `Dir`",
        ]
    );
    // A module file of the wrong shape.
    let text = format!("{HEAD}modules:\n  - name: db\n    source: ./db.yaml\n");
    let e = parse_in(&text, &[("db.yaml", "stack: nested\n")]).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("dir/stack.yaml:6: in module `db`: dir/db.yaml:1: unknown field `stack`"),
        "{e}"
    );
    // An output the module does not have.
    let text = format!(
        "{HEAD}modules:\n  - name: db\n    source: ./db.yaml\n    with: {{ region: eu }}\noutputs:\n  x: {{ value: \"${{module.db.outputs.nope}}\" }}\n"
    );
    assert_eq!(
        parse_in(&text, &[("db.yaml", DB)]).unwrap_err().to_string(),
        "dir/stack.yaml:10: output `x`: `module.db.outputs.nope`: the module has no output `nope`"
    );
}

#[test]
fn depends_on_inside_a_module_is_to_the_module_s_own_resources() {
    let m = "resources:\n  - label: web\n    count: 2\n    type: Dir\n    target: t\n    properties: { path: \"w${count.index}\" }\n  - label: after\n    type: Dir\n    target: t\n    depends_on: [web]\n    properties: { path: a }\n";
    let text = format!("{HEAD}modules:\n  - name: m\n    source: ./m.yaml\n    for_each: [x]\n");
    let stack = parse_in(&text, &[("m.yaml", m)]).unwrap();
    let graph = validate(&stack, &catalog()).unwrap();
    let after = stack
        .resources
        .iter()
        .position(|r| r.label == "module.m[\"x\"].after")
        .unwrap();
    assert_eq!(graph.deps[after].len(), 2, "{:?}", graph.deps);
}

#[test]
fn a_large_module_used_many_times_is_read_and_scanned_once() {
    let padding = format!("# {}\n", "x".repeat(100)).repeat(5_000);
    let module = format!("{padding}resources: []\n");
    let text = format!("{HEAD}modules:\n  - name: m\n    source: ./m.yaml\n    count: 5000\n");
    let reads = std::cell::Cell::new(0);
    let read = |p: &str| {
        reads.set(reads.get() + 1);
        (p == "m.yaml")
            .then(|| module.clone())
            .ok_or_else(|| "no such file".to_owned())
    };
    let started = crate::test_clock::epoch();
    parse_with_inputs(
        "s.yaml",
        &text,
        "/srv",
        &Inputs {
            files: &read,
            ..Inputs::default()
        },
    )
    .unwrap();
    assert_eq!(reads.get(), 1);
    // 5,000 scans of its half megabyte would take many seconds.
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}
