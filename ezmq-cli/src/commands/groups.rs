//! `ezmq groups TOPIC`: broadcast groups of a topic and their live members
//! ([`FanOut::groups`](ezmq::spi::FanOut::groups)).

use ezmq::spi::{Capability, GroupInfo};
use ezmq::{Client, MqClient};
use serde::Serialize;

use crate::args::GroupsArgs;
use crate::exit::{CliError, CliResult, Context};
use crate::table::{print_json, print_text, Table};

/// One group, as printed.
#[derive(Debug, Serialize)]
struct Group {
    name: String,
    /// Live members; `null` when the broker cannot count them.
    members: Option<u64>,
    /// Broadcasts waiting for the group; `null` when unknown.
    waiting: Option<u64>,
}

impl From<GroupInfo> for Group {
    fn from(info: GroupInfo) -> Self {
        Group {
            name: info.name,
            members: info.members,
            waiting: info.waiting,
        }
    }
}

/// Runs `ezmq groups`.
pub(crate) async fn run(client: &Client, args: GroupsArgs, json: bool) -> CliResult<()> {
    const HINT: &str = "the broker's own tools list its consumer queues";
    super::require(client, Capability::FanOut, HINT)?;
    let topic = super::topic(&args.topic)?;
    let groups = client
        .admin()
        .groups(&topic)
        .await
        .context(|| format!("listing the groups of {topic:?}"))?
        .ok_or_else(|| CliError::CapabilityMissing {
            backend: client.backend_name(),
            what: "listing broadcast groups".to_owned(),
            hint: HINT,
        })?;
    let groups: Vec<Group> = groups.into_iter().map(Group::from).collect();
    if json {
        return print_json(&groups);
    }
    if groups.is_empty() {
        return print_text(&format!("no broadcast group on {topic}\n"));
    }
    let unknown = |n: Option<u64>| n.map_or_else(|| "-".to_owned(), |n| n.to_string());
    let mut table = Table::new(["GROUP", "MEMBERS", "WAITING"]);
    for g in &groups {
        table.row([g.name.clone(), unknown(g.members), unknown(g.waiting)]);
    }
    print_text(&table.render())
}
