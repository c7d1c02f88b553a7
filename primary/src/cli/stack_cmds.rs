//! `orrery apply`, `plan` and `destroy`.

use std::collections::BTreeSet;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{bail, Context};
use orrery_bus::held_targets::{HeldTargets, RefPolicy};
use orrery_bus::transport::Transport;
use orrery_core::events::{CommandEvent, EventBody, FinishedEvent, OpEvent};
use orrery_primary::apply::{EventSink, Options, Report, Resumed, Stop};
use orrery_primary::lease::{self, LeaseConfig};
use orrery_primary::nats::NatsAuth;
use orrery_primary::plan::{Action, Mode};
use orrery_primary::scheduler::BucketLimit;
use orrery_primary::service::view::{self, mode_name, FieldDiffView, PlanView, ReportView};
use orrery_primary::service::{
    plugin_search_path, Command, Engine, Needs, Planned, PluginPool, Plugins, Service,
    ServiceConfig, ServiceError,
};
use orrery_primary::stack::{Catalog, Stack};
use orrery_primary::state::{self, CommandDocument, Store};

use super::remote::RemoteArgs;
use super::saved_plan::{SavedPlan, SavedPlanError};
use super::vars::VarArgs;
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
    /// Pass this variable of the environment on to the plugins (which start
    /// with a cleared environment but for PATH, HOME, USER, LANG, LC_*, TZ,
    /// TMPDIR, RUST_LOG, OTEL_* and ORRERY_PLUGIN_*); repeat for several.
    #[arg(
        long = "plugin-env",
        value_name = "NAME",
        env = "ORRERY_PLUGIN_ENV",
        value_delimiter = ','
    )]
    pub plugin_env: Vec<String>,
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
    #[command(flatten)]
    pub hub: super::hub::HubTrustArgs,
    /// Print every operation's transitions (by default: a progress bar on
    /// a terminal, else a summary line every few seconds, and failures).
    #[arg(long)]
    pub verbose: bool,
}

/// A targeted run.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SelectArgs {
    /// Only this resource and what it depends on (for a destroy: and what
    /// depends on it). Repeatable.
    #[arg(long = "target", value_name = "LABEL")]
    pub target: Vec<String>,
    /// Leave out this resource and what depends on it (for a destroy: and
    /// what it depends on). Repeatable.
    #[arg(long = "exclude", value_name = "LABEL")]
    pub exclude: Vec<String>,
    /// Replace this resource even if nothing about it changed. Repeatable.
    #[arg(long = "replace", value_name = "LABEL")]
    pub replace: Vec<String>,
}

impl SelectArgs {
    /// The selection, as the service takes it.
    pub fn selection(&self) -> orrery_core::select::Selection {
        orrery_core::select::Selection {
            target: self.target.clone(),
            exclude: self.exclude.clone(),
            replace: self.replace.clone(),
        }
    }

    /// The selection's fields of an API request body.
    pub(super) fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "target": self.target,
            "exclude": self.exclude,
            "replace": self.replace,
        })
    }
}

#[derive(clap::Args, Debug)]
pub struct ApplyArgs {
    /// The stack document (YAML or JSON), or a plan `orrery plan --out`
    /// saved: that plan runs, without a question, only if planning again
    /// gives it exactly.
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
    /// Delete or replace resources marked `protect: true` when the plan
    /// says so (refused otherwise).
    #[arg(long)]
    pub allow_protected: bool,
    /// Read every managed resource of the stack before planning and record
    /// what drifted out of band (as `orrery drift` does): the plan shows the
    /// drift and restores it. A read that fails stops the command (exit 1).
    #[arg(long)]
    pub refresh: bool,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
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
    /// Read every managed resource of the stack before planning and record
    /// what drifted out of band (as `orrery drift` does): the plan shows the
    /// drift and restores it. A read that fails stops the command (exit 1).
    #[arg(long)]
    pub refresh: bool,
    /// Save the plan to FILE (readable by its owner only) for `orrery apply
    /// FILE`, which runs it only if planning again gives this very plan.
    /// Secret parameters are not saved: apply asks for them again.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
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
    /// Destroy without asking to type the stack's name.
    #[arg(long, short = 'y')]
    pub yes: bool,
    /// Destroy resources marked `protect: true` too (refused otherwise).
    #[arg(long)]
    pub allow_protected: bool,
    #[command(flatten)]
    pub vars: VarArgs,
    #[command(flatten)]
    pub select: SelectArgs,
    #[command(flatten)]
    pub remote: RemoteArgs,
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

    /// How these options reach plugins: in-process, or satellites on NATS.
    async fn plugin_pool(&self) -> anyhow::Result<(PluginPool, Engine)> {
        Ok(match &self.nats_url {
            Some(url) => {
                let client = orrery_primary::nats::connect(url, "orrery-primary", &self.nats_auth)
                    .await
                    .with_context(|| format!("cannot connect to NATS at {url}"))?;
                let pool = match self.hub.open(Some(&client), &self.nats_auth).await? {
                    Some(hub) => PluginPool::distributed(client).with_hub_schemas(hub),
                    None => PluginPool::distributed(client),
                };
                (pool, Engine::Nats)
            }
            None => (
                {
                    self.hub.open(None, &self.nats_auth).await?;
                    orrery_primary::service::set_plugin_env(self.plugin_env.clone());
                    // The user running the CLI is the operator of its
                    // plugins: a reference may name any variable or file.
                    let base = std::env::current_dir().unwrap_or_default();
                    orrery_primary::service::set_held_targets(
                        HeldTargets::default().policy(RefPolicy::Open { base }),
                    );
                    PluginPool::new(plugin_search_path(self.plugin_dir.as_deref()))
                },
                Engine::Embedded,
            ),
        })
    }

