//! Modules through a real apply with the local plugin: a module used per
//! site creates its resources under the module's address, its outputs
//! reach the document, a re-plan changes nothing, and a module file that
//! climbs out of the stack's directory is refused before anything runs.

use crate::common;

use common::Scratch;

const SITE: &str = r#"parameters:
  site: { type: string }
  greeting: { type: secret, default: "hello-secret-greeting" }
resources:
  - label: root
    type: Local::Fs::Directory
    target: home
    properties: { path: "${param.site}" }
  - label: index
    type: Local::Fs::File
    target: home
    properties:
      path: "${root.path}/index.html"
      content: "${param.greeting} from ${param.site}\n"
outputs:
  page: { value: "${index.path}" }
"#;

const DOC: &str = r#"stack: modular
parameters:
  sites: { type: list, default: [paris, tokyo] }
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
modules:
  - name: site
    source: ./modules/site.yaml
    for_each: "${param.sites}"
    with: { site: "${each.key}" }
resources:
  - label: links
    type: Local::Fs::File
    target: home
    properties:
      path: links.txt
      content: "${module.site[\"tokyo\"].outputs.page}\n"
outputs:
  paris: { value: "${module.site[\"paris\"].outputs.page}" }
"#;

#[test]
fn a_module_per_site_applies_under_its_address_and_replans_clean() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("modules")).unwrap();
    scratch.write("modules/site.yaml", SITE);
    let file = scratch.write("stack.yaml", DOC);
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let site = scratch.path().join("site");
    for s in ["paris", "tokyo"] {
        assert_eq!(
            std::fs::read_to_string(site.join(format!("{s}/index.html"))).unwrap(),
            format!("hello-secret-greeting from {s}\n")
        );
    }
    assert_eq!(
        std::fs::read_to_string(site.join("links.txt")).unwrap(),
        "tokyo/index.html\n",
        "a module's output over its resources, known after apply"
    );
    assert!(
        apply.stdout.contains("paris = paris/index.html"),
        "{apply:?}"
    );
    assert!(
        !apply.stdout.contains("hello-secret-greeting"),
        "a secret default inside a module is never printed: {apply:?}"
    );

    let inventory = scratch.orrery(&["inventory", "--output", "json"]);
    assert_eq!(inventory.code, 0, "{inventory:?}");
    for label in [
        r#"module.site[\"paris\"].root"#,
        r#"module.site[\"tokyo\"].index"#,
    ] {
        assert!(inventory.stdout.contains(label), "{label} in {inventory:?}");
    }
    let replan = scratch.orrery(&["plan", file]);
    assert_eq!(replan.code, 0, "no changes: {replan:?}");
}

#[test]
fn a_module_outside_the_stack_directory_is_refused() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("stack")).unwrap();
    scratch.write("site.yaml", SITE);
    let doc = DOC.replace("./modules/site.yaml", "../site.yaml");
    let file = scratch.write("stack/stack.yaml", &doc);
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(
            "error: module `site`: `source`: `../site.yaml` leaves the stack's directory"
        ) && run.stderr.contains("stack.yaml:9:3"),
        "{run:?}"
    );
    assert!(!scratch.path().join("stack/site").exists(), "nothing ran");
}

#[test]
fn a_module_linked_from_outside_the_stack_directory_is_refused() {
    let scratch = Scratch::new();
    std::fs::create_dir_all(scratch.path().join("stack/modules")).unwrap();
    let outside = scratch.write("site.yaml", SITE);
    std::os::unix::fs::symlink(&outside, scratch.path().join("stack/modules/site.yaml")).unwrap();
    let file = scratch.write("stack/stack.yaml", DOC);
    let run = scratch.orrery(&["apply", file.to_str().unwrap(), "--yes"]);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(
        run.stderr.contains(
            "module `site`: `source`: `modules/site.yaml`: the path leads out of the document's directory (a symbolic link)"
        ),
        "{run:?}"
    );
    assert!(!scratch.path().join("stack/site").exists(), "nothing ran");
}

#[test]
fn a_protected_resource_inside_a_module_refuses_a_destroy_naming_its_address() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("modules")).unwrap();
    scratch.write(
        "modules/site.yaml",
        &SITE.replace(
            "    target: home\n    properties: { path:",
            "    target: home\n    protect: true\n    properties: { path:",
        ),
    );
    let file = scratch.write("stack.yaml", DOC);
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let refused = scratch.orrery(&["destroy", file, "--yes"]);
    assert_eq!(refused.code, 1, "{refused:?}");
    assert!(
        refused.stderr.contains(
            r#"refusing to delete or replace protected resource(s) `module.site["paris"].root`, `module.site["tokyo"].root`; nothing was changed (allow it with --allow-protected)"#
        ),
        "{refused:?}"
    );
    assert!(scratch.path().join("site/paris").is_dir());
}

/// A module given a resource's property (`with: { dir: "${data.path}" }`):
/// the module's resources depend on that resource, so it is created first,
/// and the value reaches them at apply time.
#[test]
fn a_resource_property_passed_to_a_module_orders_and_reaches_its_resources() {
    let scratch = Scratch::new();
    std::fs::create_dir(scratch.path().join("modules")).unwrap();
    scratch.write(
        "modules/note.yaml",
        r#"parameters:
  dir: { type: string }
resources:
  - label: note
    type: Local::Fs::File
    target: home
    properties:
      path: "${param.dir}/note.txt"
      content: "in ${upper(param.dir)}\n"
outputs:
  where: { value: "${note.path}" }
"#,
    );
    let file = scratch.write(
        "stack.yaml",
        r#"stack: passed
targets:
  - name: home
    plugin: local
    config: { root: "${stack_dir}/site", create_root: true }
resources:
  - label: data
    type: Local::Fs::Directory
    target: home
    properties: { path: "data-${count.index}" }
    count: 1
modules:
  - name: n
    source: ./modules/note.yaml
    with: { dir: "${data[0].path}" }
outputs:
  where: { value: "${module.n.outputs.where}" }
"#,
    );
    let file = file.to_str().unwrap();
    let plan = scratch.orrery(&["plan", file]);
    assert_eq!(plan.code, 2, "changes: {plan:?}");
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("site/data-0/note.txt")).unwrap(),
        "in DATA-0\n",
        "the directory was created before the module's file, and the value reached it"
    );
    assert!(
        apply.stdout.contains("where = data-0/note.txt"),
        "{apply:?}"
    );
    let replan = scratch.orrery(&["plan", file]);
    assert_eq!(replan.code, 0, "no changes: {replan:?}");
}
