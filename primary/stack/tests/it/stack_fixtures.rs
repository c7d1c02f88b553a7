//! The documents under `primary/tests/fixtures/stacks/`: every good one
//! parses to the values its `# expect:` lines name, every bad one fails
//! with exactly the message (and line) of its `# error:` line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use orrery_schema::Value;
use orrery_stack::{self as stack, Expr, Inputs, Supplied};

fn dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/stacks")
        .join(kind)
}

fn fixtures(kind: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(dir(kind))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            (name, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no {kind} fixtures");
    out
}

/// The values of `# KEY: …` comment lines.
fn directives<'a>(text: &'a str, key: &str) -> Vec<&'a str> {
    let prefix = format!("# {key}: ");
    text.lines()
        .filter_map(|l| l.strip_prefix(&prefix))
        .collect()
}

fn parse(name: &str, text: &str, dir: &Path) -> Result<stack::Stack, stack::StackError> {
    let vars: BTreeMap<String, Supplied> = directives(text, "var")
        .into_iter()
        .map(|v| {
            let (k, v) = v.split_once('=').expect("NAME=VALUE");
            (k.to_owned(), Supplied::Text(v.to_owned()))
        })
        .collect();
    let dir = dir.to_owned();
    let files = move |p: &str| std::fs::read_to_string(dir.join(p)).map_err(|e| e.to_string());
    let inputs = Inputs {
        vars,
        files: &files,
        ..Inputs::default()
    };
    stack::parse_with_inputs(name, text, "/srv", &inputs)
}

#[test]
fn good_fixtures_parse_to_their_expected_values() {
    for (name, text) in fixtures("good") {
        let stack = parse(&name, &text, &dir("good")).unwrap_or_else(|e| panic!("{name}: {e}"));
        let expects = directives(&text, "expect");
        assert!(!expects.is_empty(), "{name}: no `# expect:` lines");
        for line in expects {
            let (at, json) = line.split_once(" = ").expect("LABEL.PROPERTY = JSON");
            let (label, property) = at.rsplit_once('.').expect("LABEL.PROPERTY");
            let expected: Value = serde_json::from_str(json).expect(json);
            let r = stack
                .resource(label)
                .unwrap_or_else(|| panic!("{name}: no resource {label}"));
            match &r.properties[property] {
                Expr::Literal(v) => assert_eq!(v, &expected, "{name}: {at}"),
                other => panic!("{name}: {at} is not a literal: {other:?}"),
            }
        }
        for at in directives(&text, "secret") {
            let (label, property) = at.rsplit_once('.').expect("LABEL.PROPERTY");
            assert!(
                stack.resource(label).unwrap().secret.contains(property),
                "{name}: {at} is not marked secret"
            );
        }
        // Nothing else is marked secret.
        let secret: usize = stack.resources.iter().map(|r| r.secret.len()).sum();
        assert_eq!(secret, directives(&text, "secret").len(), "{name}");
    }
}

#[test]
fn bad_fixtures_fail_with_their_exact_message_and_line() {
    for (name, text) in fixtures("bad") {
        let expected = directives(&text, "error");
        assert_eq!(expected.len(), 1, "{name}: one `# error:` line");
        match parse(&name, &text, &dir("bad")) {
            Ok(_) => panic!("{name}: parses"),
            Err(e) => assert_eq!(e.to_string(), expected[0], "{name}"),
        }
        // No secret given to a bad document is in its message.
        for v in directives(&text, "var") {
            if let Some(("pw" | "token", value)) = v.split_once('=') {
                let e = parse(&name, &text, &dir("bad")).unwrap_err().to_string();
                assert!(!e.contains(value), "{name}: {e}");
            }
        }
    }
}
