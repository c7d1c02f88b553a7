//! `examples/multi-site` applied as the README says: a target per site
//! (`for_each` over targets) and a module per site, through real `local`
//! plugin processes; re-applied with no changes, given one more site,
//! then destroyed.

use crate::common;

use common::{root, Scratch};

/// The example copied into a scratch directory, as it is laid out.
fn example(scratch: &Scratch) -> std::path::PathBuf {
    let dir = root().join("examples/multi-site");
    std::fs::create_dir(scratch.path().join("modules")).unwrap();
    let module = std::fs::read_to_string(dir.join("modules/site.yaml")).unwrap();
    scratch.write("modules/site.yaml", &module);
    let text = std::fs::read_to_string(dir.join("stack.yaml")).unwrap();
    scratch.write("stack.yaml", &text)
}

#[test]
fn the_multi_site_example_applies_per_site_and_grows() {
    let scratch = Scratch::new();
    let file = example(&scratch);
    let file = file.to_str().unwrap();
    let apply = scratch.orrery(&["apply", file, "--yes"]);
    assert_eq!(apply.code, 0, "{apply:?}");
    let sites = scratch.path().join("sites");
    for site in ["paris", "tokyo"] {
        assert_eq!(
            std::fs::read_to_string(sites.join(format!("{site}/www/index.html"))).unwrap(),
            format!("<h1>{}</h1>\n", site.to_uppercase())
        );
        assert!(sites.join(format!("{site}/logs")).is_dir());
    }
    assert_eq!(
        std::fs::read_to_string(sites.join("paris/sites.txt")).unwrap(),
        "paris\ntokyo\n"
    );
    assert!(
        apply.stdout.contains("first_page = www/index.html"),
        "{apply:?}"
    );
    let inventory = scratch.orrery(&["inventory", "--output", "json"]);
    assert!(
        inventory.stdout.contains(r#"module.site[\"tokyo\"].page"#),
        "{inventory:?}"
    );

    let again = scratch.orrery(&["plan", file]);
    assert_eq!(again.code, 0, "no changes: {again:?}");

    let grown = scratch.orrery(&[
        "apply",
        file,
        "--yes",
        "--var",
        "sites=[paris, tokyo, lima]",
    ]);
    assert_eq!(grown.code, 0, "{grown:?}");
    assert!(sites.join("lima/www/index.html").is_file());

    let destroy = scratch.orrery(&["destroy", "--stack", "multi-site", "--yes"]);
    assert_eq!(destroy.code, 0, "{destroy:?}");
    assert!(!sites.join("paris/www").exists(), "destroyed");
}
