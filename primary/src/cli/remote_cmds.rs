//! The commands in remote mode (`--primary URL`), and the ones that read
//! commands in both modes: `cancel`, `history`, `status`. They render with
//! the local mode's functions, from the API's JSON and command events.

use std::process::ExitCode;

use anyhow::{bail, Context};
use serde_json::{json, Value};
use tokio::signal::unix::Signal;

use super::remote::{Remote, RemoteArgs};
use super::saved_plan::SavedPlan;
use super::stack_cmds::{
    confirm, confirm_typed, finish, print_plan_text, read_document, ApplyArgs, Common, DestroyArgs,
    PlanArgs, Printer, SelectArgs,
};
use super::vars::VarArgs;
use super::Output;
use orrery_core::events::EventBody;
use orrery_primary::http::utc;
use orrery_primary::plan::Mode;
use orrery_primary::service::Engine;
use orrery_primary::stack::Supplied;
use orrery_primary::state::CommandFilter;

/// The request body of a plan or apply of `file`, with the parameter
/// values `--var`, `--var-file` and `ORRERY_VAR_*` give, as local mode takes
/// them (text is typed by the parameter's declaration on the primary).
fn stack_request(
    file: &std::path::Path,
    mode: Mode,
    select: &SelectArgs,
    vars: &VarArgs,
) -> anyhow::Result<Value> {
    Ok(evaluated_request(file, mode, select, vars)?.0)
}

/// [`stack_request`], with the document as evaluated here (`None` when it
/// could not be, e.g. it reads another stack's outputs).
fn evaluated_request(
    file: &std::path::Path,
    mode: Mode,
    select: &SelectArgs,
    vars: &VarArgs,
) -> anyhow::Result<(Value, Option<orrery_primary::stack::Stack>)> {
    let doc = read_document(file, mode, Engine::Embedded)?;
    let inputs = vars.inputs(file)?;
    let (mut typed, mut texts) = (serde_json::Map::new(), serde_json::Map::new());
    // `--var`/`--var-file` win over the environment, as in local mode.
    for (name, supplied) in inputs.env.clone().into_iter().chain(inputs.vars.clone()) {
        typed.remove(&name);
        texts.remove(&name);
        match supplied {
            Supplied::Text(text) => texts.insert(name, json!(text)),
            Supplied::Value(value) => typed.insert(name, serde_json::to_value(value)?),
        };
    }
    // What the document reads (module sources, `file()`), found by
    // evaluating it here: the primary reads none of its own files. An error
    // here (e.g. another stack's outputs, which only the primary can read)
    // stops the search; the primary then names any file still missing.
    let read = std::cell::RefCell::new(std::collections::BTreeMap::new());
    let recording = |path: &str| {
        let text = inputs.read(path)?;
        read.borrow_mut().insert(path.to_owned(), text.clone());
        Ok(text)
    };
    let evaluated = orrery_primary::stack::parse_with_inputs(
        &doc.source,
        &doc.text,
        &doc.stack_dir,
        &orrery_primary::stack::Inputs {
            vars: inputs.vars.clone(),
            env: inputs.env.clone(),
            files: &recording,
            stacks: None,
        },
    );
    let files = read.into_inner();
    let mut body = select.json();
    body["files"] = json!(files);
    body["vars"] = Value::Object(typed);
    body["var_texts"] = Value::Object(texts);
    body["document"] = json!(doc.text);
    body["mode"] = json!(doc.mode);
    body["source"] = json!(doc.source);
    body["stack_dir"] = json!(doc.stack_dir);
    Ok((body, evaluated.ok()))
}

fn show_plan(plan: &Value, output: Output) {
    if output == Output::Ndjson && plan["has_changes"] == true {
        return;
    }
    if output.is_json() {
        println!("{plan}");
    } else {
        print_plan_text(plan);
    }
}

