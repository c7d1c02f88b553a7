//! The scale of the stack language: `examples/fleet/stack.yaml` (a
//! 33-line document whose `for_each` makes 10,000 resources across 10
//! targets) evaluated, validated and planned against an empty store, next
//! to the same 10,000 resources written out literally (about 1.4 MB of
//! YAML), in the same run. Both must give the same resources; the target
//! is under 1 s for the generated one.
//!
//! `cargo bench -p orrery-primary --bench stack_scale` (release). The
//! catalog is the real `local` plugin's schemas, from its announcement.
//! Quick mode (`ORRERY_BENCH_QUICK=1`, or run without `--bench`) runs once
//! and does not hold the time to the target (a debug build is slower).

use std::time::{Duration, Instant};

use orrery_primary::plan::{self, Mode, SecretHasher};
use orrery_primary::stack::{self, Catalog, Expr, Stack};
use orrery_schema::Value;

fn catalog() -> Catalog {
    let mut c = Catalog::new();
    c.insert(orrery_plugin_sdk::server::announcement(
        &orrery_plugin_local::LocalPlugin,
    ));
    c
}

/// The generated document's resources written out one by one.
fn literal(generated: &Stack) -> String {
    let mut y = String::from("stack: fleet\ntargets:\n");
    for t in &generated.targets {
        let root = t.config["root"].as_str().unwrap_or_default();
        y.push_str(&format!(
            "  - name: {}\n    plugin: local\n    config: {{ root: \"{root}\", create_root: true }}\n",
            t.name
        ));
    }
    y.push_str("resources:\n");
    for r in &generated.resources {
        y.push_str(&format!(
            "  - label: '{}'\n    type: {}\n    target: {}\n    properties:\n",
            r.label, r.resource_type, r.target
        ));
        for (k, e) in &r.properties {
            let text = match e {
                Expr::Literal(Value::String(s)) => format!("{s:?}"),
                Expr::Literal(Value::Int(i)) => i.to_string(),
                // The one reference: the file's directory.
                Expr::Template(parts) => {
                    let mut s = String::new();
                    for p in parts {
                        match p {
                            stack::Part::Text(t) => s.push_str(t),
                            stack::Part::Ref(r) => {
                                s.push_str(&format!("${{{}.{}}}", r.resource, r.property))
                            }
                            stack::Part::Expr(_) => unreachable!("no expression is left"),
                        }
                    }
                    format!("{s:?}")
                }
                other => panic!("unexpected {other:?}"),
            };
            y.push_str(&format!("      {k}: {text}\n"));
        }
    }
    y
}

/// Evaluates, validates and plans `text` against an empty store.
fn plan_once(text: &str, catalog: &Catalog, hasher: &SecretHasher) -> (Stack, Duration, Duration) {
    let t = Instant::now();
    let s = stack::parse("fleet.yaml", text, "/tmp").unwrap();
    let parsed = t.elapsed();
    let g = stack::validate(&s, catalog).unwrap();
    let p = plan::plan(&s, &g, catalog, &[], Mode::Reconcile, hasher);
    assert_eq!(p.changes.len(), 10_000);
    (s, parsed, t.elapsed())
}

fn main() {
    let quick = std::env::var("ORRERY_BENCH_QUICK").is_ok_and(|v| v == "1")
        || !std::env::args().any(|a| a == "--bench");
    let runs = if quick { 1 } else { 5 };
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../examples/fleet/stack.yaml");
    let generated_text = std::fs::read_to_string(path).unwrap();
    let lines = generated_text.lines().count();
    let catalog = catalog();
    let hasher = SecretHasher::new(vec![7; 32]);
    let (stack, _, _) = plan_once(&generated_text, &catalog, &hasher);
    assert_eq!((stack.targets.len(), stack.resources.len()), (10, 10_000));
    let literal_text = literal(&stack);
    let (again, _, _) = plan_once(&literal_text, &catalog, &hasher);
    // The same resources, but for the lines they are declared on.
    let unplaced = |s: &Stack| {
        let mut rs = s.resources.clone();
        rs.iter_mut().for_each(|r| r.line = None);
        rs
    };
    assert!(unplaced(&again) == unplaced(&stack), "the same resources");
    println!(
        "generated: {lines} lines, {} bytes; literal: {} lines, {} bytes",
        generated_text.len(),
        literal_text.lines().count(),
        literal_text.len()
    );
    println!("| run | generated: evaluate | generated: evaluate+validate+plan | literal: parse | literal: parse+validate+plan | ratio |");
    println!("|---|---|---|---|---|---|");
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    for run in 1..=runs {
        let (_, g_parse, g_total) = plan_once(&generated_text, &catalog, &hasher);
        let (_, l_parse, l_total) = plan_once(&literal_text, &catalog, &hasher);
        println!(
            "| {run} | {:.0} ms | {:.0} ms | {:.0} ms | {:.0} ms | {:.2} |",
            ms(g_parse),
            ms(g_total),
            ms(l_parse),
            ms(l_total),
            ms(g_total) / ms(l_total)
        );
        if !quick {
            assert!(
                g_total < Duration::from_secs(1),
                "target: under 1 s, took {g_total:?}"
            );
        }
    }
}