    /// The command service over these options' store and plugins.
    async fn service(&self, options: Options) -> anyhow::Result<Service> {
        let store = self.open_store()?;
        let (plugins, engine) = self.plugin_pool().await?;
        Ok(Service::new(
            store,
            plugins,
            ServiceConfig {
                options,
                lease: LeaseConfig::new(lease::DEFAULT_TTL),
                engine,
            },
        ))
    }

    /// Starts (or reaches) the plugins of `(plugin, target)` pairs, for
    /// the commands that work with plugins outside the command service
    /// (discovery, drift, import).
    pub(super) async fn start_plugins(
        &self,
        needs: impl IntoIterator<Item = (String, String)>,
    ) -> anyhow::Result<Started> {
        let needs: Needs = needs.into_iter().collect();
        let (pool, _) = self.plugin_pool().await?;
        match pool.ensure(&needs).await {
            Ok(plugins) => Ok(Started { pool, plugins }),
            Err(e) => {
                pool.stop().await;
                Err(e.into())
            }
        }
    }
}

/// Plugins started for one command; stop them at the end.
pub(super) struct Started {
    pool: PluginPool,
    plugins: Plugins,
}

impl Started {
    pub(super) fn transport(&self) -> std::sync::Arc<dyn Transport> {
        self.plugins.transport.clone()
    }

    pub(super) fn catalog(&self) -> &Catalog {
        &self.plugins.catalog
    }

    /// The process's rate-limit registry.
    pub(super) fn rates(&self) -> &orrery_primary::scheduler::RateRegistry {
        &self.plugins.rates
    }

    pub(super) async fn stop(&self) {
        self.pool.stop().await;
    }
}

/// Reads and parses a stack document; `${stack_dir}` is its directory.
pub(super) fn read_stack(file: &Path, vars: &VarArgs) -> anyhow::Result<Stack> {
    let doc = read_document(file, Mode::Reconcile, Engine::Embedded)?;
    Ok(vars.inputs(file)?.parse(&doc)?)
}

/// A stack document as an apply records it (so that a restarted primary
/// can resume the apply without the file): its text, name, directory (the
/// value of `${stack_dir}`), the mode and where plugins run.
pub(super) fn read_document(
    file: &Path,
    mode: Mode,
    engine: Engine,
) -> anyhow::Result<CommandDocument> {
    let text =
        std::fs::read_to_string(file).with_context(|| format!("cannot read {}", file.display()))?;
    let dir = std::fs::canonicalize(file)
        .ok()
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .unwrap_or_else(|| PathBuf::from("."));
    Ok(CommandDocument {
        engine: engine.name().to_owned(),
        mode: mode_name(mode).to_owned(),
        source: file.display().to_string(),
        stack_dir: dir.display().to_string(),
        text,
        selection: Default::default(),
    })
}

pub(super) fn print_plan(plan: &PlanView, output: Output) {
    if output == Output::Ndjson && plan.has_changes {
        // Applies and destroys print their events, `planned` first.
        return;
    }
    if output.is_json() {
        println!("{}", serde_json::to_string(plan).unwrap_or_default());
        return;
    }
    print_plan_text(&serde_json::to_value(plan).unwrap_or_default());
}

