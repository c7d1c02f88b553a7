//! `orrery discover`, `orrery drift` and `orrery import`.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use orrery_primary::discovery::{self, ImportSpec, Options, TargetRef};
use orrery_primary::scheduler::BucketLimit;

use super::duration::parse_duration;
use super::stack_cmds::{parse_rate_limit, read_stack, Common};
use super::vars::VarArgs;

#[derive(clap::Args, Debug)]
pub struct DiscoverArgs {
    /// Discover the targets of this stack document.
    pub file: Option<PathBuf>,
    /// Discover the recorded targets of this stack (all stacks' targets
    /// when neither a document nor --stack is given).
    #[arg(long, conflicts_with = "file")]
    pub stack: Option<String>,
    /// Resources asked per `list` page; 0 lets the plugin choose.
    #[arg(long, default_value_t = 0)]
    pub page_size: u32,
    /// Override a plugin's announced rate limit: `NAMESPACE/TARGET=RATE[:BURST]`.
    #[arg(long = "rate-limit", value_parser = parse_rate_limit)]
    pub rate_limits: Vec<(String, BucketLimit)>,
    /// How long one request to a plugin may take (`30s`, `2m`); a request
    /// that does not finish in time is retried as the retry policy says,
    /// so a run ends within about five times this per page or read.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
pub struct DriftArgs {
    /// Check the stack of this document.
    pub file: Option<PathBuf>,
    /// Check this stack (every stack when neither is given).
    #[arg(long, conflicts_with = "file")]
    pub stack: Option<String>,
    /// Most reads in flight at once.
    #[arg(long, default_value_t = 16)]
    pub concurrency: usize,
    /// Override a plugin's announced rate limit: `NAMESPACE/TARGET=RATE[:BURST]`.
    #[arg(long = "rate-limit", value_parser = parse_rate_limit)]
    pub rate_limits: Vec<(String, BucketLimit)>,
    /// How long one request to a plugin may take (`30s`, `2m`); a request
    /// that does not finish in time is retried as the retry policy says,
    /// so a run ends within about five times this per page or read.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// The stack document (its name and targets); without it, --stack and
    /// the stack's recorded targets.
    pub file: Option<PathBuf>,
    /// The stack adopting the resource.
    #[arg(long, required_unless_present = "file")]
    pub stack: Option<String>,
    /// Its label in the stack.
    #[arg(long)]
    pub label: String,
    /// Its resource type, e.g. `Local::Fs::File`.
    #[arg(long = "type")]
    pub resource_type: String,
    /// The stack's target it lives on.
    #[arg(long)]
    pub target: String,
    /// The plugin's identifier of it (see `orrery inventory --unmanaged`).
    #[arg(long)]
    pub native_id: String,
    /// How long one request to a plugin may take (`30s`, `2m`); a request
    /// that does not finish in time is retried as the retry policy says,
    /// so a run ends within about five times this per page or read.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub timeout: Duration,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub common: Common,
}

pub async fn discover_cmd(args: DiscoverArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let document = args
        .file
        .as_deref()
        .map(|f| read_stack(f, &args.vars))
        .transpose()?;
    let targets: Vec<TargetRef> = discovery::targets_to_discover(
        store.as_ref(),
        args.stack.as_deref(),
        document
            .as_ref()
            .map(|s| (s.name.as_str(), s.targets.as_slice())),
    )?;
    if targets.is_empty() {
        bail!("no target to discover: name a stack document, or apply a stack first");
    }
    let plugins = args
        .common
        .start_plugins(
            targets
                .iter()
                .map(|t| (t.decl.plugin.clone(), t.decl.name.clone())),
        )
        .await?;
    let options = Options {
        page_size: args.page_size,
        rate_overrides: args.rate_limits.iter().cloned().collect::<HashMap<_, _>>(),
        timeout: args.timeout,
        ..Options::default()
    };
    let report = discovery::discover(
        plugins.transport().as_ref(),
        plugins.catalog(),
        plugins.rates(),
        store.as_ref(),
        &targets,
        &options,
    )
    .await;
    plugins.stop().await;
    let report = report?;
    let names: BTreeSet<&str> = targets.iter().map(|t| t.decl.name.as_str()).collect();
    let unmanaged: Vec<_> = store
        .resources(Some(discovery::UNMANAGED_STACK))?
        .into_iter()
        .filter(|r| !r.managed && names.contains(r.target.as_str()))
        .collect();
    if args.common.output.is_json() {
        let rows: Vec<serde_json::Value> = unmanaged
            .iter()
            .map(|r| {
                serde_json::json!({"target": r.target, "type": r.resource_type,
                    "native_id": r.native_id, "plugin": r.plugin})
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({"report": report, "unmanaged": rows})
        );
    } else {
        for r in &unmanaged {
            println!(
                "  unmanaged {:<12} {:<24} {}",
                r.target, r.resource_type, r.native_id
            );
        }
        println!(
            "Discovered {} targets in {:.1}s: {} pages, {} listed, {} managed, {} unmanaged, {} excluded by filters; {} records written, {} forgotten.",
            report.targets,
            report.elapsed_ms as f64 / 1000.0,
            report.pages,
            report.listed,
            report.managed,
            report.unmanaged,
            report.excluded,
            report.written,
            report.forgotten
        );
        for f in &report.failures {
            println!(
                "  failed: list {} on {}: {}: {}",
                f.resource_type, f.target, f.code, f.message
            );
        }
    }
    Ok(if report.failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Exit 0 when nothing drifted, 2 when something did, 1 when a read failed.
pub async fn drift_cmd(args: DriftArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let stack = match (&args.file, &args.stack) {
        (Some(file), _) => Some(read_stack(file, &args.vars)?.name),
        (None, stack) => stack.clone(),
    };
    let plugins: BTreeSet<(String, String)> = store
        .resources(stack.as_deref())?
        .into_iter()
        .filter(|r| !r.stack.is_empty())
        .map(|r| (r.plugin, r.target))
        .collect();
    let plugins = args.common.start_plugins(plugins).await?;
    let options = Options {
        max_in_flight: args.concurrency,
        rate_overrides: args.rate_limits.iter().cloned().collect::<HashMap<_, _>>(),
        timeout: args.timeout,
        ..Options::default()
    };
    let report = discovery::sync_drift(
        plugins.transport().as_ref(),
        plugins.catalog(),
        plugins.rates(),
        store.as_ref(),
        stack.as_deref(),
        &options,
    )
    .await;
    plugins.stop().await;
    let report = report?;
    if args.common.output.is_json() {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        print_drift_text(&serde_json::to_value(&report)?, None);
    }
    Ok(if !report.failures.is_empty() {
        ExitCode::from(1)
    } else if report.has_drift() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// A drift report (`DriftReport` as JSON: what `orrery drift --output
/// json` prints, and a plan's `refresh`) for people: a line per drifted
/// resource and per failed read, then the count. With the `plan` made
/// after it, each line says which fields the next apply restores: a field
/// the document does not set is not restored (docs/stacks.md, "Drift").
pub(super) fn print_drift_text(report: &serde_json::Value, plan: Option<&serde_json::Value>) {
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    let list = |k: &str| report[k].as_array().cloned().unwrap_or_default();
    let drifted = list("drifted");
    for d in &drifted {
        let what = match d["drift"].as_str() {
            Some("deleted") => "deleted out of band; the next apply recreates it".to_owned(),
            _ => {
                let fields: Vec<String> = d["fields"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(text)
                    .collect();
                changed_line(
                    &fields,
                    plan.map(|p| restored_fields(p, &text(&d["label"]))),
                )
            }
        };
        let seen = if d["new"] == false {
            " [found earlier]"
        } else {
            ""
        };
        println!(
            "  drift {}/{} [{}] {}: {what}{seen}",
            text(&d["stack"]),
            text(&d["label"]),
            text(&d["resource_type"]),
            text(&d["native_id"])
        );
    }
    for f in list("failures") {
        println!(
            "  failed: read {}/{}: {}: {}",
            text(&f["stack"]),
            text(&f["label"]),
            text(&f["code"]),
            text(&f["message"])
        );
    }
    let checked = report["checked"].as_u64().unwrap_or(0) as usize;
    if !drifted.is_empty() {
        // Tombstones found earlier were not read again, but are resources.
        let tombstones = drifted
            .iter()
            .filter(|d| d["drift"] == "deleted" && d["new"] == false)
            .count();
        println!(
            "Drift: {} of {} resources differ from their records.",
            drifted.len(),
            checked + tombstones
        );
    } else {
        println!("No drift: {checked} resources as recorded.");
    }
}

/// The fields the plan changes on resource `label`: `None` when it writes
/// every field (a replace), none when the plan leaves it alone.
fn restored_fields(plan: &serde_json::Value, label: &str) -> Option<Vec<String>> {
    let change = plan["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["label"] == label);
    let Some(change) = change else {
        return Some(Vec::new());
    };
    match change["action"].as_str() {
        Some("update") => {}
        Some("replace" | "create") => return None,
        _ => return Some(Vec::new()),
    }
    Some(
        change["diffs"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|d| d["field"].as_str().map(str::to_owned))
            .collect(),
    )
}

/// What a changed resource's drift line says: which fields changed, and
/// what the next apply does about them (`restored`: `None` without a
/// plan; else what [`restored_fields`] says).
fn changed_line(fields: &[String], restored: Option<Option<Vec<String>>>) -> String {
    let all = fields.join(", ");
    let Some(restored) = restored else {
        return format!("changed out of band ({all}); an apply restores what its document sets");
    };
    let Some(restored) = restored else {
        // Replaced: every field is written again.
        return format!("changed out of band ({all}); the next apply restores it");
    };
    let (kept, left): (Vec<&String>, Vec<&String>) =
        fields.iter().partition(|f| restored.contains(f));
    let names = |v: &[&String]| v.iter().map(|f| f.as_str()).collect::<Vec<_>>().join(", ");
    match (kept.is_empty(), left.is_empty()) {
        (_, true) => format!("changed out of band ({all}); the next apply restores it"),
        (true, false) => format!(
            "changed out of band ({all}); the document does not set it: not restored"
        ),
        (false, false) => format!(
            "changed out of band ({all}); the next apply restores {}; the document does not set {}: not restored",
            names(&kept),
            names(&left)
        ),
    }
}

pub async fn import_cmd(args: ImportArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let (stack, targets) = match &args.file {
        Some(file) => {
            let doc = read_stack(file, &args.vars)?;
            if args.stack.as_ref().is_some_and(|s| *s != doc.name) {
                bail!(
                    "--stack `{}` differs from the document's stack `{}`",
                    args.stack.unwrap_or_default(),
                    doc.name
                );
            }
            (doc.name, doc.targets)
        }
        None => {
            let name = args.stack.clone().unwrap_or_default();
            let targets = store.targets(&name)?;
            (name, targets)
        }
    };
    let Some(target) = targets.iter().find(|t| t.name == args.target).cloned() else {
        bail!(
            "stack `{stack}` has no target `{}`{}",
            args.target,
            if args.file.is_none() {
                " recorded (pass the stack document)"
            } else {
                ""
            }
        );
    };
    let plugins = args
        .common
        .start_plugins([(target.plugin.clone(), target.name.clone())])
        .await?;
    let spec = ImportSpec {
        stack: stack.clone(),
        label: args.label.clone(),
        resource_type: args.resource_type.clone(),
        target,
        native_id: args.native_id.clone(),
    };
    let options = Options {
        timeout: args.timeout,
        ..Options::default()
    };
    let result = discovery::import(
        plugins.transport().as_ref(),
        plugins.catalog(),
        plugins.rates(),
        store.as_ref(),
        &spec,
        &options,
    )
    .await;
    let storable = orrery_core::plan::storable_targets(&targets, plugins.catalog());
    plugins.stop().await;
    let record = result?;
    if args.file.is_some() {
        // Later commands without the document need the targets.
        if store.targets(&stack)?.is_empty() {
            store.put_targets(&stack, &storable)?;
        }
    }
    if args.common.output.is_json() {
        println!(
            "{}",
            serde_json::json!({"stack": record.stack, "label": record.label,
                "type": record.resource_type, "target": record.target,
                "native_id": record.native_id,
                "properties": serde_json::to_value(&record.properties).unwrap_or_default()})
        );
    } else {
        println!(
            "Imported {} `{}` into stack `{}` as `{}`; declare it with the same properties and the next apply leaves it as it is.",
            record.resource_type, record.native_id, record.stack, record.label
        );
    }
    Ok(ExitCode::SUCCESS)
}
