//! Exclusive claims ([`ExclusiveClaim`], the claim of every cron tick) as a
//! majority of single-node claims.
//!
//! # The claim
//!
//! A claim of `key` sends, to every node of the *claim set* at once,
//! `ADDJOB <key> <token> <ms> REPLICATE 1 RETRY 0 TTL <hold> MAXLEN 1`
//! (`token`: random, one per call). A node stores the first such job and
//! answers `-MAXLEN` to every later one until it expires after `hold`: each
//! node is *held* by at most one caller. A caller wins only when ⌊n/2⌋+1
//! of the `n` nodes of the set said yes. Two majorities of one set share a
//! node, so **two callers cannot both win while they use the same node
//! set**, whatever each believes about node health: nothing here reads
//! this process's failure flags or the priorities of `HELLO`. A node that
//! is down, slow or cut off is still asked (with a short
//! [per-node timeout](NODE_TIMEOUT)) and simply does not say yes; it is
//! never retried on the request path. The nodes are asked concurrently and
//! a call returns as soon as its outcome is decided (a majority for it, a
//! majority for another caller, or none possible), so a dead or hung node
//! does not delay a claim as long as the others answer.
//!
//! A yes counts only when the job really sits in that node's queue (`QLEN`
//! right after the `ADDJOB`): a node leaving the cluster stores new jobs on
//! other nodes, and would otherwise say yes to everyone. On `-MAXLEN` the
//! caller reads the holder's token (`QPEEK`), so it knows whether one
//! other caller has a majority (it lost: `false`) or the nodes are split
//! (three callers, one node each, nobody can win). A loser keeps the nodes
//! it got until they expire, so every node that answered stays held for
//! the whole `hold`. Only in a split does every caller that holds nodes
//! give them back (`DELJOB` of its own jobs), wait a random few
//! milliseconds and try again, up to [`ROUNDS`] rounds; a caller that holds
//! nothing leaves it to the others (`false`). Nobody has a majority when
//! nodes are given back, so this cannot make a second winner. A caller that cannot reach a majority
//! because nodes do not answer gets a retryable error: the tick is missed
//! (two of three nodes down: no participant wins).
//!
//! What can still run a tick twice needs two failures within one `hold`,
//! or a late caller of the same key (a participant whose clock lags by
//! more than the others' claims took, or one retrying after an error):
//! a node of the winner's majority that loses its jobs (restarted empty)
//! frees one node, and a late caller then needs a majority of free nodes —
//! so a second node must be free too (lost its jobs as well, or was held
//! by nobody: unreachable for everyone at the tick, or given back in a
//! split). A caller claiming after `hold` has expired starts afresh, and
//! claim sets that differ by more than one node between two callers are
//! unsafe (see [the claim set](crate::claim_set), the nodes a claim is
//! counted over).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Error, Result, Topic};
use futures::stream::{FuturesUnordered, StreamExt};

use crate::addjob::ceil_secs;
use crate::backend::DisqueBackend;
use crate::error::DisqueError;
use crate::node::{as_string, as_u64, Node};

/// Longest wait for one node's answer to a claim (less when
/// [`DisqueConfig::command_timeout`](crate::DisqueConfig::command_timeout)
/// is shorter).
const NODE_TIMEOUT: Duration = Duration::from_secs(1);

/// Rounds of one claim call when callers split the nodes.
const ROUNDS: usize = 3;

/// Longest random pause before another round.
const MAX_JITTER_MS: u64 = 40;

/// A claim that got no majority either way.
#[derive(Debug, thiserror::Error)]
#[error(
    "no majority for claim {key}: {won} of {nodes} Disque nodes said yes, \
     {held} were held by others, {unknown} did not answer ({needed} needed)"
)]
pub(crate) struct NoMajority {
    key: String,
    won: usize,
    held: usize,
    unknown: usize,
    nodes: usize,
    needed: usize,
    /// The error of a node that did not answer, if any.
    #[source]
    last: Option<DisqueError>,
}

/// One node's answer to a claim.
enum Vote {
    /// The node holds our job (its id).
    Yes(String),
    /// The node holds another caller's job (`-MAXLEN`): that caller's
    /// token, when the job could be read.
    Held(Option<String>),
    /// No answer, an error, or a job not in the node's queue.
    Unknown(DisqueError),
}

/// What one round of a claim found.
#[derive(Default)]
struct Round {
    /// Our jobs: node and job id.
    won: Vec<(Arc<Node>, String)>,
    /// Nodes held by each other caller (by token).
    held_by: HashMap<String, usize>,
    /// Nodes held by a caller whose token could not be read.
    held_anonymously: usize,
    unknown: usize,
    last: Option<DisqueError>,
}