/// A plan as `--output json` and the HTTP API give it (a `PlanView`),
/// for people: what local and remote mode print alike.
pub(super) fn print_plan_text(plan: &serde_json::Value) {
    let colour = colour();
    let text = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_owned();
    if plan["refresh"].is_object() {
        // What `--refresh` read, as `orrery drift` prints it.
        super::discover::print_drift_text(&plan["refresh"], Some(plan));
    }
    let moved = plan["moved"].as_array().map_or(0, Vec::len);
    for m in plan["moved"].as_array().into_iter().flatten() {
        println!(
            "  {} {} -> {}",
            paint(colour, "36", " -> moved"),
            text(&m["from"]),
            text(&m["to"])
        );
    }
    let imported = plan["imported"].as_array().map_or(0, Vec::len);
    for i in plan["imported"].as_array().into_iter().flatten() {
        println!(
            "  {} {} [{}] ({})",
            paint(colour, "36", " <= import"),
            text(&i["label"]),
            text(&i["type"]),
            text(&i["id"])
        );
    }
    let marks = plan["protect"].as_array().map_or(0, Vec::len);
    for m in plan["protect"].as_array().into_iter().flatten() {
        let what = if m["protected"] == true {
            "protect"
        } else {
            "unprotect"
        };
        println!(
            "  {} {}",
            paint(colour, "36", &format!("  ~ {what}")),
            text(&m["label"])
        );
    }
    for c in plan["changes"].as_array().into_iter().flatten() {
        let action = c["action"].as_str().unwrap_or_default();
        let sign = match action {
            "create" => "+",
            "update" => "~",
            "replace" => "-/+",
            "delete" => "-",
            _ => continue,
        };
        let fields: Vec<String> = c["fields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        let fields = if fields.is_empty() {
            String::new()
        } else {
            format!(" ({})", fields.join(", "))
        };
        let code = match action {
            "create" => "32",
            "update" => "33",
            "replace" => "35",
            _ => "31",
        };
        println!(
            "  {} {} [{}]{fields}",
            paint(colour, code, &format!("{sign:>3} {action}")),
            text(&c["label"]),
            text(&c["type"])
        );
        if matches!(action, "update" | "replace") {
            for d in c["diffs"].as_array().into_iter().flatten() {
                print_diff(&diff_of(d));
            }
        }
    }
    // Outputs recorded anew: after the operations, with no plugin call.
    let outputs = plan["outputs"].as_array().map_or(0, Vec::len);
    for o in plan["outputs"].as_array().into_iter().flatten() {
        let flag = |k: &str| o[k].as_bool().unwrap_or(false);
        // A secret output's values are never shown, so a listed one with no
        // `before` was added (two secret values always compare equal).
        let (sign, code) = match (o.get("before").is_some(), flag("removed")) {
            (_, true) => ("-", "31"),
            (false, false) => ("+", "32"),
            (true, false) => ("~", "33"),
        };
        let value = |v: Option<&serde_json::Value>| v.map_or_else(|| "(none)".to_owned(), short);
        let change = if flag("sensitive") {
            "(sensitive)".to_owned()
        } else if flag("known_after_apply") {
            format!("{} → (known after apply)", value(o.get("before")))
        } else {
            format!("{} → {}", value(o.get("before")), value(o.get("after")))
        };
        println!(
            "  {} {}: {change}",
            paint(colour, code, &format!("{sign:>3} output")),
            text(&o["name"]),
        );
    }
    let s = &plan["summary"];
    let n = |k: &str| s[k].as_u64().unwrap_or(0);
    if plan["has_changes"].as_bool().unwrap_or(false) {
        if outputs > 0 {
            println!("{outputs} output(s) to record, with no plugin call.");
        }
        if moved > 0 {
            println!("{moved} resource(s) to move, with no plugin call.");
        }
        if marks > 0 {
            println!("{marks} protect mark(s) to record, with no plugin call.");
        }
        if imported > 0 {
            println!("{imported} resource(s) to import, read and recorded without a create.");
        }
        println!(
            "Plan: {} to create, {} to update, {} to replace, {} to delete, {} unchanged.",
            n("create"),
            n("update"),
            n("replace"),
            n("delete"),
            n("no_op")
        );
    } else {
        println!("No changes: {} resources up to date.", n("no_op"));
    }
}

/// A field's diff from its JSON (`FieldDiffView`).
fn diff_of(d: &serde_json::Value) -> FieldDiffView {
    let flag = |k: &str| d[k].as_bool().unwrap_or(false);
    FieldDiffView {
        field: d["field"].as_str().unwrap_or_default().to_owned(),
        before: d.get("before").cloned(),
        after: d.get("after").cloned(),
        sensitive: flag("sensitive"),
        known_after_apply: flag("known_after_apply"),
        forces_replacement: flag("forces_replacement"),
    }
}

/// Longest value shown in a plan line; `--output json` has them whole.
const SHOWN_CHARS: usize = 60;

fn short(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= SHOWN_CHARS {
        return text;
    }
    let cut: String = text.chars().take(SHOWN_CHARS).collect();
    format!(
        "{cut}… ({} chars; --output json shows it all)",
        text.chars().count()
    )
}

/// One changed field, `old → new`; maps and lists by key and index.
fn print_diff(d: &FieldDiffView) {
    let reason = if d.forces_replacement {
        "  # forces replacement"
    } else {
        ""
    };
    if d.sensitive {
        println!("        {}: (sensitive){reason}", d.field);
        return;
    }
    let after = if d.known_after_apply {
        Some("(known after apply)".to_owned())
    } else {
        d.after.as_ref().map(short)
    };
    let mut lines = Vec::new();
    nested(
        &d.field,
        d.before.as_ref(),
        d.after.as_ref(),
        after,
        &mut lines,
    );
    for (path, before, after) in lines {
        let before = before.unwrap_or_else(|| "(none)".into());
        let after = after.unwrap_or_else(|| "(none)".into());
        println!("        {path}: {before} → {after}{reason}");
    }
}

/// The differing leaves under `path`: maps by key, lists by index.
fn nested(
    path: &str,
    before: Option<&serde_json::Value>,
    after: Option<&serde_json::Value>,
    shown_after: Option<String>,
    out: &mut Vec<(String, Option<String>, Option<String>)>,
) {
    use serde_json::Value as J;
    match (before, after) {
        (Some(J::Object(b)), Some(J::Object(a))) => {
            let keys: BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            for k in keys {
                if b.get(k) != a.get(k) {
                    let after = a.get(k);
                    nested(
                        &format!("{path}.{k}"),
                        b.get(k),
                        after,
                        after.map(short),
                        out,
                    );
                }
            }
        }
        (Some(J::Array(b)), Some(J::Array(a))) => {
            for i in 0..b.len().max(a.len()) {
                if b.get(i) != a.get(i) {
                    let after = a.get(i);
                    nested(
                        &format!("{path}[{i}]"),
                        b.get(i),
                        after,
                        after.map(short),
                        out,
                    );
                }
            }
        }
        _ => out.push((path.to_owned(), before.map(short), shown_after)),
    }
}

pub(super) fn confirm(question: &str) -> anyhow::Result<bool> {
    Ok(matches!(
        ask(&format!("{question} [y/N] "))?.as_str(),
        "y" | "Y" | "yes"
    ))
}

