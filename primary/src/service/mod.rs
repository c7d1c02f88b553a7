//! The command service: the one pipeline every caller drives — `orrery
//! plan|apply|destroy`, the HTTP API and the server's background resume —
//! read and parse → plugins → validate → plan → lease → settle/resume →
//! execute → report.
//!
//! Callers differ only in how they talk to people: the CLI prints the plan
//! and asks before [`Command::execute`]; the HTTP API answers 202 with the
//! plan and executes in the background. Both call the same functions here,
//! get the same [`ServiceError`]s, and show plans and reports through the
//! same [`view`] types.
//!
//! - [`plugins`]: how plugins are provided for a command (one way, both modes).
//! - [`view`]: plans and reports as JSON.
//! - [`error`]: the domain errors.

mod error;
pub mod hub_schemas;
mod imports;
pub mod outputs;
pub mod plugins;
pub mod rates;
pub mod view;

use std::collections::BTreeSet;
use std::sync::Arc;

use tokio::sync::watch;

pub use error::ServiceError;

pub use plugins::{
    plugin_search_path, set_held_targets, set_plugin_env, Needs, PluginError, PluginPool, Plugins,
};

use crate::apply::{EventSink, Executor, Options, Report, Resumed, Stop};
use crate::discovery::{self, DriftReport};
use crate::lease::{self, Claim, Keeper, LeaseConfig};
use crate::plan::{self, Mode, Plan, SecretHasher};
use crate::stack::{self, Graph, Stack};
use crate::state::{CommandDocument, CommandHead, StateStore, Store, StoredResource};
use orrery_core::select::{self, Selection};

/// The labels of `stack`'s resources marked `protect: true`.
fn protected_labels(stack: &Stack) -> BTreeSet<String> {
    stack
        .resources
        .iter()
        .filter(|r| r.protect)
        .map(|r| r.label.clone())
        .collect()
}

/// The labels of every resource `stack` declares.
fn declared_labels(stack: &Stack) -> BTreeSet<String> {
    stack.resources.iter().map(|r| r.label.clone()).collect()
}

/// The `protect:` marks `plan` records: those the document changes, of
/// the resources a selection (`--target`, `--exclude`) kept.
fn marks_of(plan: &Plan, stack: &Stack, recorded: &BTreeSet<String>) -> Vec<(String, bool)> {
    let kept: BTreeSet<&str> = plan.changes.iter().map(|c| c.label.as_str()).collect();
    plan::protect_marks(stack, recorded)
        .into_iter()
        .filter(|(label, _)| kept.contains(label.as_str()))
        .collect()
}

/// Records `marks` (label, protected) on `stack`'s records.
async fn mark_protected(
    store: &Store,
    stack: &str,
    marks: Vec<(String, bool)>,
) -> Result<(), ServiceError> {
    if marks.is_empty() {
        return Ok(());
    }
    let stack = stack.to_owned();
    on_store(store, move |s| Ok(s.set_protected(&stack, &marks)?)).await
}

/// `stored` (the stack's records) as the document's `moved:` entries
/// re-address them, and the moves that do: what a plan is made against.
/// A move that cannot be made is an invalid stack, placed on its line.
fn moved_records(
    stack: &Stack,
    stored: Vec<StoredResource>,
) -> Result<(Vec<StoredResource>, Vec<plan::moved::Move>), ServiceError> {
    if stack.moved.is_empty() {
        return Ok((stored, Vec::new()));
    }
    let moves = plan::moved::moves(stack, &stored).map_err(|e| {
        ServiceError::InvalidStack(vec![stack::StackError {
            file: stack.source.clone(),
            line: e.line,
            position: None,
            resource: None,
            problem: stack::Problem::Syntax(e.to_string()),
        }])
    })?;
    Ok((plan::moved::moved_records(&stored, &moves), moves))
}

/// Reads every managed resource of stack `name` through `plugins` and
/// records what drifted, as `orrery drift` does, so that the plan made
/// next restores it (`--refresh`). A read that fails fails the refresh:
/// a plan that ignored it would say nothing changed where it cannot know.
async fn refresh(
    store: &Store,
    plugins: &Plugins,
    name: &str,
    options: &Options,
) -> Result<DriftReport, ServiceError> {
    let options = discovery::Options {
        rate_overrides: options.rate_overrides.clone(),
        timeout: options.request_timeout,
        ..discovery::Options::default()
    };
    let report = discovery::sync_drift(
        plugins.transport.as_ref(),
        &plugins.catalog,
        &plugins.rates,
        store.as_ref(),
        Some(name),
        &options,
    )
    .await?;
    tracing::info!(stack = %name, checked = report.checked, drifted = report.drifted.len(),
        failures = report.failures.len(), "refreshed before planning");
    if !report.failures.is_empty() {
        return Err(ServiceError::Refresh(report.failures));
    }
    Ok(report)
}

