//! `docs/stacks.md` is the reference of the stack document. This test keeps
//! it honest: every ```yaml block in it parses through the real parser
//! (```yaml bad blocks fail, with exactly the message of the ```text block
//! after them), and every key the parser accepts is in its tables.

use std::path::PathBuf;

use orrery_stack as stack;

fn doc() -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/stacks.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A fenced block: its info string, its text, the line it starts on.
struct Block {
    info: String,
    text: String,
    line: usize,
}

fn blocks(doc: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    for (i, line) in doc.lines().enumerate() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(info)) if !info.is_empty() && !info.starts_with('`') => {
                open = Some(Block {
                    info: info.trim().to_owned(),
                    text: String::new(),
                    line: i + 1,
                })
            }
            (Some(_), Some("")) => out.extend(open.take()),
            (Some(b), _) => {
                b.text.push_str(line);
                b.text.push('\n');
            }
            (None, _) => {}
        }
    }
    assert!(open.is_none(), "an unclosed block in docs/stacks.md");
    out
}

#[test]
fn every_yaml_example_parses_and_every_bad_one_fails_as_shown() {
    let doc = doc();
    let blocks = blocks(&doc);
    let (mut good, mut bad) = (0, 0);
    // ```yaml file=PATH blocks are files later examples read (modules).
    let mut files = std::collections::BTreeMap::new();
    for (i, b) in blocks.iter().enumerate() {
        if let Some(path) = b.info.strip_prefix("yaml file=") {
            files.insert(path.to_owned(), b.text.clone());
            continue;
        }
        let read = |p: &str| {
            files
                .get(p)
                .cloned()
                .ok_or_else(|| format!("no file `{p}`"))
        };
        let inputs = stack::Inputs {
            files: &read,
            ..stack::Inputs::default()
        };
        match b.info.as_str() {
            "yaml" => {
                if let Err(e) = stack::parse_with_inputs("stacks.md", &b.text, "/srv", &inputs) {
                    panic!("docs/stacks.md:{}: example does not parse: {e}", b.line);
                }
                good += 1;
            }
            "yaml bad" => {
                let expected = blocks
                    .get(i + 1)
                    .filter(|n| n.info == "text")
                    .unwrap_or_else(|| {
                        panic!(
                            "docs/stacks.md:{}: a bad example needs a ```text block with its message after it",
                            b.line
                        )
                    });
                match stack::parse_with_inputs("stacks.md", &b.text, "/srv", &inputs) {
                    Ok(_) => panic!("docs/stacks.md:{}: bad example parses", b.line),
                    Err(e) => assert_eq!(
                        e.to_string(),
                        expected.text.trim_end(),
                        "docs/stacks.md:{}",
                        b.line
                    ),
                }
                bad += 1;
            }
            _ => {}
        }
    }
    assert!(good >= 1 && bad >= 1, "{good} good and {bad} bad examples");
}

/// The part of the doc under the heading for each part of the document.
fn section<'a>(doc: &'a str, heading: &str) -> &'a str {
    let start = doc
        .find(&format!("\n## {heading}\n"))
        .unwrap_or_else(|| panic!("docs/stacks.md has no `## {heading}` section"));
    let rest = &doc[start + 1..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    &rest[..end]
}

#[test]
fn every_key_the_parser_accepts_is_documented_in_its_table() {
    let doc = doc();
    let headings = [
        ("document", "Top-level keys"),
        ("target", "Targets"),
        ("resource", "Resources"),
        ("parameter", "Parameters"),
        ("output", "Outputs"),
        ("module_use", "Modules"),
        ("module", "Module files"),
        ("moved", "Moved"),
    ];
    let parts = stack::accepted_keys();
    assert_eq!(parts.len(), headings.len(), "a part without a heading here");
    for (part, keys) in parts {
        let heading = headings
            .iter()
            .find(|(p, _)| *p == part)
            .unwrap_or_else(|| panic!("no heading for part `{part}`"))
            .1;
        let text = section(&doc, heading);
        assert!(!keys.is_empty(), "{part}");
        for key in keys {
            assert!(
                text.contains(&format!("| `{key}` |")),
                "docs/stacks.md, `## {heading}`: key `{key}` is not in the table"
            );
        }
    }
}