/// Asks to type the stack's name before a whole-stack destroy.
pub(super) fn confirm_typed(stack: &str) -> anyhow::Result<bool> {
    let question = format!("Destroy every resource of stack `{stack}`? Type its name to confirm: ");
    Ok(ask(&question)? == stack)
}

fn ask(question: &str) -> anyhow::Result<String> {
    if !std::io::stdin().is_terminal() {
        bail!("refusing to change resources without confirmation: stdin is not a terminal (pass --yes)");
    }
    print!("{question}");
    std::io::stdout().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    Ok(answer.trim().to_owned())
}

/// Runs `f` with the service, then stops the plugins it started.
async fn with_service<F, Fut>(common: &Common, options: Options, f: F) -> anyhow::Result<ExitCode>
where
    F: FnOnce(Service) -> Fut,
    Fut: std::future::Future<Output = (Service, anyhow::Result<ExitCode>)>,
{
    let options = Options {
        stop_at: super::stop_point(),
        ..options
    };
    let service = common.service(options).await?;
    let (service, result) = f(service).await;
    // What the plugins announced, for `orrery validate` and `orrery schema`.
    let announced = service.plugins().hosts();
    let announced = announced.iter().map(|h| h.announcement().clone()).collect();
    if let Err(e) = super::schema_cache::save(&common.data_dir, announced) {
        tracing::warn!("the plugins' schemas are not cached: {e:#}");
    }
    service.shutdown().await;
    result
}

pub async fn plan_cmd(args: PlanArgs) -> anyhow::Result<ExitCode> {
    if let Some(remote) = args.remote.remote(&args.common.data_dir)? {
        return super::remote_cmds::plan(&remote, &args).await;
    }
    with_service(&args.common, Options::default(), |service| async {
        let result = async {
            let engine = service.config().engine;
            let mut inputs = args.vars.inputs(&args.file)?;
            // A saved plan carries exactly the files this parse reads.
            let reads = std::sync::Arc::new(std::sync::Mutex::new(Default::default()));
            inputs.record_reads = Some(reads.clone());
            let given: std::collections::BTreeMap<_, _> = inputs
                .env
                .clone()
                .into_iter()
                .chain(inputs.vars.clone())
                .collect();
            let mut prepared = service
                .prepare_with(read_document(&args.file, args.mode.into(), engine)?, inputs)
                .await?;
            prepared.selection = args.select.selection();
            let refreshed = match args.refresh {
                true => Some(service.refresh(&prepared).await?),
                false => None,
            };
            let plan = service.plan(&prepared).await?;
            let view = PlanView::new(&prepared.stack.name, Some(prepared.mode), &plan)
                .with_refresh(refreshed);
            if let Some(out) = &args.out {
                // Only the document's parameters: `ORRERY_VAR_*` may hold
                // other stacks' values.
                let given = given
                    .into_iter()
                    .filter(|(name, _)| prepared.stack.parameters.contains_key(name))
                    .collect();
                let files = std::mem::take(&mut *reads.lock().unwrap_or_else(|p| p.into_inner()));
                let saved = SavedPlan::new(
                    &prepared.document,
                    files,
                    given,
                    prepared.selection.clone(),
                    serde_json::to_value(&view)?,
                )?;
                saved.write(out, &secret_texts(&prepared.stack))?;
            }
            print_plan(&view, args.common.output);
            if let (Some(out), Output::Text) = (&args.out, args.common.output) {
                print_saved(out);
            }
            Ok(if plan.has_changes() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            })
        }
        .await;
        (service, result)
    })
    .await
}

/// The secret parameters' values of `stack` as text: what a saved plan
/// must not contain.
pub(super) fn secret_texts(stack: &Stack) -> Vec<String> {
    stack
        .parameters
        .values()
        .filter(|known| known.secret)
        .filter_map(|known| match &known.value {
            orrery_schema::Value::String(text) => Some(text.clone()),
            _ => None,
        })
        .collect()
}

/// Tells where a plan was saved and how to apply it.
pub(super) fn print_saved(out: &Path) {
    println!(
        "Saved the plan to {0}; `orrery apply {0}` runs exactly this plan.",
        out.display()
    );
}

/// Says that a saved or confirmed plan is not what would run now, and why.
pub(super) fn print_stale<'a>(changed: impl Iterator<Item = &'a str>) {
    eprintln!("the stack changed since your plan; plan again");
    for line in changed {
        eprintln!("  {line}");
    }
}

pub async fn apply_cmd(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let saved = SavedPlan::read(&args.file)?;
    if let Some(saved) = &saved {
        refuse_with_saved(&args)?;
        if let Some(remote) = args.remote.remote(&args.common.data_dir)? {
            return super::remote_cmds::apply_saved(&remote, &args, saved).await;
        }
    }
    if let Some(remote) = args.remote.remote(&args.common.data_dir)? {
        return super::remote_cmds::apply(&remote, &args).await;
    }
    let options = Options {
        max_concurrency: args.concurrency,
        rate_overrides: args.rate_limits.iter().cloned().collect(),
        ..Options::default()
    };
    with_service(&args.common, options, |service| async {
        let result = match saved {
            Some(saved) => apply_saved(&service, &args, saved).await,
            None => apply(&service, &args).await,
        };
        (service, result)
    })
    .await
}