/// What a caller gives a stack document besides its text.
#[derive(Clone, Debug, Default)]
pub struct StackInputs {
    /// Parameter values (`--var`, `--var-file`, the HTTP API's `vars`).
    pub vars: std::collections::BTreeMap<String, stack::Supplied>,
    /// Parameter values from `ORRERY_VAR_<name>`, below `vars`.
    pub env: std::collections::BTreeMap<String, stack::Supplied>,
    /// Where `file()` and module sources are read from; `None` refuses
    /// every read but of [`StackInputs::files`].
    pub files_dir: Option<std::path::PathBuf>,
    /// Files a request brought, by the path the document names them with
    /// (the remote CLI sends what its document reads), for a server that
    /// must read none of its own.
    pub files: Option<std::sync::Arc<std::collections::BTreeMap<String, String>>>,
    /// Which other stacks' outputs the document may read, for the
    /// principal who asked; `None`: any (the local CLI, whose user is the
    /// operator, and the server resuming a command authorized when it
    /// began).
    pub stack_reads: Option<StackReads>,
    /// When set, every file read is kept here by its path, with its text:
    /// what a saved plan carries so that its apply reads the same.
    pub record_reads: Option<Arc<std::sync::Mutex<std::collections::BTreeMap<String, String>>>>,
}

/// Which stacks' recorded outputs a document may read
/// (`${stacks.NAME.outputs.X}`), and the ones it was refused. A refused
/// read is never made: the store is not asked, and no value can reach a
/// plan or an error message.
#[derive(Clone)]
pub struct StackReads {
    may_read: Arc<dyn Fn(&str) -> bool + Send + Sync>,
    refused: Arc<std::sync::Mutex<BTreeSet<String>>>,
}

impl std::fmt::Debug for StackReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackReads")
            .field("refused", &self.refused())
            .finish_non_exhaustive()
    }
}

impl StackReads {
    /// Reads of the stacks `may_read` admits.
    pub fn new(may_read: impl Fn(&str) -> bool + Send + Sync + 'static) -> StackReads {
        StackReads {
            may_read: Arc::new(may_read),
            refused: Arc::default(),
        }
    }

    /// Whether stack `name`'s outputs may be read; a refusal is kept.
    fn admit(&self, name: &str) -> bool {
        let ok = (self.may_read)(name);
        if !ok {
            self.refused
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(name.to_owned());
        }
        ok
    }

    /// The stacks whose outputs the document tried to read and was refused.
    pub fn refused(&self) -> Vec<String> {
        self.refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

impl StackInputs {
    /// Parses `doc` with these inputs; other stacks' outputs cannot be
    /// read (see [`StackInputs::parse_with_store`]).
    pub fn parse(&self, doc: &CommandDocument) -> Result<Stack, stack::StackError> {
        self.parse_with_store(doc, None)
    }

    /// Parses `doc` with these inputs, `${stacks.NAME.outputs.X}` read
    /// from the outputs `store` recorded for stack `NAME`.
    pub fn parse_with_store(
        &self,
        doc: &CommandDocument,
        store: Option<&dyn StateStore>,
    ) -> Result<Stack, stack::StackError> {
        let read_outputs = |name: &str| {
            if let Some(reads) = &self.stack_reads {
                if !reads.admit(name) {
                    return None;
                }
            }
            match store?.outputs(name) {
                Ok(outputs) => outputs,
                Err(e) => {
                    tracing::warn!(stack = %name, error = %e, "cannot read the stack's outputs");
                    None
                }
            }
        };
        let stacks: Option<stack::StackOutputs<'_>> = store.map(|_| &read_outputs as _);
        let read = |path: &str| self.read(path);
        let parsed = stack::parse_with_inputs(
            &doc.source,
            &doc.text,
            &doc.stack_dir,
            &stack::Inputs {
                vars: self.vars.clone(),
                env: self.env.clone(),
                files: &read,
                stacks,
            },
        )?;
        // A refused read fails the document even where an expression
        // would have done without its value.
        match self.stack_reads.as_ref().map(StackReads::refused) {
            Some(refused) if !refused.is_empty() => Err(stack::StackError {
                file: doc.source.clone(),
                line: None,
                position: None,
                resource: None,
                problem: stack::Problem::Expression {
                    at: "the document".into(),
                    error: stack::EvalError::Unknown(format!(
                        "the outputs of stack `{}` may not be read here",
                        refused.join("`, `")
                    )),
                },
            }),
            _ => Ok(parsed),
        }
    }
}

impl StackInputs {
    /// The file `path` as the document names it (`file()`, a module's
    /// `source`).
    pub fn read(&self, path: &str) -> Result<String, String> {
        let text = self.read_unrecorded(path)?;
        if let Some(reads) = &self.record_reads {
            reads
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.to_owned(), text.clone());
        }
        Ok(text)
    }

    fn read_unrecorded(&self, path: &str) -> Result<String, String> {
        match (&self.files_dir, &self.files) {
            (Some(dir), _) => read_relative(dir, path),
            (None, Some(files)) => files
                .get(path)
                .cloned()
                .ok_or_else(|| format!("the request brought no file `{path}`")),
            (None, None) => Err("no files can be read for this document".to_owned()),
        }
    }
}

/// `path` inside `dir`, read whole if not larger than `file()` takes: an
/// absolute path or one with `..` is refused, so a document reads only
/// what lies under its own directory.
fn read_relative(dir: &std::path::Path, path: &str) -> Result<String, String> {
    use std::io::Read;
    let p = std::path::Path::new(path);
    if p.is_absolute()
        || p.components().any(|c| {
            !matches!(
                c,
                std::path::Component::Normal(_) | std::path::Component::CurDir
            )
        })
    {
        return Err("the path must be relative to the document, without `..`".to_owned());
    }
    // A symbolic link could still lead out of the directory.
    let full = dir.join(p);
    let (real, real_dir) = (
        full.canonicalize().map_err(|e| e.to_string())?,
        dir.canonicalize().map_err(|e| e.to_string())?,
    );
    if !real.starts_with(&real_dir) {
        return Err("the path leads out of the document's directory (a symbolic link)".to_owned());
    }
    let file = std::fs::File::open(real).map_err(|e| e.to_string())?;
    let mut text = String::new();
    let max = stack::eval::MAX_FILE_BYTES as u64;
    file.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|e| e.to_string())?;
    if text.len() as u64 > max {
        return Err(format!("the file is more than {max} bytes"));
    }
    Ok(text)
}

