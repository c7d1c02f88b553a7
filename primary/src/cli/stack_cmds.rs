//! `orrery apply`, `plan` and `destroy`.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use orrery_primary::apply::{Event, Executor, Options, Report, Resumed};
use orrery_primary::engine::{plugin_search_path, Plugins};
use orrery_primary::lease::{self, Claim, Keeper, LeaseConfig};
use orrery_primary::nats::NatsAuth;
use orrery_primary::plan::{self, Action, Mode, Plan, SecretHasher};
use orrery_primary::scheduler::BucketLimit;
use orrery_primary::stack::{self, Graph, Stack};
use orrery_primary::state::{self, CommandDocument, Store};
use tokio::sync::mpsc;

use super::Output;

/// Options shared by commands that work on a stack.
#[derive(clap::Args, Debug, Clone)]
pub struct Common {
    /// Directory of the embedded state store.
    #[arg(long, env = "ORRERY_DATA_DIR", default_value = ".orrery")]
    pub data_dir: PathBuf,
    /// Directory holding plugin binaries `orrery-plugin-<name>` (also searched:
    /// $ORRERY_PLUGIN_DIR, the directory of `orrery`, PATH).
    #[arg(long)]
    pub plugin_dir: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// PostgreSQL URL of the state store (`postgres://…`); without it the
    /// embedded store in --data-dir is used.
    #[arg(long, env = "ORRERY_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Reach plugins through satellites on this NATS server instead of
    /// running them in-process (distributed mode).
    #[arg(long, env = "ORRERY_NATS_URL")]
    pub nats_url: Option<String>,
    #[command(flatten)]
    pub nats_auth: NatsAuth,
}

#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// The stack document (YAML or JSON).
    pub file: PathBuf,
    /// Apply without asking for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Show the plan and stop (same as `orrery plan`).
    #[arg(long)]
    pub dry_run: bool,
    /// `reconcile` deletes resources of the stack the document no longer
    /// declares; `patch` never deletes.
    #[arg(long, value_enum, default_value_t = ModeArg::Reconcile)]
    pub mode: ModeArg,
    /// Most operations in flight at once.
    #[arg(long, default_value_t = 64)]
    pub concurrency: usize,
    /// Override a plugin's announced rate limit: `NAMESPACE/TARGET=RATE[:BURST]`
    /// in requests per second, e.g. `Local/home=50:10`. Repeatable.
    #[arg(long = "rate-limit", value_parser = parse_rate_limit)]
    pub rate_limits: Vec<(String, BucketLimit)>,
    #[command(flatten)]
    pub common: Common,
}

/// Parses `NAMESPACE/TARGET=RATE[:BURST]` (the `--rate-limit` option).
pub(super) fn parse_rate_limit(s: &str) -> Result<(String, BucketLimit), String> {
    let (bucket, limit) = s
        .split_once('=')
        .ok_or("expected NAMESPACE/TARGET=RATE[:BURST]")?;
    let (rate, burst) = match limit.split_once(':') {
        Some((r, b)) => (r, b.parse::<u32>().map_err(|e| format!("burst: {e}"))?),
        None => (limit, 1),
    };
    let rate: f64 = rate.parse().map_err(|e| format!("rate: {e}"))?;
    if !rate.is_finite() || rate < 0.0 {
        return Err("rate must be a non-negative number".into());
    }
    Ok((
        bucket.to_owned(),
        BucketLimit {
            rate_per_sec: rate,
            burst: burst.max(1),
        },
    ))
}

#[derive(clap::Args, Debug)]
pub struct PlanArgs {
    /// The stack document (YAML or JSON).
    pub file: PathBuf,
    /// See `apply --mode`.
    #[arg(long, value_enum, default_value_t = ModeArg::Reconcile)]
    pub mode: ModeArg,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::Args, Debug)]