/// The options of an apply that a saved plan fixes itself.
fn refuse_with_saved(args: &ApplyArgs) -> Result<(), SavedPlanError> {
    let select = &args.select;
    let given = [
        (!select.target.is_empty(), "--target"),
        (!select.exclude.is_empty(), "--exclude"),
        (!select.replace.is_empty(), "--replace"),
        (args.refresh, "--refresh"),
        (args.dry_run, "--dry-run"),
    ];
    match given.into_iter().find(|(given, _)| *given) {
        Some((_, option)) => Err(SavedPlanError::Option(option)),
        None => Ok(()),
    }
}

/// `orrery apply FILE` of a saved plan: plans its document again under the
/// stack's lease and runs that plan, without a question (saving it was the
/// confirmation), only when its hash is the saved one.
async fn apply_saved(
    service: &Service,
    args: &ApplyArgs,
    saved: SavedPlan,
) -> anyhow::Result<ExitCode> {
    let output = args.common.output;
    let inputs = saved.inputs(args.vars.inputs(&args.file)?)?;
    let confirmed = saved.confirmed()?;
    let mut prepared = service
        .prepare_with(saved.document(service.config().engine), inputs)
        .await?;
    prepared.selection = saved.selection.clone();
    let (name, has_outputs) = (
        prepared.stack.name.clone(),
        !prepared.stack.outputs.is_empty(),
    );
    let mut command = service
        .begin_apply(prepared, &new_command_id(), Some(&local_principal()))
        .await?;
    command.allow_protected(args.allow_protected);
    print_resumed(command.settle().await?.as_ref(), output);
    let planned = command.plan().await?;
    let now = command.view(&planned.plan);
    let stale = match command.resumes() {
        true => vec![view::interrupted_first(command.id())],
        false => now.stale_reasons(&confirmed),
    };
    if !stale.is_empty() {
        print_stale(stale.iter().map(String::as_str));
        return Ok(ExitCode::from(1));
    }
    print_plan(&now, output);
    if !planned.plan.has_changes() {
        return Ok(ExitCode::SUCCESS);
    }
    let (report, printer) = execute(command, &planned, output, args.common.verbose).await?;
    let code = finish(report, printer.finished(), output)?;
    printer.breakdown();
    if has_outputs {
        super::output_cmd::print_after_apply(service.outputs(&name).await?.as_ref(), output);
    }
    Ok(code)
}

async fn apply(service: &Service, args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let output = args.common.output;
    let engine = service.config().engine;
    let mut prepared = service
        .prepare_with(
            read_document(&args.file, args.mode.into(), engine)?,
            args.vars.inputs(&args.file)?,
        )
        .await?;
    prepared.selection = args.select.selection();
    if args.dry_run {
        let refreshed = match args.refresh {
            true => Some(service.refresh(&prepared).await?),
            false => None,
        };
        let plan = service.plan(&prepared).await?;
        print_plan(
            &PlanView::new(&prepared.stack.name, Some(prepared.mode), &plan)
                .with_refresh(refreshed),
            output,
        );
        return Ok(ExitCode::SUCCESS);
    }
    // The stack's command: the one a primary did not finish (its lease
    // taken; refused while another primary runs it), or a new one.
    let (name, has_outputs) = (
        prepared.stack.name.clone(),
        !prepared.stack.outputs.is_empty(),
    );
    // Confirmed once, the apply goes on through a state store failure
    // without asking again.
    let asked = std::cell::Cell::new(false);
    let ask = || {
        let yes = confirm("Apply these changes?")?;
        asked.set(yes);
        Ok(yes)
    };
    let mut prepared = Some(prepared);
    let mut waits = store_waits();
    let code = loop {
        let attempt = async {
            let prepared = match prepared.take() {
                Some(prepared) => prepared,
                None => {
                    let mut again = service
                        .prepare_with(
                            read_document(&args.file, args.mode.into(), engine)?,
                            args.vars.inputs(&args.file)?,
                        )
                        .await?;
                    again.selection = args.select.selection();
                    again
                }
            };
            // The command the store failure left running is taken up again.
            let mut command = service
                .begin_apply(prepared, &new_command_id(), Some(&local_principal()))
                .await?;
            command.allow_protected(args.allow_protected);
            run(
                command,
                args.yes || asked.get(),
                args.refresh,
                &ask,
                &args.common,
            )
            .await
        }
        .await;
        match attempt {
            Err(e) if store_failed(&e) => match waits.next() {
                Some(wait) => {
                    eprintln!(
                        "warning: {e:#}\n  the command stays running; trying again in {wait:?}"
                    );
                    tokio::time::sleep(wait).await;
                }
                None => return Err(e),
            },
            other => break other?,
        }
    };
    if has_outputs {
        super::output_cmd::print_after_apply(service.outputs(&name).await?.as_ref(), output);
    }
    Ok(code)
}

/// Settles what an interrupted command left, reads every managed
/// resource when `refresh`, plans, asks, executes.
async fn run(
    command: Command,
    yes: bool,
    refresh: bool,
    confirmed: &dyn Fn() -> anyhow::Result<bool>,
    common: &Common,
) -> anyhow::Result<ExitCode> {
    let output = common.output;
    print_resumed(command.settle().await?.as_ref(), output);
    let refreshed = match refresh {
        true => Some(command.refresh().await?),
        false => None,
    };
    let planned = command.plan().await?;
    print_plan(&command.view(&planned.plan).with_refresh(refreshed), output);
    // A resumed command is finished even when nothing is left to change.
    if !planned.plan.has_changes() && !command.resumes() {
        return Ok(ExitCode::SUCCESS);
    }
    if planned.plan.has_changes() && !yes && !confirmed()? {
        println!("Nothing changed.");
        return Ok(ExitCode::SUCCESS);
    }
    let (report, printer) = execute(command, &planned, output, common.verbose).await?;
    let code = finish(report, printer.finished(), output)?;
    printer.breakdown();
    Ok(code)
}