impl Round {
    fn held(&self) -> usize {
        self.held_by.values().sum::<usize>() + self.held_anonymously
    }

    /// The most nodes one other caller holds.
    fn most_held(&self) -> usize {
        self.held_by.values().copied().max().unwrap_or(0)
    }

    /// The token of the caller holding the most nodes.
    fn top_holder(&self) -> Option<String> {
        self.held_by
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(token, _)| token.clone())
    }

    fn count(&mut self, node: &Arc<Node>, vote: Vote) {
        match vote {
            Vote::Yes(job) => self.won.push((Arc::clone(node), job)),
            Vote::Held(Some(token)) => *self.held_by.entry(token).or_insert(0) += 1,
            Vote::Held(None) => self.held_anonymously += 1,
            Vote::Unknown(e) => {
                self.unknown += 1;
                self.last = Some(e);
            }
        }
    }
}

/// How a round ended.
enum Outcome {
    Won,
    /// Another caller holds a majority.
    Lost,
    /// Nobody can have a majority (or not every node answered).
    Undecided,
}

#[async_trait]
impl ExclusiveClaim for DisqueBackend {
    /// A majority of `MAXLEN 1` claims over the claim set (see the module
    /// documentation) under a random token; `hold` is rounded up to whole
    /// seconds, at least 1 s.
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        let outcome = self.claim_rounds(key, &token, hold, false).await?;
        Ok(outcome == ClaimOutcome::Won)
    }

    /// The claim of [`ExclusiveClaim::try_claim`] under `token`. Lost to a
    /// caller with a majority: its token; lost while other callers split
    /// the nodes: the token a majority ends with.
    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        self.claim_rounds(key, token, hold, true).await
    }

    /// The token a majority of the claim set holds `key` under (`QPEEK` on
    /// every node at once).
    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        self.ensure_open()?;
        let (members, nodes) = self.claim_set()?;
        let needed = members.len() / 2 + 1;
        let timeout = self.config().command_timeout.min(NODE_TIMEOUT);
        let held = futures::future::join_all(nodes.iter().map(|node| holder(node, key, timeout)));
        let mut tokens: HashMap<String, usize> = HashMap::new();
        let mut answered = 0;
        for found in held.await {
            match found {
                Ok(Some((_, token))) => {
                    answered += 1;
                    *tokens.entry(token).or_insert(0) += 1;
                }
                Ok(None) => answered += 1,
                Err(()) => {}
            }
        }
        if answered < needed {
            let found = Round {
                unknown: members.len() - answered,
                held_anonymously: answered,
                ..Round::default()
            };
            return Err(no_majority(key, found, members.len(), needed));
        }
        Ok(tokens
            .into_iter()
            .find(|(_, n)| *n >= needed)
            .map(|(token, _)| token))
    }

    /// `DELJOB` of the claim jobs `token` holds, on every node of the
    /// claim set; true when one was deleted.
    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        self.ensure_open()?;
        let (_, nodes) = self.claim_set()?;
        let timeout = self.config().command_timeout.min(NODE_TIMEOUT);
        let held = futures::future::join_all(nodes.iter().map(|node| async move {
            match holder(node, key, timeout).await {
                Ok(Some((job, holder))) if holder == token => Some((Arc::clone(node), job)),
                _ => None,
            }
        }))
        .await;
        let ours: Vec<(Arc<Node>, String)> = held.into_iter().flatten().collect();
        give_back(key, &ours, timeout).await;
        Ok(!ours.is_empty())
    }
}