pub async fn plan(remote: &Remote, args: &PlanArgs) -> anyhow::Result<ExitCode> {
    let (mut body, evaluated) =
        evaluated_request(&args.file, args.mode.into(), &args.select, &args.vars)?;
    body["refresh"] = json!(args.refresh);
    let plan = remote.post("/v1/stacks/plan", &body)?;
    if let Some(out) = &args.out {
        save(out, &body, evaluated.as_ref(), &plan)?;
    }
    show_plan(&plan, args.common.output);
    if let (Some(out), Output::Text) = (&args.out, args.common.output) {
        super::stack_cmds::print_saved(out);
    }
    Ok(if plan["has_changes"] == true {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Writes the plan the primary answered to `out` (`orrery plan --out`),
/// with what `body` (the plan request) gave.
fn save(
    out: &std::path::Path,
    body: &Value,
    evaluated: Option<&orrery_primary::stack::Stack>,
    plan: &Value,
) -> anyhow::Result<()> {
    let document = orrery_primary::state::CommandDocument {
        engine: Engine::Embedded.name().to_owned(),
        mode: body["mode"].as_str().unwrap_or_default().to_owned(),
        source: body["source"].as_str().unwrap_or_default().to_owned(),
        stack_dir: body["stack_dir"].as_str().unwrap_or_default().to_owned(),
        text: body["document"].as_str().unwrap_or_default().to_owned(),
        selection: Default::default(),
    };
    let mut given = std::collections::BTreeMap::new();
    for (name, value) in body["vars"].as_object().into_iter().flatten() {
        given.insert(
            name.clone(),
            Supplied::Value(serde_json::from_value(value.clone())?),
        );
    }
    for (name, text) in body["var_texts"].as_object().into_iter().flatten() {
        given.insert(
            name.clone(),
            Supplied::Text(text.as_str().unwrap_or_default().to_owned()),
        );
    }
    let files = serde_json::from_value(body["files"].clone()).unwrap_or_default();
    let selection = serde_json::from_value(body.clone()).unwrap_or_default();
    // The secrets' values as given and as the document here evaluated them
    // (a default), which the file must not hold.
    let secret_names: Vec<String> =
        serde_json::from_value(plan["secrets"]["parameters"].clone()).unwrap_or_default();
    let mut secrets: Vec<String> = secret_names
        .iter()
        .filter_map(|n| match given.get(n) {
            Some(Supplied::Text(text)) => Some(text.clone()),
            Some(Supplied::Value(orrery_schema::Value::String(text))) => Some(text.clone()),
            _ => None,
        })
        .collect();
    secrets.extend(
        evaluated
            .map(super::stack_cmds::secret_texts)
            .unwrap_or_default(),
    );
    let saved = SavedPlan::new(&document, files, given, selection, plan.clone())?;
    saved.write(out, &secrets)?;
    Ok(())
}

/// `orrery apply FILE --primary URL` of a saved plan: the primary plans it
/// again under the stack's lease and runs it only when that plan's hash is
/// the saved one.
pub async fn apply_saved(
    remote: &Remote,
    args: &ApplyArgs,
    saved: &SavedPlan,
) -> anyhow::Result<ExitCode> {
    let inputs = saved.inputs(args.vars.inputs(&args.file)?)?;
    let (mut typed, mut texts) = (serde_json::Map::new(), serde_json::Map::new());
    // The API takes environment values as any other (a secret's only).
    for (name, supplied) in inputs.env.into_iter().chain(inputs.vars) {
        match supplied {
            Supplied::Text(text) => texts.insert(name, json!(text)),
            Supplied::Value(value) => typed.insert(name, serde_json::to_value(value)?),
        };
    }
    let mut body = json!({
        "document": saved.document,
        "mode": saved.mode,
        "source": saved.source,
        "stack_dir": saved.stack_dir,
        "files": saved.files,
        "vars": typed,
        "var_texts": texts,
        "target": saved.selection.target,
        "exclude": saved.selection.exclude,
        "replace": saved.selection.replace,
    });
    body["confirmed_plan"] = serde_json::to_value(saved.confirmed()?)?;
    // Saving it was the confirmation: the plan is shown as the primary
    // made it again.
    apply_confirmed(remote, &body, args, true).await
}

pub async fn apply(remote: &Remote, args: &ApplyArgs) -> anyhow::Result<ExitCode> {
    let output = args.common.output;
    let mut body = stack_request(&args.file, args.mode.into(), &args.select, &args.vars)?;
    // The apply reads again under its lease: what it runs is planned
    // against what is there then.
    body["refresh"] = json!(args.refresh);
    let plan = remote.post("/v1/stacks/plan", &body)?;
    show_plan(&plan, output);
    if args.dry_run || plan["has_changes"] != true {
        return Ok(ExitCode::SUCCESS);
    }
    if !args.yes && !confirm("Apply these changes?")? {
        println!("Nothing changed.");
        return Ok(ExitCode::SUCCESS);
    }
    // Exactly the plan shown (and confirmed) runs: the primary plans again
    // under the stack's lease and refuses when that plan differs.
    body["confirmed_plan"] = super::saved_plan::confirmed_json(&plan);
    apply_confirmed(remote, &body, args, false).await
}

/// Asks the primary to apply `body`, whose `confirmed_plan` it must run
/// exactly, and follows the command; a plan that moved since is refused
/// (409 `stale_plan`) naming what changed, exit 1. `show` prints the plan
/// the primary accepted.
async fn apply_confirmed(
    remote: &Remote,
    body: &serde_json::Value,
    args: &ApplyArgs,
    show: bool,
) -> anyhow::Result<ExitCode> {
    let output = args.common.output;
    let sigint = listen_for_ctrl_c()?;
    let (status, accepted) = remote.post_status("/v1/stacks/apply", body)?;
    if status == 409 && accepted["stale_plan"] == true {
        let changed = accepted["changed"].as_array().into_iter().flatten();
        super::stack_cmds::print_stale(changed.map(|c| c.as_str().unwrap_or_default()));
        return Ok(ExitCode::from(1));
    }
    if !(200..300).contains(&status) {
        return Err(super::remote::api_error(status, &accepted));
    }
    if show {
        show_plan(&accepted["plan"], output);
    }
    let id = command_id(&accepted)?;
    follow(remote, &id, output, args.common.verbose, sigint).await
}

pub async fn destroy(remote: &Remote, name: &str, args: &DestroyArgs) -> anyhow::Result<ExitCode> {
    // The primary plans a destroy when it starts it: the question comes first.
    let whole = args.select.target.is_empty() && args.select.exclude.is_empty();
    let confirmed = || {
        if whole {
            confirm_typed(name)
        } else {
            confirm(&format!(
                "Destroy the selected resources of stack `{name}`?"
            ))
        }
    };
    if !args.yes && !confirmed()? {
        println!("Nothing changed.");
        return Ok(ExitCode::SUCCESS);
    }
    let sigint = listen_for_ctrl_c()?;
    let accepted = remote.post(
        &format!("/v1/stacks/{}/destroy", encode(name)),
        &args.select.json(),
    )?;
    show_plan(&accepted["plan"], args.common.output);
    if accepted["plan"]["has_changes"] != true && accepted["resumed"] != true {
        return Ok(ExitCode::SUCCESS);
    }
    let id = command_id(&accepted)?;
    follow(remote, &id, args.common.output, args.common.verbose, sigint).await
}

fn command_id(accepted: &Value) -> anyhow::Result<String> {
    accepted["command_id"]
        .as_str()
        .map(str::to_owned)
        .context("the primary's answer names no command")
}

/// A path segment, percent-encoded.
pub fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Takes Ctrl-C over from here on, before a command is submitted: from
/// then on it cancels the command instead of ending the process. One
/// listener for the whole wait, so a Ctrl-C between two events counts.
pub(super) fn listen_for_ctrl_c() -> anyhow::Result<Signal> {
    Ok(tokio::signal::unix::signal(
        tokio::signal::unix::SignalKind::interrupt(),
    )?)
}

/// Follows command `id` to its end, printing as local mode does. Ctrl-C
/// asks the primary to cancel it; a second Ctrl-C detaches.
pub async fn follow(
    remote: &Remote,
    id: &str,
    output: Output,
    verbose: bool,
    mut sigint: Signal,
) -> anyhow::Result<ExitCode> {
    let mut printer = Printer::new(output, verbose, 0);
    let mut events = remote.follow(id);
    let mut interrupts = 0;
    loop {
        tokio::select! {
            event = events.recv() => match event {
                Some(Ok(e)) => {
                    printer.event(&e);
                    if matches!(e.body, EventBody::Finished(_)) {
                        break;
                    }
                }
                Some(Err(e)) => {
                    printer.done();
                    return Err(e.context(format!("following command {id}")));
                }
                None => {
                    printer.done();
                    bail!("the primary's event stream of command {id} ended before the command did; `orrery status --follow {id} --primary …` reattaches");
                }
            },
            _ = sigint.recv() => {
                interrupts += 1;
                if interrupts == 1 {
                    let (status, answer) = remote.post_status(&format!("/v1/commands/{}/cancel", encode(id)), &json!({}))?;
                    if status == 202 {
                        eprintln!("canceling: no new operations start; in-flight ones finish (Ctrl-C again to detach, leaving the command to finish; `orrery cancel --force {id}` stops waiting for them)");
                    } else {
                        eprintln!("cannot cancel: {}", answer["error"].as_str().unwrap_or("no reason given"));
                    }
                } else {
                    printer.done();
                    eprintln!("detached; command {id} goes on. Reattach with `orrery status --follow {id} --primary …`.");
                    return Ok(ExitCode::from(1));
                }
            }
        }
    }
    printer.done();
    let report = printer
        .report(id)
        .context("the command's events ended without a summary")?;
    let code = finish(report, printer.finished(), output)?;
    printer.breakdown();
    Ok(code)
}

#[derive(clap::Args, Debug)]
pub struct StatusArgs {
    /// The command's id; the latest command when absent.
    pub command: Option<String>,
    /// Follow the command until it ends, as `apply` does (reattaches to a
    /// command started elsewhere; Ctrl-C cancels, twice detaches).
    #[arg(long)]
    pub follow: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

/// The latest command's id, remotely.
fn latest(remote: &Remote, stack: Option<&str>) -> anyhow::Result<Option<Value>> {
    let query = stack
        .map(|s| format!("&stack={}", encode(s)))
        .unwrap_or_default();
    let answer = remote.get(&format!("/v1/commands?limit=1{query}"))?;
    Ok(answer["commands"]
        .as_array()
        .and_then(|c| c.first())
        .cloned())
}

pub async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let output = args.common.output;
    let Some(remote) = args.remote.remote(&args.common.data_dir)? else {
        if args.follow {
            bail!("--follow needs --primary: a local command is followed in the terminal that runs it");
        }
        let store = args.common.open_store()?;
        let Some(command) = store.command(args.command.as_deref())? else {
            bail!("no such command{}", named(args.command.as_deref()));
        };
        return print_command(&serde_json::to_value(&command)?, output);
    };
    let id = match args.command {
        Some(id) => id,
        None => match latest(&remote, None)? {
            Some(head) => head["id"].as_str().unwrap_or_default().to_owned(),
            None => bail!("no such command"),
        },
    };
    if args.follow {
        return follow(
            &remote,
            &id,
            output,
            args.common.verbose,
            listen_for_ctrl_c()?,
        )
        .await;
    }
    let mut command = whole_command(&remote, &id)?;
    if let Some(map) = command.as_object_mut() {
        // What the server adds to the record; local mode has none of it.
        for key in ["active", "report", "error"] {
            map.remove(key);
        }
    }
    print_command(&command, output)
}

/// The operations of one page of `GET /v1/commands/{id}` (the server's
/// default, as `orrery inventory` reads resources).
const PAGE: u32 = 1000;

/// Command `id` with every operation: `GET /v1/commands/{id}` page after
/// page, following `next_cursor` (the server pages operations by default).
fn whole_command(remote: &Remote, id: &str) -> anyhow::Result<Value> {
    let path = format!("/v1/commands/{}?limit={PAGE}", encode(id));
    let mut command = remote.get(&path)?;
    let mut cursor = take_cursor(&mut command);
    while let Some(at) = cursor {
        let mut page = remote.get(&format!("{path}&cursor={}", encode(&at)))?;
        let next = take_cursor(&mut page);
        if let (Some(ops), Some(more)) = (
            command["operations"].as_array_mut(),
            page["operations"].as_array_mut(),
        ) {
            ops.append(more);
        }
        // A cursor that does not move would loop for ever.
        cursor = next.filter(|n| *n != at);
    }
    Ok(command)
}

/// Removes a page's `next_cursor`, returning it.
fn take_cursor(page: &mut Value) -> Option<String> {
    page.as_object_mut()?
        .remove("next_cursor")?
        .as_str()
        .map(str::to_owned)
}

fn named(id: Option<&str>) -> String {
    id.map(|c| format!(" `{c}`")).unwrap_or_default()
}

/// A command's record (as `GET /v1/commands/{id}` gives it).
fn print_command(command: &Value, output: Output) -> anyhow::Result<ExitCode> {
    let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
    if output.is_json() {
        println!("{command}");
    } else {
        println!(
            "command {} ({} of stack `{}`, by {}): {}",
            text(&command["id"]),
            text(&command["kind"]),
            text(&command["stack"]),
            command["principal"]
                .as_str()
                .unwrap_or("an unrecorded principal"),
            text(&command["status"])
        );
        for op in command["operations"].as_array().into_iter().flatten() {
            let err = match (op["error_code"].as_str(), op["message"].as_str()) {
                (Some(code), Some(m)) => format!(" {code}: {m}"),
                (Some(code), None) => format!(" {code}"),
                _ => String::new(),
            };
            println!(
                "  {:<8} {:<30} {:<18} attempts {}{err}",
                text(&op["operation"]),
                text(&op["label"]),
                text(&op["status"]),
                op["attempts"].as_i64().unwrap_or(0)
            );
        }
    }
    Ok(if command["status"] == "completed" {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

#[derive(clap::Args, Debug)]
pub struct CancelArgs {
    /// The command's id; the latest running command when absent.
    pub command: Option<String>,
    /// Stop waiting for the operations in flight: the command ends
    /// `canceled` at once, and they stay recorded without an outcome (as
    /// after a crash) for the next apply of the stack to settle by reading.
    #[arg(long)]
    pub force: bool,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

/// `orrery cancel`: asks the primary to stop a command gracefully (no new
/// operation starts; those in flight finish and are recorded), or with
/// `--force` at once (those in flight are settled by the next apply).
pub async fn cancel(args: CancelArgs) -> anyhow::Result<ExitCode> {
    let Some(remote) = args.remote.remote(&args.common.data_dir)? else {
        bail!("cancel needs --primary (or ORRERY_PRIMARY): a local command is canceled with Ctrl-C in the terminal that runs it");
    };
    let id = match args.command {
        Some(id) => id,
        None => {
            let answer = remote.get("/v1/commands?limit=20")?;
            let running = answer["commands"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|c| c["active"] == true);
            match running {
                Some(c) => c["id"].as_str().unwrap_or_default().to_owned(),
                None => bail!("no command is running on the primary"),
            }
        }
    };
    let answer = remote.post(
        &format!("/v1/commands/{}/cancel", encode(&id)),
        &json!({ "force": args.force }),
    )?;
    if args.common.output.is_json() {
        println!("{answer}");
    } else if args.force {
        println!("Canceling command {id} by force: no new operations start; those in flight are no longer waited for, and the next apply of the stack settles them by reading.");
    } else {
        println!("Canceling command {id}: no new operations start; in-flight ones finish.");
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(clap::Args, Debug)]
pub struct HistoryArgs {
    /// Only this stack's commands.
    #[arg(long)]
    pub stack: Option<String>,
    /// How many of the latest commands.
    #[arg(long, default_value_t = 20)]
    pub limit: usize,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

/// `orrery history`: the latest commands, newest first: who ran what, when,
/// for how long, with what outcome.
pub async fn history(args: HistoryArgs) -> anyhow::Result<ExitCode> {
    let rows = match args.remote.remote(&args.common.data_dir)? {
        Some(remote) => {
            let query = args
                .stack
                .as_deref()
                .map(|s| format!("&stack={}", encode(s)))
                .unwrap_or_default();
            let answer = remote.get(&format!("/v1/commands?limit={}{query}", args.limit))?;
            answer["commands"].as_array().cloned().unwrap_or_default()
        }
        None => local_history(&args)?,
    };
    if args.common.output.is_json() {
        println!("{}", json!({ "commands": rows }));
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<36}  {:<7}  {:<16}  {:<20}  {:<20}  {:>9}  {:<28}  OUTCOME",
        "COMMAND", "KIND", "STACK", "PRINCIPAL", "STARTED (UTC)", "DURATION", "OPERATIONS"
    );
    for row in &rows {
        println!("{}", history_line(row));
    }
    Ok(ExitCode::SUCCESS)
}

/// The rows `GET /v1/commands` gives, from the local store.
fn local_history(args: &HistoryArgs) -> anyhow::Result<Vec<Value>> {
    let store = args.common.open_store()?;
    let heads = store.commands(&CommandFilter {
        before: None,
        stack: args.stack.clone(),
        status: None,
        limit: args.limit.clamp(1, 200),
    })?;
    heads
        .iter()
        .map(|head| {
            let mut row = serde_json::to_value(head)?;
            row["operations"] = json!(store.operation_counts(&head.id)?);
            Ok(row)
        })
        .collect()
}

fn history_line(row: &Value) -> String {
    let text = |v: &Value| v.as_str().unwrap_or("-").to_owned();
    let started = row["started_ms"].as_i64();
    let duration = match (started, row["finished_ms"].as_i64()) {
        (Some(s), Some(f)) => format!("{:.1}s", (f - s).max(0) as f64 / 1000.0),
        _ => "-".into(),
    };
    let counts: Vec<String> = row["operations"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(status, n)| format!("{n} {status}"))
        .collect();
    format!(
        "{:<36}  {:<7}  {:<16}  {:<20}  {:<20}  {:>9}  {:<28}  {}",
        text(&row["id"]),
        text(&row["kind"]),
        text(&row["stack"]),
        text(&row["principal"]),
        started.map_or("-".into(), utc),
        duration,
        if counts.is_empty() {
            "-".into()
        } else {
            counts.join(", ")
        },
        text(&row["status"])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode("a b/c"), "a%20b%2Fc");
        assert_eq!(encode("stack-1.x_y~"), "stack-1.x_y~");
    }
}