/// How long to wait before each new try after the state store failed mid-
/// command: 0.2 s doubling to 5 s, for about two minutes in all, then the
/// command is left `running` for the next apply (or a server) to resume.
fn store_waits() -> impl Iterator<Item = std::time::Duration> {
    let mut total = std::time::Duration::ZERO;
    std::iter::successors(Some(std::time::Duration::from_millis(200)), |w| {
        Some((*w * 2).min(std::time::Duration::from_secs(5)))
    })
    .take_while(move |w| {
        total += *w;
        total <= std::time::Duration::from_secs(120)
    })
}

/// Whether `e` is the state store failing (not a request it refused).
fn store_failed(e: &anyhow::Error) -> bool {
    matches!(e.downcast_ref::<ServiceError>(), Some(ServiceError::Store(s)) if s.is_transient())
        || e.downcast_ref::<state::StoreError>()
            .is_some_and(state::StoreError::is_transient)
}

fn new_command_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

fn print_resumed(resumed: Option<&Resumed>, output: Output) {
    if let (Some(r), Output::Text) = (resumed, output) {
        if r.canceled {
            if r.resolved == 0 {
                return;
            }
            println!(
                "Settling what command {} left in flight when it was canceled by force: {} operation(s) settled, {} found and adopted, {} to create again, {} still landing (sent again under their own request id).",
                r.command_id,
                r.resolved,
                r.adopted.len(),
                r.not_found.len(),
                r.resent.len()
            );
            return;
        }
        println!(
            "Resuming interrupted command {}: {} operation(s) settled, {} found and adopted, {} to create again, {} still landing (sent again under their own request id).",
            r.command_id,
            r.resolved,
            r.adopted.len(),
            r.not_found.len(),
            r.resent.len()
        );
    }
}

pub async fn destroy_cmd(args: DestroyArgs) -> anyhow::Result<ExitCode> {
    let (name, document) = match (&args.stack, &args.file) {
        (Some(name), _) => (name.clone(), None),
        (None, Some(file)) => {
            let doc = read_document(file, Mode::Reconcile, Engine::Embedded)?;
            let stack = args.vars.inputs(file)?.parse(&doc)?;
            (stack.name.clone(), Some(stack))
        }
        (None, None) => bail!("name a stack document or --stack"),
    };
    if let Some(remote) = args.remote.remote(&args.common.data_dir)? {
        return super::remote_cmds::destroy(&remote, &name, &args).await;
    }
    with_service(&args.common, Options::default(), |service| async {
        let result = async {
            let mut command = match service
                .begin_destroy(&name, document, &new_command_id(), Some(&local_principal()))
                .await
            {
                Ok(command) => command.with_selection(args.select.selection()),
                Err(ServiceError::UnknownStack(_)) => {
                    print_plan(
                        &PlanView::new(&name, None, &Default::default()),
                        args.common.output,
                    );
                    return Ok(ExitCode::SUCCESS);
                }
                Err(e) => return Err(e.into()),
            };
            command.allow_protected(args.allow_protected);
            let whole = args.select.target.is_empty() && args.select.exclude.is_empty();
            let ask = || {
                if whole {
                    confirm_typed(&name)
                } else {
                    confirm(&format!(
                        "Destroy the selected resources of stack `{name}`?"
                    ))
                }
            };
            run(command, args.yes, false, &ask, &args.common).await
        }
        .await;
        (service, result)
    })
    .await
}

async fn execute(
    command: Command,
    planned: &Planned,
    output: Output,
    verbose: bool,
) -> anyhow::Result<(Report, Printer)> {
    let events = EventSink::new(command.id());
    let total = planned
        .plan
        .changes
        .iter()
        .filter(|c| c.action != Action::NoOp)
        .count() as u64;
    let printer = {
        let events = events.clone();
        let mut printer = Printer::new(output, verbose, total);
        tokio::spawn(async move {
            events.follow(|e| printer.event(e)).await;
            printer
        })
    };
    // Ctrl-C cancels: nothing new starts, in-flight operations finish. A
    // second one stops waiting for them, leaving them as a crash would for
    // the next apply to settle.
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(Stop::Run);
    // Installed here, not when the task first runs: a Ctrl-C once the
    // command may have started must cancel it, never kill the process.
    let mut sigint = super::remote_cmds::listen_for_ctrl_c()?;
    let ctrl_c = tokio::spawn(async move {
        if sigint.recv().await.is_none() {
            return;
        }
        eprintln!("canceling: no new operations start; in-flight ones finish (Ctrl-C again to stop waiting for them: the next apply settles them)");
        let _ = cancel_tx.send(Stop::Graceful);
        if sigint.recv().await.is_some() {
            eprintln!("canceling by force: in-flight operations are no longer waited for; they stay recorded without an outcome, and the next apply of the stack settles them by reading (the plugins are given a few seconds to finish them before orrery exits)");
            let _ = cancel_tx.send(Stop::Force);
        }
    });
    let report = command.execute(planned, Some(events), cancel_rx).await;
    ctrl_c.abort();
    let printer = printer.await?;
    printer.done();
    Ok((report?, printer))
}

