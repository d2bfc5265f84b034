//! `ezmq push TOPIC BODY [--delay D] [--priority P] [--header k=v]...`.

use std::io::Read;

use ezmq::{Bytes, Client, MqClient, PushOptions};

use crate::args::PushArgs;
use crate::exit::{CliError, CliResult};
use crate::table::{print_json, print_text};

/// Runs `ezmq push`: prints the new job's id.
pub(crate) async fn run(client: &Client, args: PushArgs, json: bool) -> CliResult<()> {
    let body: Bytes = if args.body == "-" {
        let mut buf = Vec::new();
        std::io::stdin().read_to_end(&mut buf)?;
        buf.into()
    } else {
        args.body.into_bytes().into()
    };
    let mut options = PushOptions::default();
    if let Some(delay) = args.delay {
        options = options.with_delay(delay);
    }
    if let Some(priority) = args.priority {
        options = options.with_priority(priority);
    }
    for (name, value) in args.headers {
        options = options.with_header(name, value);
    }
    super::topic(&args.topic)?;
    let id = client
        .push_with(&args.topic, body, options)
        .await
        .map_err(|source| match source {
            err @ (ezmq::Error::InvalidOption { .. } | ezmq::Error::PayloadTooLarge { .. }) => {
                CliError::Usage(err.to_string())
            }
            source => CliError::Ezmq {
                context: format!("pushing to {:?}", args.topic),
                source,
            },
        })?;
    if json {
        print_json(&serde_json::json!({ "topic": args.topic, "id": id.to_string() }))
    } else {
        print_text(&format!("{id}\n"))
    }
}
