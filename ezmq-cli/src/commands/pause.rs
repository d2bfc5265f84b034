//! `ezmq pause TOPIC` and `ezmq resume TOPIC`: every listener of the topic,
//! in every process, stops taking jobs (or starts again) within a second;
//! pushes are still accepted (`Admin::pause`, on exclusive claims).

use ezmq::spi::Capability;
use ezmq::{Client, MqClient};

use crate::args::TopicArgs;
use crate::exit::{CliResult, Context};
use crate::table::{print_json, print_text};

/// What to do on a broker without exclusive claims.
const HINT: &str = "pause the listeners in each process (ListenerHandle::pause)";

/// Runs `ezmq pause` (`pause`) or `ezmq resume`.
pub(crate) async fn run(
    client: &Client,
    args: TopicArgs,
    pause: bool,
    json: bool,
) -> CliResult<()> {
    super::require(client, Capability::ExclusiveClaim, HINT)?;
    let topic = super::topic(&args.topic)?;
    let admin = client.admin();
    let changed = if pause {
        admin
            .pause(&topic)
            .await
            .context(|| format!("pausing {topic:?}"))?
    } else {
        admin
            .resume(&topic)
            .await
            .context(|| format!("resuming {topic:?}"))?
    };
    if json {
        return print_json(&serde_json::json!({
            "topic": topic.as_str(),
            "paused": pause,
            "changed": changed,
        }));
    }
    let text = match (pause, changed) {
        (true, true) => format!("paused {topic}: its listeners stop taking jobs within a second; pushes are still accepted\n"),
        (true, false) => format!("{topic} was already paused\n"),
        (false, true) => format!("resumed {topic}\n"),
        (false, false) => format!("{topic} was not paused\n"),
    };
    print_text(&text)
}