pub struct DestroyArgs {
    /// The stack document whose stack to destroy.
    #[arg(required_unless_present = "stack")]
    pub file: Option<PathBuf>,
    /// The stack's name, instead of a document.
    #[arg(long)]
    pub stack: Option<String>,
    /// Destroy without asking for confirmation.
    #[arg(long, short = 'y')]
    pub yes: bool,
    #[command(flatten)]
    pub common: Common,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub enum ModeArg {
    Reconcile,
    Patch,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Mode {
        match m {
            ModeArg::Reconcile => Mode::Reconcile,
            ModeArg::Patch => Mode::Patch,
        }
    }
}

impl Common {
    /// The state store these options name.
    pub fn open_store(&self) -> anyhow::Result<Store> {
        Ok(match &self.database_url {
            Some(url) => state::open(url)?,
            None => state::open_dir(&self.data_dir)?,
        })
    }
}

/// A loaded, validated stack with its plugins running.
struct Loaded {
    stack: Stack,
    graph: Graph,
    embedded: Plugins,
    store: Store,
}

/// Reads and parses a stack document; `${stack_dir}` is its directory.
pub(super) fn read_stack(file: &Path) -> anyhow::Result<Stack> {
    let doc = read_document(file, Mode::Reconcile, "embedded")?;
    Ok(stack::parse(&doc.source, &doc.text, &doc.stack_dir)?)
}

/// A stack document as an apply records it (so that a restarted primary
/// can resume the apply without the file): its text, name, directory (the
/// value of `${stack_dir}`), the mode and where plugins run.
fn read_document(file: &Path, mode: Mode, engine: &str) -> anyhow::Result<CommandDocument> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let dir = std::fs::canonicalize(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(CommandDocument {
        engine: engine.to_owned(),
        mode: match mode {
            Mode::Patch => "patch",
            _ => "reconcile",
        }
        .to_owned(),
        source: file.display().to_string(),
        stack_dir: dir.display().to_string(),
        text,
    })
}

async fn load(file: &Path, common: &Common) -> anyhow::Result<Loaded> {
    let stack = read_stack(file)?;
    let plugins: BTreeSet<String> = stack.targets.iter().map(|t| t.plugin.clone()).collect();
    let embedded = Plugins::start(
        &plugins.into_iter().collect::<Vec<_>>(),
        &plugin_search_path(common.plugin_dir.as_deref()),
        common.nats_url.as_deref(),
        &common.nats_auth,
    )
    .await?;
    let graph = match stack::validate(&stack, embedded.catalog()) {
        Ok(graph) => graph,
        Err(errors) => {
            embedded.stop().await;
            let lines: Vec<String> = errors.iter().map(ToString::to_string).collect();
            bail!(
                "the stack is invalid; nothing was changed:\n  {}",
                lines.join("\n  ")
            );
        }
    };
    let store = common.open_store()?;
    Ok(Loaded {
        stack,
        graph,
        embedded,
        store,
    })
}

fn print_plan(plan: &Plan, output: Output) {
    if output == Output::Json {
        let changes: Vec<serde_json::Value> = plan
            .changes
            .iter()
            .map(|c| {
                serde_json::json!({"label": c.label, "type": c.resource_type, "target": c.target,
                    "action": c.action.name(), "fields": c.fields})
            })
            .collect();
        let [create, update, replace, delete, noop] = plan.counts();
        println!(
            "{}",
            serde_json::json!({"changes": changes, "summary": {"create": create, "update": update,
                "replace": replace, "delete": delete, "no_op": noop}})
        );
        return;
    }
    for c in &plan.changes {
        let sign = match c.action {
            Action::Create => "+",
            Action::Update => "~",
            Action::Replace { .. } => "-/+",
            Action::Delete => "-",
            Action::NoOp => continue,
        };
        let fields = if c.fields.is_empty() {
            String::new()
        } else {
            format!(" ({})", c.fields.join(", "))
        };
        println!(
            "  {sign:>3} {} {} [{}]{fields}",
            c.action.name(),
            c.label,
            c.resource_type
        );
    }
    let [create, update, replace, delete, noop] = plan.counts();
    if plan.has_changes() {
        println!("Plan: {create} to create, {update} to update, {replace} to replace, {delete} to delete, {noop} unchanged.");
    } else {
        println!("No changes: {noop} resources up to date.");
    }
}

fn confirm(question: &str) -> anyhow::Result<bool> {
    if !std::io::stdin().is_terminal() {
        bail!("refusing to change resources without confirmation: stdin is not a terminal (pass --yes)");
    }
    print!("{question} [y/N] ");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

pub async fn plan_cmd(args: PlanArgs) -> anyhow::Result<ExitCode> {
    let loaded = load(&args.file, &args.common).await?;
    let stored = loaded.store.resources(Some(&loaded.stack.name))?;
    let hasher = SecretHasher::new(loaded.store.secret_key()?);
    let plan = plan::plan(
        &loaded.stack,
        &loaded.graph,
        loaded.embedded.catalog(),
        &stored,
        args.mode.into(),
        &hasher,
    );
    print_plan(&plan, args.common.output);
    loaded.embedded.stop().await;
    Ok(if plan.has_changes() {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

pub async fn apply_cmd(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let loaded = load(&args.file, &args.common).await?;
    let options = Options {
        max_concurrency: args.concurrency,
        rate_overrides: args.rate_limits.iter().cloned().collect(),
        ..Options::default()
    };
    let hasher = SecretHasher::new(loaded.store.secret_key()?);
    // The stack's command: the one a primary did not finish (its lease
    // taken; refused while another primary runs it), or a new one.
    let claimed = if args.dry_run {
        None
    } else {
        match claim(&loaded.store, &loaded.stack.name) {
            Ok(claimed) => Some(claimed),
            Err(e) => {
                loaded.embedded.stop().await;
                return Err(e);
            }
        }
    };
    // An apply the primary did not finish: settle what it left ambiguous,
    // then go on with it (under its id) from a fresh plan.
    let resumed = match &claimed {
        Some((Claim::Interrupted(_), _)) => {
            let resumed = Executor::new(
                loaded.embedded.transport(),
                loaded.store.clone(),
                loaded.embedded.catalog().clone(),
                hasher.clone(),
                options.clone(),
            )
            .resume(&loaded.stack, &loaded.graph)
            .await;
            if resumed.is_err() {
                loaded.embedded.stop().await;
            }
            resumed?
        }
        _ => None,
    };
    print_resumed(resumed.as_ref(), args.common.output);
    let stored = loaded.store.resources(Some(&loaded.stack.name))?;
    let plan = plan::plan(
        &loaded.stack,
        &loaded.graph,
        loaded.embedded.catalog(),
        &stored,
        args.mode.into(),
        &hasher,
    );
    print_plan(&plan, args.common.output);
    // A resumed command is finished even when nothing is left to change.
    let Some((claim, keeper)) = claimed.filter(|_| plan.has_changes() || resumed.is_some()) else {
        loaded.embedded.stop().await;
        return Ok(ExitCode::SUCCESS);
    };
    if plan.has_changes() && !args.yes && !confirm("Apply these changes?")? {
        loaded.embedded.stop().await;
        println!("Nothing changed.");
        return Ok(ExitCode::SUCCESS);
    }
    let engine = if args.common.nats_url.is_some() {
        "nats"
    } else {
        "embedded"
    };
    // Recorded so that another primary can resume the apply, unless it
    // holds secrets (never stored in clear).
    if !plan::declares_secrets(&loaded.stack, loaded.embedded.catalog()) {
        let document = read_document(&args.file, args.mode.into(), engine)?;
        loaded
            .store
            .put_command_document(claim.command_id(), &document)?;
    }
    let report = execute(
        &loaded,
        &plan,
        &stored,
        hasher,
        options,
        ("apply", &keeper),
        args.common.output,
    )
    .await;
    keeper.release();
    loaded.embedded.stop().await;
    finish(report?, args.common.output)
}

/// Takes the command a run on `stack` goes on with (see `lease::claim`)
/// and keeps its lease.
fn claim(store: &Store, stack: &str) -> anyhow::Result<(Claim, Keeper)> {
    let config = LeaseConfig::new(lease::DEFAULT_TTL);
    let new_id = uuid::Uuid::now_v7().to_string();
    let claim = lease::claim(store.as_ref(), stack, &new_id, &config)?;
    let keeper = Keeper::start(store.clone(), claim.command_id(), &config);
    Ok((claim, keeper))
}

fn print_resumed(resumed: Option<&Resumed>, output: Output) {
    if let (Some(r), Output::Text) = (resumed, output) {
        println!(
            "Resuming interrupted command {}: {} operation(s) settled, {} found and adopted, {} to create again.",
            r.command_id,
            r.resolved,
            r.adopted.len(),
            r.not_found.len()
        );
    }
}

pub async fn destroy_cmd(args: DestroyArgs) -> anyhow::Result<ExitCode> {
    let (name, file) = match (&args.stack, &args.file) {
        (Some(name), _) => (name.clone(), None),
        (None, Some(file)) => (read_stack(file)?.name, Some(file.clone())),
        (None, None) => bail!("name a stack document or --stack"),
    };
    let store = args.common.open_store()?;
    // The stack's interrupted command, if any, goes on (as with apply).
    let (claim, keeper) = claim(&store, &name)?;
    let interrupted = matches!(claim, Claim::Interrupted(_));
    let stored = store.resources(Some(&name))?;
    let plan = plan::plan_destroy(&stored);
    if !interrupted {
        print_plan(&plan, args.common.output);
        if !plan.has_changes() {
            return Ok(ExitCode::SUCCESS);
        }
    }
    if plan.has_changes()
        && !args.yes
        && !confirm(&format!("Destroy every resource of stack `{name}`?"))?
    {
        println!("Nothing changed.");
        return Ok(ExitCode::SUCCESS);
    }
    let plugins: BTreeSet<String> = stored.iter().map(|s| s.plugin.clone()).collect();
    let embedded = Plugins::start(
        &plugins.into_iter().collect::<Vec<_>>(),
        &plugin_search_path(args.common.plugin_dir.as_deref()),
        args.common.nats_url.as_deref(),
        &args.common.nats_auth,
    )
    .await?;
    // Targets' configs come from the document when given (deletes need them).
    let stack = match &file {
        Some(f) => read_stack(f)?,
        None => Stack {
            name: name.clone(),
            source: String::new(),
            targets: store.targets(&name)?,
            resources: Vec::new(),
        },
    };
    let loaded = Loaded {
        graph: Graph::default(),
        stack,
        embedded,
        store,
    };
    let hasher = SecretHasher::new(loaded.store.secret_key()?);
    let (plan, stored) = if interrupted {
        let resumed = Executor::new(
            loaded.embedded.transport(),
            loaded.store.clone(),
            loaded.embedded.catalog().clone(),
            hasher.clone(),
            Options::default(),
        )
        .resume(
            &Stack {
                resources: Vec::new(),
                ..loaded.stack.clone()
            },
            &loaded.graph,
        )
        .await;
        if resumed.is_err() {
            loaded.embedded.stop().await;
        }
        print_resumed(resumed?.as_ref(), args.common.output);
        let stored = loaded.store.resources(Some(&name))?;
        let plan = plan::plan_destroy(&stored);
        print_plan(&plan, args.common.output);
        (plan, stored)
    } else {
        (plan, stored)
    };
    let report = execute(
        &loaded,
        &plan,
        &stored,
        hasher,
        Options::default(),
        ("destroy", &keeper),
        args.common.output,
    )
    .await;
    keeper.release();
    loaded.embedded.stop().await;
    finish(report?, args.common.output)
}

async fn execute(
    loaded: &Loaded,
    plan: &Plan,
    stored: &[orrery_primary::state::StoredResource],
    hasher: SecretHasher,
    options: Options,
    (kind, keeper): (&str, &Keeper),
    output: Output,
) -> anyhow::Result<Report> {
    let (tx, mut rx) = mpsc::unbounded_channel::<Event>();
    let total = plan
        .changes
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .count() as u64;
    let bar = if output == Output::Text {
        indicatif::ProgressBar::new(total)
    } else {
        indicatif::ProgressBar::hidden()
    };
    let printer = {
        let bar = bar.clone();
        tokio::spawn(async move {
            while let Some(e) = rx.recv().await {
                if output == Output::Text {
                    let detail = if e.detail.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", e.detail)
                    };
                    let line = format!("  {} {}: {}{detail}", e.operation, e.label, e.status);
                    if bar.is_hidden() {
                        println!("{line}");
                    } else {
                        bar.println(line);
                    }
                }
                if matches!(
                    e.status,
                    "succeeded" | "failed" | "dependency_failed" | "canceled"
                ) {
                    bar.inc(1);
                }
            }
        })
    };
    // Ctrl-C cancels: nothing new starts, in-flight operations finish.
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("canceling: no new operations start; in-flight ones finish");
            let _ = cancel_tx.send(true);
        }
    });
    let executor = Executor::new(
        loaded.embedded.transport(),
        loaded.store.clone(),
        loaded.embedded.catalog().clone(),
        hasher,
        options,
    )
    .with_events(tx)
    .with_cancel(lease::cancel_on_loss(cancel_rx, keeper.lost()));
    let graph = Some((&loaded.stack, &loaded.graph));
    let report = executor
        .run(
            keeper.command_id(),
            kind,
            &loaded.stack.name,
            graph,
            plan,
            stored,
        )
        .await?;
    drop(executor);
    ctrl_c.abort();
    let _ = printer.await;
    bar.finish_and_clear();
    Ok(report)
}

fn finish(report: Report, output: Output) -> anyhow::Result<ExitCode> {
    if output == Output::Json {
        println!("{}", serde_json::to_string(&report)?);
    } else {
        println!(
            "{} in {:.1}s: {} succeeded, {} failed, {} not attempted (dependency failed), {} canceled, {} retries. Command {}.",
            if report.ok() { "Done" } else { "Finished with failures" },
            report.elapsed_ms as f64 / 1000.0,
            report.succeeded,
            report.failed.len(),
            report.dependency_failed.len(),
            report.canceled.len(),
            report.retries,
            report.command_id
        );
        for (label, op, code, message) in &report.failed {
            println!("  failed: {op} {label}: {code}: {message}");
        }
    }
    Ok(if report.ok() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