/// How the service reaches plugins, as recorded with its commands: a
/// command is resumed only by a primary that reaches its plugins the same
/// way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Engine {
    /// Plugins in this process's care.
    Embedded,
    /// Plugins behind satellites, over NATS.
    Nats,
}

impl Engine {
    /// The recorded name.
    pub fn name(self) -> &'static str {
        match self {
            Engine::Embedded => "embedded",
            Engine::Nats => "nats",
        }
    }
}

/// What a command does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CommandKind {
    /// Makes a stack's resources what its document says.
    Apply,
    /// Deletes every resource of a stack.
    Destroy,
}

impl CommandKind {
    /// The recorded name.
    pub fn name(self) -> &'static str {
        match self {
            CommandKind::Apply => "apply",
            CommandKind::Destroy => "destroy",
        }
    }

    /// The kind a recorded name spells.
    pub fn parse(name: &str) -> Option<CommandKind> {
        match name {
            "apply" => Some(CommandKind::Apply),
            "destroy" => Some(CommandKind::Destroy),
            _ => None,
        }
    }
}

/// How commands run.
#[derive(Clone, Debug)]
pub struct ServiceConfig {
    /// Concurrency, rate-limit overrides, page size.
    pub options: Options,
    /// Who this primary is in command leases, and their time to live.
    pub lease: LeaseConfig,
    /// How plugins are reached.
    pub engine: Engine,
}

/// The command service. Cheap to share behind an `Arc`.
pub struct Service {
    store: Store,
    plugins: PluginPool,
    config: ServiceConfig,
}

/// A parsed, validated stack document with the plugins it needs.
pub struct Prepared {
    /// The stack.
    pub stack: Stack,
    /// Its dependency graph.
    pub graph: Graph,
    /// `reconcile` or `patch`.
    pub mode: Mode,
    /// What is recorded so that the apply can be resumed without the caller.
    pub document: CommandDocument,
    /// The part of the stack to plan and apply (all of it by default).
    pub selection: Selection,
    plugins: Plugins,
}

impl Prepared {
    /// The plugins' announcements.
    pub fn catalog(&self) -> &stack::Catalog {
        &self.plugins.catalog
    }
}

/// An unknown plugin's error, with why it could not be provided.
fn with_reason(
    mut e: stack::StackError,
    unavailable: &std::collections::BTreeMap<String, String>,
) -> stack::StackError {
    if let stack::Problem::UnknownPlugin(plugin) = &e.problem {
        if let Some(reason) = unavailable.get(plugin) {
            e.problem = stack::Problem::PluginUnavailable {
                plugin: plugin.clone(),
                reason: reason.clone(),
            };
        }
    }
    e
}

/// Runs store calls off the async worker threads.
async fn on_store<T, F>(store: &Store, f: F) -> Result<T, ServiceError>
where
    F: FnOnce(&dyn StateStore) -> Result<T, ServiceError> + Send + 'static,
    T: Send + 'static,
{
    let store = store.clone();
    tokio::task::spawn_blocking(move || f(store.as_ref())).await?
}

impl Service {
    /// A service over `store`, providing plugins from `plugins`.
    pub fn new(store: Store, plugins: PluginPool, config: ServiceConfig) -> Service {
        Service {
            store,
            plugins,
            config,
        }
    }