/// Whether output to the terminal is coloured: stdout is one, and
/// `NO_COLOR` (https://no-color.org) is unset or empty.
pub(super) fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// `text` in the ANSI colour `code` when `on`.
pub(super) fn paint(on: bool, code: &str, text: &str) -> String {
    if on {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

/// How often a summary line is printed without a terminal.
const SUMMARY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);
/// An operation slower than this gets a line of its own.
const SLOW_MS: u64 = 30_000;
/// How many of the slowest operations the end summary names.
const SLOWEST: usize = 5;

/// Prints a command's events as they come (local and remote mode alike):
/// every transition with `--verbose`; otherwise a progress bar on a
/// terminal (a summary line every few seconds elsewhere), failures and
/// slow operations. Keeps what the summary needs.
pub(super) struct Printer {
    output: Output,
    verbose: bool,
    colour: bool,
    bar: indicatif::ProgressBar,
    tally: orrery_core::events::Tally,
    last: std::collections::HashMap<(String, String), OpEvent>,
    started: std::time::Instant,
    summarized: std::time::Instant,
    failed: Vec<(String, String, String, String)>,
    dependency_failed: Vec<String>,
    canceled: Vec<String>,
    /// Operations by `plugin/target`: succeeded, did not.
    by_target: std::collections::BTreeMap<String, (usize, usize)>,
    /// The slowest operations: elapsed ms, `operation label`.
    slowest: Vec<(u64, String)>,
    finished: Option<orrery_core::events::FinishedEvent>,
}

impl Printer {
    /// A printer for a command of `total` operations (the `planned` event
    /// corrects it).
    pub(super) fn new(output: Output, verbose: bool, total: u64) -> Printer {
        let colour = colour();
        let bar = if output == Output::Text && !verbose {
            let bar = indicatif::ProgressBar::new(total);
            let template = if colour {
                "{elapsed_precise} [{bar:30.green/blue}] {pos}/{len} {msg} ETA {eta}"
            } else {
                "{elapsed_precise} [{bar:30}] {pos}/{len} {msg} ETA {eta}"
            };
            if let Ok(style) = indicatif::ProgressStyle::with_template(template) {
                bar.set_style(style.progress_chars("=> "));
            }
            bar
        } else {
            indicatif::ProgressBar::hidden()
        };
        let now = std::time::Instant::now();
        Printer {
            output,
            verbose,
            colour,
            bar,
            tally: Default::default(),
            last: Default::default(),
            started: now,
            summarized: now,
            failed: Vec::new(),
            dependency_failed: Vec::new(),
            canceled: Vec::new(),
            by_target: Default::default(),
            slowest: Vec::new(),
            finished: None,
        }
    }

    fn println(&self, line: &str) {
        if self.bar.is_hidden() {
            println!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn counts(&self) -> String {
        let t = &self.tally;
        format!(
            "{} succeeded, {} failed, {} in flight, {} waiting for rate limit, {} remaining",
            t.succeeded,
            t.failed,
            t.in_flight,
            t.waiting,
            t.remaining()
        )
    }

    /// Prints `e` and takes it into account.
    pub(super) fn event(&mut self, e: &CommandEvent) {
        let before = match &e.body {
            EventBody::Operation(op) => self
                .last
                .insert((op.label.clone(), op.operation.clone()), op.status),
            _ => None,
        };
        self.tally.add(&e.body, before);
        match self.output {
            Output::Ndjson => {
                if let Some(line) = event_line(e, self.output) {
                    println!("{line}");
                }
            }
            Output::Json => {}
            Output::Text => self.show(e),
        }
        match &e.body {
            EventBody::Planned(p) => self.bar.set_length(p.operations as u64),
            EventBody::Operation(op) => {
                if !op.status.is_terminal() {
                    return;
                }
                let key = format!("{}/{}", op.plugin, op.target);
                let entry = self.by_target.entry(key).or_default();
                if op.status == OpEvent::Succeeded {
                    entry.0 += 1;
                } else {
                    entry.1 += 1;
                }
                if let Some(ms) = op.elapsed_ms {
                    self.slowest
                        .push((ms, format!("{} {}", op.operation, op.label)));
                    self.slowest
                        .sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                    self.slowest.truncate(SLOWEST);
                }
                match op.status {
                    OpEvent::Failed => self.failed.push((
                        op.label.clone(),
                        op.operation.clone(),
                        op.code.clone().unwrap_or_default(),
                        op.message.clone().unwrap_or_default(),
                    )),
                    OpEvent::DependencyFailed => self.dependency_failed.push(op.label.clone()),
                    OpEvent::Canceled => self.canceled.push(op.label.clone()),
                    _ => {}
                }
            }
            EventBody::Finished(f) => self.finished = Some(f.clone()),
        }
    }

    /// The text output of `e`.
    fn show(&mut self, e: &CommandEvent) {
        if let EventBody::Operation(op) = &e.body {
            let slow = op.status == OpEvent::Succeeded && op.elapsed_ms.unwrap_or(0) > SLOW_MS;
            if self.verbose || op.status == OpEvent::Failed || slow {
                if let Some(line) = event_line(e, self.output) {
                    let line = match op.status {
                        OpEvent::Failed => paint(self.colour, "31", &line),
                        _ if slow => format!(
                            "{line} (slow: {:.1}s)",
                            op.elapsed_ms.unwrap_or(0) as f64 / 1000.0
                        ),
                        _ => line,
                    };
                    self.println(&line);
                }
            }
        }
        if self.verbose {
            return;
        }
        if !self.bar.is_hidden() {
            self.bar
                .set_position((self.tally.succeeded + self.tally.failed) as u64);
            self.bar.set_message(self.counts());
        } else if self.summarized.elapsed() >= SUMMARY_EVERY
            && !matches!(e.body, EventBody::Finished(_))
        {
            self.summarized = std::time::Instant::now();
            println!(
                "  {:.0}s: {}",
                self.started.elapsed().as_secs_f64(),
                self.counts()
            );
        }
    }

    /// Clears the progress bar.
    pub(super) fn done(&self) {
        self.bar.finish_and_clear();
    }

    /// After the summary line: operations by plugin and target, and the
    /// slowest ones (text only).
    pub(super) fn breakdown(&self) {
        if self.output != Output::Text || self.by_target.is_empty() {
            return;
        }
        for (target, (ok, not)) in &self.by_target {
            println!("  {target}: {ok} succeeded, {not} did not");
        }
        if !self.slowest.is_empty() {
            let slowest: Vec<String> = self
                .slowest
                .iter()
                .map(|(ms, what)| format!("{what} ({:.1}s)", *ms as f64 / 1000.0))
                .collect();
            println!("  slowest: {}", slowest.join(", "));
        }
    }

    /// The `finished` event, once it came: how the command ended.
    pub(super) fn finished(&self) -> Option<&FinishedEvent> {
        self.finished.as_ref()
    }

    /// The report the events tell, once `finished` came.
    pub(super) fn report(&self, command_id: &str) -> Option<Report> {
        let f = self.finished.as_ref()?;
        Some(Report {
            command_id: command_id.to_owned(),
            succeeded: f.succeeded,
            failed: self.failed.clone(),
            dependency_failed: self.dependency_failed.clone(),
            canceled: self.canceled.clone(),
            // What a forced cancel left in flight: no terminal event came.
            unsettled: match f.unsettled {
                0 => Vec::new(),
                _ => {
                    let mut labels: Vec<String> = self
                        .last
                        .iter()
                        .filter(|(_, status)| !status.is_terminal())
                        .map(|((label, _), _)| label.clone())
                        .collect();
                    labels.sort();
                    labels.dedup();
                    labels
                }
            },
            retries: f.retries,
            requests: f.requests,
            elapsed_ms: f.elapsed_ms,
        })
    }
}

/// How `event` is printed: the event itself as a JSON line for `ndjson`,
/// a line per operation transition for people.
pub(super) fn event_line(event: &CommandEvent, output: Output) -> Option<String> {
    match output {
        Output::Ndjson => serde_json::to_string(event).ok(),
        Output::Json => None,
        Output::Text => match &event.body {
            EventBody::Operation(op) if op.status != OpEvent::WaitingForRateLimit => {
                let detail = match (&op.code, &op.message) {
                    (Some(c), Some(m)) => format!(" ({c}: {m})"),
                    (Some(c), None) => format!(" ({c})"),
                    (None, Some(m)) => format!(" ({m})"),
                    (None, None) if op.status == OpEvent::Attempt => {
                        format!(" (attempt {})", op.attempt)
                    }
                    (None, None) => String::new(),
                };
                Some(format!(
                    "  {} {}: {}{detail}",
                    op.operation,
                    op.label,
                    op.status.name()
                ))
            }
            _ => None,
        },
    }
}

pub(super) fn finish(
    mut report: Report,
    ended: Option<&FinishedEvent>,
    output: Output,
) -> anyhow::Result<ExitCode> {
    // The same order whoever ran it and however it was followed.
    report.failed.sort();
    report.dependency_failed.sort();
    report.canceled.sort();
    report.unsettled.sort();
    // The command's own status decides, not the operations counted: a
    // command the state store failed under ends `failed` or `error` with
    // none of them failed, and must not pass for done (a CI job trusts the
    // exit code).
    let status = ended.map_or("completed", |f| f.status.as_str());
    let succeeded = report.ok() && status == "completed";
    if output == Output::Ndjson {
        // The `finished` event said it all.
    } else if output == Output::Json {
        let mut view = ReportView::new(&report);
        view.ok = succeeded;
        println!("{}", serde_json::to_string(&view)?);
    } else {
        let headline = if succeeded {
            "Done".to_owned()
        } else if !report.ok() {
            "Finished with failures".to_owned()
        } else {
            format!("Command ended `{status}`")
        };
        println!(
            "{} in {:.1}s: {} succeeded, {} failed, {} not attempted (dependency failed), {} canceled, {} retries. Command {}.",
            headline,
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
        if let Some(message) = ended.and_then(|f| f.message.as_deref()) {
            println!("  the command ended `{status}`: {message}");
        }
        if !report.unsettled.is_empty() {
            println!(
                "  unsettled: {} operation(s) in flight when the forced cancel stopped waiting ({}); the next apply of the stack settles them by reading.",
                report.unsettled.len(),
                report.unsettled.join(", ")
            );
        }
    }
    Ok(if succeeded {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Who runs the CLI's commands, in the audit: `local:<user>`.
fn local_principal() -> String {
    format!("local:{}", super::local_user())
}
