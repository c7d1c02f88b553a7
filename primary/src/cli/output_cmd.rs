//! `orrery output [NAME] [--stack S]`: the outputs a stack's last apply
//! recorded (`docs/stacks.md#outputs`).

use std::process::ExitCode;

use anyhow::bail;
use orrery_primary::service::outputs;
use orrery_schema::PropertyMap;

use super::remote::{Remote, RemoteArgs};
use super::remote_cmds::encode;
use super::stack_cmds::Common;
use super::Output;

#[derive(clap::Args, Debug)]
pub struct OutputArgs {
    /// One output's name; without it, every output.
    pub name: Option<String>,
    /// The stack (needed when the store holds more than one).
    #[arg(long)]
    pub stack: Option<String>,
    #[command(flatten)]
    pub remote: RemoteArgs,
    #[command(flatten)]
    pub common: Common,
}

pub fn output_cmd(args: OutputArgs) -> anyhow::Result<ExitCode> {
    let (stack, recorded) = match args.remote.remote(&args.common.data_dir)? {
        Some(remote) => remote_outputs(&remote, args.stack.as_deref())?,
        None => local_outputs(&args.common, args.stack.as_deref())?,
    };
    let json = args.common.output == Output::Json;
    match &args.name {
        Some(name) => {
            let Some(v) = recorded.get(name) else {
                bail!("stack `{stack}` has no output `{name}`");
            };
            if json {
                println!(
                    "{}",
                    serde_json::json!({"stack": stack, "name": name, "value": outputs::to_json(v)})
                );
            } else {
                println!("{}", outputs::to_text(v));
            }
        }
        None if json => println!(
            "{}",
            serde_json::json!({"stack": stack, "outputs": as_json(&recorded)})
        ),
        None => print_all(&recorded),
    }
    Ok(ExitCode::SUCCESS)
}

/// The only stack among `stacks`, or an error asking for `--stack`.
fn the_stack(stacks: &[String]) -> anyhow::Result<String> {
    match stacks {
        [one] => Ok(one.clone()),
        [] => bail!("no stack has been applied"),
        _ => bail!(
            "name the stack with --stack (one of: {})",
            stacks.join(", ")
        ),
    }
}

fn no_outputs(stack: &str) -> anyhow::Error {
    anyhow::anyhow!("stack `{stack}` has no recorded outputs (apply it first)")
}

/// The stack and its recorded outputs, from the local store.
fn local_outputs(common: &Common, stack: Option<&str>) -> anyhow::Result<(String, PropertyMap)> {
    let store = common.open_store()?;
    let stack = match stack {
        Some(s) => s.to_owned(),
        None => the_stack(&store.command_stacks()?)?,
    };
    match store.outputs(&stack)? {
        Some(recorded) => Ok((stack, recorded)),
        None => Err(no_outputs(&stack)),
    }
}

/// The stack and its recorded outputs, from the primary
/// (`GET /v1/stacks/{name}/outputs`), in their stored form again so that
/// they render as local mode renders them.
fn remote_outputs(remote: &Remote, stack: Option<&str>) -> anyhow::Result<(String, PropertyMap)> {
    let stack = match stack {
        Some(s) => s.to_owned(),
        None => {
            let answer = remote.get("/v1/stacks")?;
            let names: Vec<String> = answer["stacks"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|s| !s["last_command"].is_null())
                .filter_map(|s| s["name"].as_str().map(str::to_owned))
                .collect();
            the_stack(&names)?
        }
    };
    let (status, answer) = remote.get_status(&format!("/v1/stacks/{}/outputs", encode(&stack)))?;
    if status == 404 {
        return Err(no_outputs(&stack));
    }
    if !(200..300).contains(&status) {
        return Err(super::remote::api_error(status, &answer));
    }
    let recorded = answer["outputs"]
        .as_object()
        .into_iter()
        .flatten()
        .map(|(name, v)| (name.clone(), outputs::from_json(v)))
        .collect();
    Ok((stack, recorded))
}
fn as_json(recorded: &PropertyMap) -> serde_json::Map<String, serde_json::Value> {
    recorded
        .iter()
        .map(|(k, v)| (k.clone(), outputs::to_json(v)))
        .collect()
}

/// `name = value` lines.
pub fn print_all(recorded: &PropertyMap) {
    for (name, v) in recorded {
        println!("{name} = {}", outputs::to_text(v));
    }
}

/// Prints the outputs after an apply, if the stack declares any.
pub fn print_after_apply(recorded: Option<&PropertyMap>, output: Output) {
    let Some(recorded) = recorded.filter(|r| !r.is_empty()) else {
        return;
    };
    if output == Output::Json {
        println!("{}", serde_json::json!({"outputs": as_json(recorded)}));
    } else {
        println!("Outputs:");
        for (name, v) in recorded {
            println!("  {name} = {}", outputs::to_text(v));
        }
    }
}