    /// The state store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The plugins.
    pub fn plugins(&self) -> &PluginPool {
        &self.plugins
    }

    /// How commands run.
    pub fn config(&self) -> &ServiceConfig {
        &self.config
    }

    /// The outputs stack `name` recorded (see [`outputs`]); `None` when it
    /// never recorded any.
    pub async fn outputs(
        &self,
        name: &str,
    ) -> Result<Option<orrery_schema::PropertyMap>, ServiceError> {
        let name = name.to_owned();
        on_store(&self.store, move |s| Ok(s.outputs(&name)?)).await
    }

    /// Stops the plugins this service started.
    pub async fn shutdown(&self) {
        self.plugins.stop().await;
    }

    /// Parses `document`, provides the plugins its targets name and
    /// validates it against their schemas. Parameters take their defaults.
    pub async fn prepare(&self, document: CommandDocument) -> Result<Prepared, ServiceError> {
        self.prepare_with(document, StackInputs::default()).await
    }

    /// [`Service::prepare`] with parameter values and, for `file()`, the
    /// directory files are read from.
    pub async fn prepare_with(
        &self,
        document: CommandDocument,
        inputs: StackInputs,
    ) -> Result<Prepared, ServiceError> {
        let mode = view::parse_mode(&document.mode)
            .ok_or_else(|| ServiceError::UnknownMode(document.mode.clone()))?;
        let (doc, store) = (document.clone(), self.store.clone());
        let stack = tokio::task::spawn_blocking(move || {
            inputs.parse_with_store(&doc, Some(store.as_ref()))
        })
        .await?
        .map_err(|e| ServiceError::InvalidStack(vec![e.locate(&document.text)]))?;
        let needs: Needs = stack
            .targets
            .iter()
            .map(|t| (t.plugin.clone(), t.name.clone()))
            .collect();
        let plugins = self.plugins.ensure(&needs).await?;
        refuse_held_elsewhere(&plugins, &stack.name, needs.iter().map(|(_, t)| t.as_str()))?;
        let catalog = plugins.catalog.clone();
        let unavailable = plugins.unavailable.clone();
        let text = document.text.clone();
        let (stack, graph) =
            tokio::task::spawn_blocking(move || match stack::validate(&stack, &catalog) {
                Ok(graph) => Ok((stack, graph)),
                Err(errors) => Err(ServiceError::InvalidStack(stack::locate_all(
                    errors
                        .into_iter()
                        .map(|e| with_reason(e, &unavailable))
                        .collect(),
                    &text,
                ))),
            })
            .await??;
        Ok(Prepared {
            stack,
            graph,
            mode,
            document,
            selection: Selection::default(),
            plugins,
        })
    }

    /// Reads every managed resource of `prepared`'s stack and records its
    /// drift (`orrery plan --refresh`); plan after this.
    pub async fn refresh(&self, prepared: &Prepared) -> Result<DriftReport, ServiceError> {
        refresh(
            &self.store,
            &prepared.plugins,
            &prepared.stack.name,
            &self.config.options,
        )
        .await
    }

    /// What applying `prepared` would change now.
    pub async fn plan(&self, prepared: &Prepared) -> Result<Plan, ServiceError> {
        let (stack, graph, catalog, mode) = (
            prepared.stack.clone(),
            prepared.graph.clone(),
            prepared.plugins.catalog.clone(),
            prepared.mode,
        );
        let selection = prepared.selection.clone();
        let digest = document_digest(&prepared.document.text, Some(mode));
        let imported = imports::read(
            &self.store,
            &prepared.plugins,
            &stack,
            &graph,
            &self.config.options,
        )
        .await?;
        on_store(&self.store, move |store| {
            let (mut stored, moved) = moved_records(&stack, store.resources(Some(&stack.name))?)?;
            stored.extend(imported.iter().cloned());
            let hasher = SecretHasher::new(store.secret_key()?);
            let mut plan = plan::plan_replacing(
                &stack,
                &graph,
                &catalog,
                &stored,
                mode,
                &hasher,
                &selection.replace,
            );
            plan.moved = moved;
            plan.imported = imported;
            let deps = select::dependencies(Some((&stack, &graph)), &stored);
            select::restrict(&mut plan, &deps, &selection)?;
            plan.protect = marks_of(&plan, &stack, &store.protected_labels(&stack.name)?);
            plan.outputs =
                outputs::changes(&stack, &stored, store.outputs(&stack.name)?.as_ref(), &plan);
            plan.basis = plan_basis(&digest, &selection, &stored);
            plan.secrets = plan::secrets_of(&stack, &catalog, &hasher);
            Ok(plan)
        })
        .await
    }

