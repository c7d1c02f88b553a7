//! `orrery output [NAME] [--stack S]`: the outputs a stack's last apply
//! recorded (`docs/stacks.md#outputs`).

use std::process::ExitCode;

use anyhow::bail;
use orrery_primary::service::outputs;
use orrery_schema::PropertyMap;

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
    pub common: Common,
}

pub fn output_cmd(args: OutputArgs) -> anyhow::Result<ExitCode> {
    let store = args.common.open_store()?;
    let stack = match args.stack {
        Some(s) => s,
        None => {
            let stacks = store.command_stacks()?;
            match stacks.as_slice() {
                [one] => one.clone(),
                [] => bail!("no stack has been applied"),
                _ => bail!(
                    "name the stack with --stack (one of: {})",
                    stacks.join(", ")
                ),
            }
        }
    };
    let Some(recorded) = store.outputs(&stack)? else {
        bail!("stack `{stack}` has no recorded outputs (apply it first)");
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
