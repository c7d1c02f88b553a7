//! A command's dependency graph: its operations in layers (a resource one
//! layer right of everything it depends on), as SVG coloured by state,
//! each node linking to its row on the command page. Edges are the
//! recorded resources' dependencies.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use axum::extract::{Extension, State};
use axum::response::IntoResponse;
use maud::{html, Markup};

use super::layout::{self, Nav};
use super::session::Session;
use super::UiResult;
use crate::http::auth::Principal;
use crate::http::extract::PathParam;
use crate::http::{blocking, Shared};

/// Most nodes drawn; a larger command gets a message instead.
pub const MAX_NODES: usize = 3000;
/// Nodes per column before a layer wraps into another column.
const PER_COLUMN: usize = 40;
const NODE_W: usize = 170;
const NODE_H: usize = 22;
const GAP_X: usize = 40;
const GAP_Y: usize = 6;

/// Where each node goes: its column and row.
pub struct Layout {
    pub position: BTreeMap<String, (usize, usize)>,
    pub columns: usize,
    pub rows: usize,
}

/// Lays `nodes` out in layers by `deps` (edges to nodes outside the set
/// are ignored; a cycle, which a valid stack has not, ends the climb).
pub fn layered(nodes: &[String], deps: &HashMap<String, BTreeSet<String>>) -> Layout {
    let set: BTreeSet<&str> = nodes.iter().map(String::as_str).collect();
    let mut layer: HashMap<&str, usize> = HashMap::new();
    // Longest path from a root, relaxed at most `nodes.len()` rounds.
    for _ in 0..nodes.len().max(1) {
        let mut changed = false;
        for n in nodes {
            let l = deps
                .get(n)
                .into_iter()
                .flatten()
                .filter(|d| set.contains(d.as_str()) && *d != n)
                .map(|d| layer.get(d.as_str()).map_or(1, |l| l + 1))
                .max()
                .unwrap_or(0);
            if layer.get(n.as_str()) != Some(&l) {
                layer.insert(n, l);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    let mut by_layer: BTreeMap<usize, Vec<&str>> = BTreeMap::new();
    for n in nodes {
        by_layer
            .entry(layer.get(n.as_str()).copied().unwrap_or(0))
            .or_default()
            .push(n);
    }
    let (mut position, mut column, mut rows) = (BTreeMap::new(), 0, 0);
    // Each node's place in the drawing order: a layer is sorted by where
    // its dependencies stand (their mean), so that edges cross less.
    let mut placed: HashMap<&str, usize> = HashMap::new();
    for members in by_layer.values_mut() {
        let mean = |n: &str| {
            let at: Vec<usize> = deps
                .get(n)
                .into_iter()
                .flatten()
                .filter_map(|d| placed.get(d.as_str()).copied())
                .collect();
            (!at.is_empty()).then(|| at.iter().sum::<usize>() as f64 / at.len() as f64)
        };
        let mut keyed: Vec<(Option<f64>, &str)> = members.iter().map(|n| (mean(n), *n)).collect();
        keyed.sort_by(|a, b| a.0.partial_cmp(&b.0).unwrap_or(std::cmp::Ordering::Equal));
        *members = keyed.into_iter().map(|(_, n)| n).collect();
        for chunk in members.chunks(PER_COLUMN) {
            for (row, n) in chunk.iter().enumerate() {
                placed.insert(n, placed.len());
                position.insert((*n).to_owned(), (column, row));
            }
            rows = rows.max(chunk.len());
            column += 1;
        }
    }
    Layout {
        position,
        columns: column,
        rows,
    }
}

/// `GET /ui/commands/{id}/graph`.
pub async fn page(
    State(shared): State<Arc<Shared>>,
    Extension(session): Extension<Session>,
    principal: Principal,
    PathParam(id): PathParam,
) -> UiResult {
    let record = super::command::whole(&shared, &principal, &id).await?;
    let stack = record["stack"].as_str().unwrap_or_default().to_owned();
    let ops = record["operations"].as_array().cloned().unwrap_or_default();
    let states: BTreeMap<String, String> = ops
        .iter()
        .map(|o| {
            (
                o["label"].as_str().unwrap_or_default().to_owned(),
                o["status"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    let body = if states.len() > MAX_NODES {
        html! {
            h1 { "Dependency graph" }
            p role="status" {
                "This command has " (states.len()) " operations; the graph is drawn up to "
                (MAX_NODES) ". Use the filter on the " a href={ "/ui/commands/" (id) } { "command page" } "."
            }
        }
    } else {
        let store = shared.store.clone();
        let deps: HashMap<String, BTreeSet<String>> = blocking(move || {
            Ok(store
                .resources(Some(&stack))?
                .into_iter()
                .map(|r| (r.label, r.deps.into_iter().collect()))
                .collect())
        })
        .await?;
        let nodes: Vec<String> = states.keys().cloned().collect();
        let layout = layered(&nodes, &deps);
        html! {
            h1 { "Dependency graph" }
            p { a href={ "/ui/commands/" (id) } { "Back to the command" } " · " (nodes.len()) " operations, in "
                (layout.columns) " columns; a resource stands right of what it depends on." }
            div.graph { (svg(&id, &layout, &states, &deps)) }
        }
    };
    Ok(layout::page("Dependency graph", Nav::Commands, &session, body).into_response())
}

fn svg(
    id: &str,
    layout: &Layout,
    states: &BTreeMap<String, String>,
    deps: &HashMap<String, BTreeSet<String>>,
) -> Markup {
    let x = |c: usize| c * (NODE_W + GAP_X) + 4;
    let y = |r: usize| r * (NODE_H + GAP_Y) + 4;
    let width = x(layout.columns.max(1));
    let height = y(layout.rows.max(1));
    let mut edges = Vec::new();
    for (label, (c, r)) in &layout.position {
        for d in deps.get(label).into_iter().flatten() {
            if let Some((dc, dr)) = layout.position.get(d) {
                edges.push((
                    x(*dc) + NODE_W,
                    y(*dr) + NODE_H / 2,
                    x(*c),
                    y(*r) + NODE_H / 2,
                ));
            }
        }
    }
    html! {
        svg xmlns="http://www.w3.org/2000/svg" width=(width) height=(height)
            viewBox={ "0 0 " (width) " " (height) } role="img" aria-label="Dependency graph of the operations" {
            @for (x1, y1, x2, y2) in &edges {
                line.edge x1=(x1) y1=(y1) x2=(x2) y2=(y2) {}
            }
            @for (label, (c, r)) in &layout.position {
                @let status = states.get(label).map(String::as_str).unwrap_or_default();
                a href={ "/ui/commands/" (id) "#op-" (label) } {
                    title { (label) ": " (status) }
                    rect class={ "node " (layout::status_class(status)) } x=(x(*c)) y=(y(*r))
                        width=(NODE_W) height=(NODE_H) rx="4" {}
                    text x=(x(*c) + 6) y=(y(*r) + 15) { (label.chars().take(22).collect::<String>()) }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_resource_stands_right_of_its_dependencies() {
        let nodes: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let deps = HashMap::from([
            ("b".to_owned(), BTreeSet::from(["a".to_owned()])),
            (
                "c".to_owned(),
                BTreeSet::from(["b".to_owned(), "outside".to_owned()]),
            ),
            ("d".to_owned(), BTreeSet::from(["a".to_owned()])),
        ]);
        let l = layered(&nodes, &deps);
        assert_eq!(l.position["a"].0, 0);
        assert_eq!(l.position["b"].0, 1);
        assert_eq!(l.position["d"].0, 1);
        assert_eq!(l.position["c"].0, 2);
        assert_eq!(l.columns, 3);
        let many: Vec<String> = (0..PER_COLUMN + 1).map(|i| format!("n{i}")).collect();
        let l = layered(&many, &HashMap::new());
        assert_eq!((l.columns, l.rows), (2, PER_COLUMN));
    }
}