    /// Takes the command an apply of `prepared` goes on with (the stack's
    /// interrupted command, or a new one as `new_id`) and holds its lease.
    /// `principal` (who asks) is recorded as the command's in the audit.
    pub async fn begin_apply(
        &self,
        prepared: Prepared,
        new_id: &str,
        principal: Option<&str>,
    ) -> Result<Command, ServiceError> {
        let Prepared {
            stack,
            graph,
            mode,
            document,
            selection,
            plugins,
        } = prepared;
        let digest = document_digest(&document.text, Some(mode));
        // Resumed from the document alone, an apply must mean the same:
        // not when parameters took values from the caller or files were
        // read, and never when it holds secrets.
        let record = (!plan::declares_secrets(&stack, &plugins.catalog) && !stack.supplied)
            .then_some(CommandDocument {
                selection: selection.clone(),
                ..document
            });
        let mut command = self
            .begin(
                CommandKind::Apply,
                stack,
                graph,
                Some(mode),
                record,
                plugins,
                new_id,
            )
            .await?
            .with_selection(selection);
        command.document_digest = digest;
        self.record_principal(&command, principal).await?;
        Ok(command)
    }

    /// Records who runs `command` (the first one recorded stays).
    async fn record_principal(
        &self,
        command: &Command,
        principal: Option<&str>,
    ) -> Result<(), ServiceError> {
        let Some(principal) = principal else {
            return Ok(());
        };
        let (id, principal) = (command.id().to_owned(), principal.to_owned());
        tracing::info!(command = %id, stack = %command.stack().name, kind = command.kind().name(),
            %principal, "command begun");
        on_store(&self.store, move |s| {
            Ok(s.put_command_principal(&id, &principal)?)
        })
        .await
    }

    /// Takes the command a destroy of stack `name` goes on with and holds
    /// its lease. Targets come from `document` when given (a destroy needs
    /// their configuration), otherwise from the store.
    pub async fn begin_destroy(
        &self,
        name: &str,
        document: Option<Stack>,
        new_id: &str,
        principal: Option<&str>,
    ) -> Result<Command, ServiceError> {
        let owned = name.to_owned();
        let (stored, recorded_targets) = on_store(&self.store, move |store| {
            Ok((store.resources(Some(&owned))?, store.targets(&owned)?))
        })
        .await?;
        if document.is_none() && stored.is_empty() && recorded_targets.is_empty() {
            return Err(ServiceError::UnknownStack(name.to_owned()));
        }
        // The document says which of its resources are protected; the
        // records say it of the others (`Command::plan`).
        let protected = document.as_ref().map(protected_labels).unwrap_or_default();
        let declared = document.as_ref().map(declared_labels).unwrap_or_default();
        let stack = Stack {
            name: name.to_owned(),
            source: String::new(),
            targets: document.map_or(recorded_targets, |d| d.targets),
            ..Stack::default()
        };
        let needs: Needs = stored
            .iter()
            .map(|s| (s.plugin.clone(), s.target.clone()))
            .collect();
        let plugins = self.plugins.ensure(&needs).await?;
        refuse_held_elsewhere(&plugins, name, needs.iter().map(|(_, t)| t.as_str()))?;
        let mut command = self
            .begin(
                CommandKind::Destroy,
                stack,
                Graph::default(),
                None,
                None,
                plugins,
                new_id,
            )
            .await?;
        command.protected = protected;
        command.declared = declared;
        self.record_principal(&command, principal).await?;
        Ok(command)
    }