impl DisqueBackend {
    /// The rounds of a claim under `token`. Lost while other callers
    /// split the nodes, the holder is read again while their rounds run
    /// when `name_holder` (a caller that only asks whether it won, such as
    /// [`ExclusiveClaim::try_claim`], does not wait for that).
    async fn claim_rounds(
        &self,
        key: &Topic,
        token: &str,
        hold: Duration,
        name_holder: bool,
    ) -> Result<ClaimOutcome> {
        self.ensure_open()?;
        let (members, nodes) = self.claim_set()?;
        let absent = members.len() - nodes.len();
        let needed = members.len() / 2 + 1;
        let timeout = self.config().command_timeout.min(NODE_TIMEOUT);
        let claim = &claim_cmd(key, token, hold, timeout);
        for round in 1..=ROUNDS {
            let mut found = Round {
                unknown: absent,
                ..Round::default()
            };
            let outcome = collect(&nodes, key, token, claim, timeout, needed, &mut found).await;
            match outcome {
                Outcome::Won => {
                    tracing::debug!(%key, round, won = found.won.len(), nodes = members.len(), "claim won");
                    return Ok(ClaimOutcome::Won);
                }
                Outcome::Lost => {
                    // Our nodes stay held (until `hold`): a late caller of
                    // the same key then finds no free majority even if one
                    // of the winner's nodes loses its jobs.
                    tracing::debug!(%key, round, held = found.most_held(), "claim held by another caller");
                    return Ok(ClaimOutcome::Held(found.top_holder()));
                }
                Outcome::Undecided => {}
            }
            if found.won.is_empty() {
                if found.held() > 0 {
                    // Callers that hold nodes sort it out between them;
                    // the holder to name is the one a majority ends with.
                    tracing::debug!(%key, round, held = found.held(), "claim held by other callers");
                    let holder = if name_holder {
                        self.settled_holder(key).await
                    } else {
                        None
                    };
                    return Ok(ClaimOutcome::Held(holder));
                }
                return Err(no_majority(key, found, members.len(), needed));
            }
            // Some yes, no majority: give our nodes back so another caller
            // (or our next round) can make one.
            give_back(key, &found.won, timeout).await;
            if found.held() == 0 || round == ROUNDS {
                return Err(no_majority(key, found, members.len(), needed));
            }
            tracing::debug!(%key, round, won = found.won.len(), held = found.held(), "claim split; retrying");
            tokio::time::sleep(jitter()).await;
        }
        Ok(ClaimOutcome::Held(None))
    }

    /// The token a majority of the claim set ends up holding `key` under,
    /// while other callers split its nodes: read again (after a random
    /// pause) until one has a majority, for as long as their rounds take.
    /// `None` when none has one by then.
    async fn settled_holder(&self, key: &Topic) -> Option<String> {
        for _ in 0..ROUNDS * 4 {
            if let Ok(Some(token)) = self.holder(key).await {
                return Some(token);
            }
            tokio::time::sleep(jitter()).await;
        }
        None
    }

    /// The claim set's ids and the nodes of it this client knows.
    fn claim_set(&self) -> Result<(Vec<String>, Vec<Arc<Node>>)> {
        let table = self.shared.snapshot();
        let window = crate::claim_set::membership_window(self.config().refresh_interval);
        let members = self.shared.claims.current(
            table.iter().map(|n| n.info.id.as_str()),
            window,
            Instant::now(),
        );
        if members.is_empty() {
            return Err(DisqueError::NoNodes.into());
        }
        // Members no longer in the table count, but cannot say yes.
        let nodes: Vec<Arc<Node>> = members
            .iter()
            .filter_map(|id| table.iter().find(|n| &n.info.id == id).cloned())
            .collect();
        Ok((members, nodes))
    }
}

/// One round: asks every node at once and counts the answers, returning as
/// soon as the round is decided: a majority for us, a majority for another
/// caller, or none possible any more (the answers still missing are not
/// awaited, so a slow or hung node does not delay the decision).
async fn collect(
    nodes: &[Arc<Node>],
    key: &Topic,
    token: &str,
    claim: &redis::Cmd,
    timeout: Duration,
    needed: usize,
    found: &mut Round,
) -> Outcome {
    let mut votes: FuturesUnordered<_> = nodes
        .iter()
        .map(|node| async move { (node, vote(node, key, token, claim, timeout).await) })
        .collect();
    while let Some((node, vote)) = votes.next().await {
        found.count(node, vote);
        let left = votes.len();
        if found.won.len() >= needed {
            return Outcome::Won;
        }
        if found.most_held() >= needed {
            return Outcome::Lost;
        }
        let anyone_could = found.most_held() + found.held_anonymously + left >= needed;
        if found.won.len() + left < needed && !anyone_could {
            found.unknown += left;
            return Outcome::Undecided;
        }
    }
    Outcome::Undecided
}

/// `ADDJOB <key> <token> <ms> REPLICATE 1 RETRY 0 TTL <hold> MAXLEN 1`.
fn claim_cmd(key: &Topic, token: &str, hold: Duration, timeout: Duration) -> redis::Cmd {
    let ms = u64::try_from(timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let mut cmd = redis::cmd("ADDJOB");
    cmd.arg(key.as_str())
        .arg(token)
        .arg(ms)
        .arg("REPLICATE")
        .arg(1)
        .arg("RETRY")
        .arg(0)
        .arg("TTL")
        .arg(ceil_secs(hold).max(1))
        .arg("MAXLEN")
        .arg(1);
    cmd
}

/// Claims `key` on one node: `ADDJOB`, then `QLEN` to check that the job
/// is queued on this node; on `-MAXLEN`, `QPEEK` for the holder's token.
///
/// A connection broken since its last use (the node restarted) is retried
/// once on a new connection; a node that is down refuses that at once. A
/// node this client has marked down is not asked. Our own job found on the
/// node (the first attempt was executed) is a yes.
async fn vote(
    node: &Node,
    key: &Topic,
    token: &str,
    claim: &redis::Cmd,
    timeout: Duration,
) -> Vote {
    if node.is_down() {
        // Not asked: a node found hung would cost every claim its timeout.
        return Vote::Unknown(DisqueError::NodeDown {
            command: "ADDJOB",
            addr: node.addr().to_owned(),
        });
    }
    let reply = match node.query("ADDJOB", claim, timeout).await {
        Err(DisqueError::Io { .. }) => node.query("ADDJOB", claim, timeout).await,
        reply => reply,
    };
    let job = match reply {
        Ok(value) => as_string(&value),
        Err(e) if e.server_code() == Some("MAXLEN") => {
            return match holder(node, key, timeout).await {
                Ok(Some((job, holder))) if holder == token => Vote::Yes(job),
                Ok(Some((_, holder))) => Vote::Held(Some(holder)),
                _ => Vote::Held(None),
            };
        }
        Err(e) => return Vote::Unknown(e),
    };
    let Some(job) = job else {
        return Vote::Unknown(DisqueError::UnexpectedReply {
            command: "ADDJOB",
            addr: node.addr().to_owned(),
            reply: "not a job id".to_owned(),
        });
    };
    let mut qlen = redis::cmd("QLEN");
    qlen.arg(key.as_str());
    match node.query("QLEN", &qlen, timeout).await {
        Ok(value) if as_u64(&value).is_some_and(|n| n >= 1) => Vote::Yes(job),
        Ok(value) => Vote::Unknown(DisqueError::UnexpectedReply {
            command: "QLEN",
            addr: node.addr().to_owned(),
            reply: format!("{value:?} right after a claim: the job is stored elsewhere"),
        }),
        Err(e) => Vote::Unknown(e),
    }
}

/// The id and token of the claim job queued on `node` (`QPEEK <key> 1`),
/// if it can be read.
/// `Err` when the node did not answer, `Ok(None)` when it holds nothing.
async fn holder(
    node: &Node,
    key: &Topic,
    timeout: Duration,
) -> std::result::Result<Option<(String, String)>, ()> {
    let mut cmd = redis::cmd("QPEEK");
    cmd.arg(key.as_str()).arg(1);
    let value = node.query("QPEEK", &cmd, timeout).await.map_err(drop)?;
    let redis::Value::Array(jobs) = value else {
        return Err(());
    };
    let Some(first) = jobs.first() else {
        return Ok(None);
    };
    let redis::Value::Array(fields) = first else {
        return Err(());
    };
    let job = fields.get(1).and_then(as_string);
    let token = fields.get(2).and_then(as_string);
    Ok(job.zip(token))
}

/// `DELJOB` of our own claim jobs, concurrently; failures only delay the
/// next claims (the job expires after `hold`).
async fn give_back(key: &Topic, won: &[(Arc<Node>, String)], timeout: Duration) {
    let deletes = won.iter().map(|(node, job)| async move {
        let mut cmd = redis::cmd("DELJOB");
        cmd.arg(job.as_str());
        if let Err(e) = node.query("DELJOB", &cmd, timeout).await {
            tracing::debug!(%key, node = %node.addr(), cause = %e, "could not give a claim back");
        }
    });
    futures::future::join_all(deletes).await;
}

fn no_majority(key: &Topic, found: Round, nodes: usize, needed: usize) -> Error {
    let err = NoMajority {
        key: key.as_str().to_owned(),
        won: found.won.len(),
        held: found.held(),
        unknown: found.unknown,
        nodes,
        needed,
        last: found.last,
    };
    tracing::debug!(cause = %err, "claim without a majority");
    Error::backend(err, true)
}

/// A random pause of up to [`MAX_JITTER_MS`], so split callers do not retry
/// in lockstep.
fn jitter() -> Duration {
    let random = RandomState::new().build_hasher().finish();
    Duration::from_millis(1 + random % MAX_JITTER_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_command_is_explicit() {
        let key = Topic::new("k").unwrap();
        let cmd = claim_cmd(
            &key,
            "t0k3n",
            Duration::from_millis(1500),
            Duration::from_millis(800),
        );
        let args: Vec<String> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => String::new(),
            })
            .collect();
        assert_eq!(
            args.join(" "),
            "ADDJOB k t0k3n 800 REPLICATE 1 RETRY 0 TTL 2 MAXLEN 1"
        );
    }

    #[test]
    fn jitter_is_bounded() {
        for _ in 0..100 {
            let j = jitter();
            assert!(j >= Duration::from_millis(1) && j <= Duration::from_millis(MAX_JITTER_MS));
        }
    }
}