    /// Takes over `head`, a command a stopped primary left `running`: an
    /// apply from the document recorded when it started, a destroy from the
    /// recorded targets. `None` when it is not this primary's to resume
    /// (another holds its lease, or a newer command of its stack began).
    pub async fn begin_resume(
        &self,
        head: &CommandHead,
        new_id: &str,
    ) -> Result<Option<Command>, ServiceError> {
        let not_resumable = |reason: String| ServiceError::NotResumable {
            command_id: head.id.clone(),
            reason,
        };
        let begun = match CommandKind::parse(&head.kind) {
            Some(CommandKind::Apply) => {
                let id = head.id.clone();
                let document = on_store(&self.store, move |s| Ok(s.command_document(&id)?))
                    .await?
                    .ok_or_else(|| {
                        not_resumable(format!(
                            "its document was not recorded (it gives write-only or opaque values, which are never stored, or an older release ran it); applying the document of stack `{}` again resumes it",
                            head.stack
                        ))
                    })?;
                if document.engine != self.config.engine.name() {
                    return Err(not_resumable(format!(
                        "it reached its plugins through `{}`, not as this primary does; a primary that reaches them so resumes it",
                        document.engine
                    )));
                }
                // Resumed only as recorded: a mode this release does not
                // know is refused here, never defaulted (the default,
                // `reconcile`, deletes what the document does not name).
                if view::parse_mode(&document.mode).is_none() {
                    return Err(not_resumable(format!(
                        "its recorded mode `{}` is not one this release knows (`reconcile` or `patch`), so it is not resumed; applying the document of stack `{}` again goes on with it",
                        document.mode, head.stack
                    )));
                }
                // The subset it ran (`--target`…) is what it goes on with.
                let selection = document.selection.clone();
                let mut prepared = self.prepare(document).await?;
                prepared.selection = selection;
                if prepared.stack.name != head.stack {
                    return Err(not_resumable(format!(
                        "its recorded document is of stack `{}`, not `{}`",
                        prepared.stack.name, head.stack
                    )));
                }
                self.begin_apply(prepared, new_id, head.principal.as_deref())
                    .await
            }
            Some(CommandKind::Destroy) => {
                self.begin_destroy(&head.stack, None, new_id, head.principal.as_deref())
                    .await
            }
            None => return Err(not_resumable(format!("unknown kind `{}`", head.kind))),
        };
        match begun {
            Ok(command) if command.claim == Claim::Interrupted(head.id.clone()) => {
                Ok(Some(command))
            }
            // A newer command of the stack began since the listing.
            Ok(_) => Ok(None),
            // Run (or being resumed) by another primary: its business.
            Err(ServiceError::LeaseHeld(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn begin(
        &self,
        kind: CommandKind,
        stack: Stack,
        graph: Graph,
        mode: Option<Mode>,
        document: Option<CommandDocument>,
        plugins: Plugins,
        new_id: &str,
    ) -> Result<Command, ServiceError> {
        let config = self.config.lease.clone();
        let (name, id) = (stack.name.clone(), new_id.to_owned());
        let (claim, hasher) = on_store(&self.store, move |store| {
            let claim = lease::claim(store, &name, &id, &config)?;
            Ok((claim, SecretHasher::new(store.secret_key()?)))
        })
        .await?;
        let keeper = Keeper::start(self.store.clone(), claim.command_id(), &self.config.lease);
        let stack_keeper = Keeper::start(
            self.store.clone(),
            &lease::stack_key(&stack.name),
            &self.config.lease,
        );
        let protected = protected_labels(&stack);
        Ok(Command {
            protected,
            declared: declared_labels(&stack),
            allow_protected: false,
            kind,
            claim,
            keeper,
            stack_keeper,
            stack,
            graph,
            mode,
            document,
            plugins,
            hasher,
            selection: Selection::default(),
            store: self.store.clone(),
            options: self.config.options.clone(),
            document_digest: String::new(),
        })
    }
}

/// A digest of a document as planned: its text and mode.
fn document_digest(text: &str, mode: Option<Mode>) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(mode.map_or("destroy", view::mode_name).as_bytes());
    hash.update([0]);
    hash.update(text.as_bytes());
    hex(&hash.finalize())
}

/// What a plan was made against ([`Plan::basis`]): the document's digest,
/// the selection, and the stack's records it was planned against (each
/// one's label, version and native id: any write to a record changes its
/// version).
fn plan_basis(document: &str, selection: &Selection, stored: &[StoredResource]) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(document.as_bytes());
    hash.update([0]);
    hash.update(serde_json::to_vec(selection).unwrap_or_default());
    let mut records: Vec<(&str, i64, &str)> = stored
        .iter()
        .map(|s| (s.label.as_str(), s.version, s.native_id.as_str()))
        .collect();
    records.sort_unstable();
    for (label, version, native_id) in records {
        hash.update([0]);
        hash.update(label.as_bytes());
        hash.update([0]);
        hash.update(version.to_le_bytes());
        hash.update(native_id.as_bytes());
    }
    hex(&hash.finalize())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A command whose lease this primary holds: settle what an interrupted
/// run left, plan, then execute. Dropping it releases the lease.
pub struct Command {
    kind: CommandKind,
    claim: Claim,
    keeper: Keeper,
    /// The stack's own lease ([`lease::stack_key`]), held until the end.
    stack_keeper: Keeper,
    stack: Stack,
    graph: Graph,
    mode: Option<Mode>,
    document: Option<CommandDocument>,
    plugins: Plugins,
    hasher: SecretHasher,
    selection: Selection,
    store: Store,
    options: Options,
    /// Labels of resources the document marks `protect: true`.
    protected: BTreeSet<String>,
    /// Labels of every resource the document declares: whether they are
    /// protected is the document's to say, of the others the records'.
    declared: BTreeSet<String>,
    allow_protected: bool,
    /// [`document_digest`] of an apply's document (empty for a destroy).
    document_digest: String,
}

/// A command's plan with the records it was made against.
pub struct Planned {
    /// What will change.
    pub plan: Plan,
    /// The stack's records it was planned against.
    pub stored: Vec<StoredResource>,
    /// The labels of those records marked protected.
    pub recorded_protected: BTreeSet<String>,
}

impl Command {
    /// Its id (the interrupted command's when it goes on with one).
    pub fn id(&self) -> &str {
        self.claim.command_id()
    }

    /// Apply or destroy.
    pub fn kind(&self) -> CommandKind {
        self.kind
    }

    /// The stack.
    pub fn stack(&self) -> &Stack {
        &self.stack
    }

    /// Restricts it to `selection` (`--target`, `--exclude`, `--replace`):
    /// for a destroy, a target brings what depends on it and an exclude
    /// keeps what it depends on.
    pub fn with_selection(mut self, selection: Selection) -> Command {
        self.selection = selection;
        self
    }

    /// Whether it goes on with a command a stopped primary left running.
    pub fn resumes(&self) -> bool {
        matches!(self.claim, Claim::Interrupted(_))
    }

    fn executor(&self) -> Executor {
        Executor::new(
            self.plugins.transport.clone(),
            self.store.clone(),
            self.plugins.catalog.clone(),
            self.hasher.clone(),
            self.options.clone(),
            self.plugins.rates.clone(),
        )
    }

    /// Settles what the interrupted command it goes on with left ambiguous;
    /// plan after this.
    ///
    /// A new command settles what the stack's previous command left in
    /// flight when it was canceled by force, the same way: by reading.
    pub async fn settle(&self) -> Result<Option<Resumed>, ServiceError> {
        let resumed = self.executor().resume(&self.stack, &self.graph).await?;
        if let Some(r) = &resumed {
            tracing::info!(command = %r.command_id, stack = %self.stack.name, settled = r.resolved,
                adopted = r.adopted.len(), to_create_again = r.not_found.len(), still_landing = r.resent.len(),
                canceled = r.canceled,
                "settling what an interrupted or force-canceled command left in flight");
        }
        Ok(resumed)
    }

    /// Reads every managed resource of its stack and records its drift
    /// (`orrery apply --refresh`), under its lease: after [`Command::settle`],
    /// before [`Command::plan`].
    pub async fn refresh(&self) -> Result<DriftReport, ServiceError> {
        refresh(&self.store, &self.plugins, &self.stack.name, &self.options).await
    }

    /// What it will change, against the records as they are now.
    pub async fn plan(&self) -> Result<Planned, ServiceError> {
        let (stack, graph, catalog, mode, hasher) = (
            self.stack.clone(),
            self.graph.clone(),
            self.plugins.catalog.clone(),
            self.mode,
            self.hasher.clone(),
        );
        let selection = self.selection.clone();
        let digest = self.document_digest.clone();
        let imported = match mode {
            Some(_) => {
                imports::read(&self.store, &self.plugins, &stack, &graph, &self.options).await?
            }
            None => Vec::new(),
        };
        let planned = on_store(&self.store, move |store| {
            let stored = store.resources(Some(&stack.name))?;
            let (mut stored, moved) = match mode {
                Some(_) => moved_records(&stack, stored)?,
                None => (stored, Vec::new()),
            };
            stored.extend(imported.iter().cloned());
            let (mut plan, deps) = match mode {
                Some(mode) => (
                    plan::Plan {
                        moved,
                        imported,
                        ..plan::plan_replacing(
                            &stack,
                            &graph,
                            &catalog,
                            &stored,
                            mode,
                            &hasher,
                            &selection.replace,
                        )
                    },
                    select::dependencies(Some((&stack, &graph)), &stored),
                ),
                None => (
                    plan::plan_destroy(&stored),
                    select::reversed(&select::dependencies(None, &stored)),
                ),
            };
            select::restrict(&mut plan, &deps, &selection)?;
            plan.basis = plan_basis(&digest, &selection, &stored);
            let recorded_protected = store.protected_labels(&stack.name)?;
            if mode.is_some() {
                plan.secrets = plan::secrets_of(&stack, &catalog, &hasher);
                plan.protect = marks_of(&plan, &stack, &recorded_protected);
                // Outputs are recorded after every apply: one the document
                // adds, removes or changes is a change of its own.
                plan.outputs =
                    outputs::changes(&stack, &stored, store.outputs(&stack.name)?.as_ref(), &plan);
            }
            Ok(Planned {
                plan,
                stored,
                recorded_protected,
            })
        })
        .await?;
        // A resource the document no longer declares stays protected as
        // recorded: dropping its entry does not delete it unless allowed.
        let protected: BTreeSet<String> = planned
            .recorded_protected
            .iter()
            .filter(|l| !self.declared.contains(*l))
            .chain(&self.protected)
            .cloned()
            .collect();
        let refused = plan::protected_changes(&planned.plan, &protected);
        if !refused.is_empty() && !self.allow_protected {
            return Err(ServiceError::Protected(refused));
        }
        Ok(planned)
    }

    /// Lets this command delete or replace resources marked `protect: true`.
    pub fn allow_protected(&mut self, allow: bool) {
        self.allow_protected = allow;
    }

    /// The view of `plan` for this command.
    pub fn view(&self, plan: &Plan) -> view::PlanView {
        view::PlanView::new(&self.stack.name, self.mode, plan)
    }

    /// Runs `planned`, recording the document first (for an apply that
    /// gives no secrets), emitting its events into `events`; `cancel` stops
    /// it as a [`Stop`] says (losing the lease stops new operations).
    /// Releases the lease at the end.
    pub async fn execute(
        self,
        planned: &Planned,
        events: Option<EventSink>,
        cancel: watch::Receiver<Stop>,
    ) -> Result<Report, ServiceError> {
        let result = self.execute_inner(planned, events.clone(), cancel).await;
        if let (Err(e), Some(events)) = (&result, events) {
            events.emit(error_event(e.to_string()));
        }
        result
    }

    async fn execute_inner(
        self,
        planned: &Planned,
        events: Option<EventSink>,
        cancel: watch::Receiver<Stop>,
    ) -> Result<Report, ServiceError> {
        if let Some(document) = self.document.clone() {
            let id = self.id().to_owned();
            on_store(&self.store, move |s| {
                Ok(s.put_command_document(&id, &document)?)
            })
            .await?;
        }
        if !planned.plan.moved.is_empty() {
            // Re-addressed before any operation, in one write, with no
            // plugin call: what follows was planned against the moved records.
            let (name, moves) = (self.stack.name.clone(), planned.plan.moved.clone());
            on_store(&self.store, move |s| Ok(s.move_resources(&name, &moves)?)).await?;
            tracing::info!(command = %self.id(), stack = %self.stack.name,
                moved = planned.plan.moved.len(), "resources re-addressed");
        }
        if !planned.plan.imported.is_empty() {
            // Adopted before any operation: what follows was planned
            // against the records read.
            let (stack, imported) = (self.stack.clone(), planned.plan.imported.clone());
            on_store(&self.store, move |s| imports::write(s, &stack, &imported)).await?;
            tracing::info!(command = %self.id(), stack = %self.stack.name,
                imported = planned.plan.imported.len(), "resources adopted");
        }
        // The marks the document changes, before any operation, so that
        // the records say what the document says even if the run stops.
        mark_protected(&self.store, &self.stack.name, planned.plan.protect.clone()).await?;
        let mut executor = self
            .executor()
            .with_cancel(lease::cancel_on_loss(cancel, self.keeper.lost()));
        if let Some(events) = events {
            executor = executor.with_events(events);
        }
        tracing::info!(command = %self.id(), stack = %self.stack.name, kind = self.kind.name(),
            "command started");
        let report = executor
            .run(
                self.id(),
                self.kind.name(),
                &self.stack.name,
                Some((&self.stack, &self.graph)),
                &planned.plan,
                &planned.stored,
            )
            .await;
        drop(executor);
        let id = self.id().to_owned();
        self.keeper.release();
        self.stack_keeper.release();
        if let Err(e) = &report {
            // Not finished `failed`: what was in flight is unsettled, and
            // a terminal state over it would never be resumed (the next
            // apply would create those resources twice). Left `running`,
            // as a crash leaves it, the command is resumed once the store
            // answers (the server retries at once; `orrery apply` again).
            tracing::warn!(command = %id, error = %e,
                "the state store failed mid-command; it stays `running` to be resumed");
        }
        let report = report?;
        // Every protected resource of the document again: the ones created
        // now, and any a replace recorded anew (a write that leaves the
        // mark as it is costs nothing).
        let protected = marks_of(&planned.plan, &self.stack, &BTreeSet::new());
        mark_protected(&self.store, &self.stack.name, protected).await?;
        // Outputs from what is recorded now; a destroy leaves none.
        let (stack, kind) = (self.stack.clone(), self.kind);
        on_store(&self.store, move |s| {
            let values = match kind {
                CommandKind::Apply => outputs::compute(&stack, &s.resources(Some(&stack.name))?),
                CommandKind::Destroy => Default::default(),
            };
            Ok(s.put_outputs(&stack.name, &values)?)
        })
        .await?;
        tracing::info!(command = %report.command_id, ok = report.ok(), succeeded = report.succeeded,
            failed = report.failed.len(), elapsed_ms = report.elapsed_ms, "command finished");
        Ok(report)
    }
}

/// The event ending a run that could not go on: `message` says why.
pub fn error_event(message: String) -> orrery_core::events::EventBody {
    orrery_core::events::EventBody::Finished(orrery_core::events::FinishedEvent {
        status: "error".into(),
        message: Some(message),
        ..Default::default()
    })
}

/// A shared service.
pub type SharedService = Arc<Service>;

/// [`ServiceError::TargetRefused`] when a satellite holding one of
/// `targets` allows other stacks only: refused before planning, as the
/// satellite would refuse each operation.
fn refuse_held_elsewhere<'a>(
    plugins: &'a Plugins,
    stack: &str,
    targets: impl IntoIterator<Item = &'a str>,
) -> Result<(), ServiceError> {
    match plugins.refused_target(stack, targets) {
        None => Ok(()),
        Some((target, allowed)) => Err(ServiceError::TargetRefused {
            target: target.to_owned(),
            stack: stack.to_owned(),
            allowed: allowed.to_vec(),
        }),
    }
}
