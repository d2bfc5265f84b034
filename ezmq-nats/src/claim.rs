//! Exclusive claims in the key-value bucket: a key per claim holding
//! `<expires at, Unix ms>\n<token>`, taken by a create (the key absent or
//! deleted) or by an update at the revision read (the holder expired):
//! JetStream accepts exactly one of concurrent writers at one revision.
//!
//! Expiry is read off the clocks of the clients: with clocks apart by
//! `s`, a claim can be taken again up to `s` early or late.
//!
//! Claims are read from the bucket stream's leader ([`leader_entry`]),
//! never by the bucket's own `entry`: that one reads by direct get, which
//! any replica of a replicated bucket answers, and a follower can lag the
//! leader, so a claim written a moment ago could read as absent.

use async_nats::jetstream::kv::{self, CreateErrorKind, Operation, UpdateErrorKind};
use async_nats::jetstream::stream::{LastRawMessageError, LastRawMessageErrorKind};
use async_trait::async_trait;
use bytes::Bytes;
use ezmq_core::spi::{ClaimOutcome, ExclusiveClaim};
use ezmq_core::{Result, Topic};
use std::time::Duration;

use crate::backend::NatsBackend;
use crate::push::{ms, now_ms};

/// A live claim's token, from its entry.
fn live_holder(entry: &kv::Entry) -> Option<&str> {
    if entry.operation != Operation::Put {
        return None;
    }
    let text = std::str::from_utf8(&entry.value).ok()?;
    let (until, token) = text.split_once('\n')?;
    let until: u64 = until.parse().ok()?;
    (until > now_ms()).then_some(token)
}

/// The header a key-value delete or purge carries its operation in.
const KV_OPERATION: &str = "KV-Operation";

/// `key`'s latest entry in `store` as the bucket stream's leader has it
/// (JetStream's message-get API, which only the leader answers and which
/// sees every acknowledged write); `None` when the key was never written.
async fn leader_entry(
    store: &kv::Store,
    key: &str,
) -> std::result::Result<Option<kv::Entry>, LastRawMessageError> {
    let subject = format!("{}{key}", store.prefix);
    let message = match store.stream.get_last_raw_message_by_subject(&subject).await {
        Ok(message) => message,
        Err(err) if err.kind() == LastRawMessageErrorKind::NoMessageFound => return Ok(None),
        Err(err) => return Err(err),
    };
    let operation = message
        .headers
        .get(KV_OPERATION)
        .and_then(|op| op.as_str().parse().ok())
        .unwrap_or(Operation::Put);
    Ok(Some(kv::Entry {
        bucket: store.name.clone(),
        key: key.to_owned(),
        value: message.payload,
        revision: message.sequence,
        delta: 0,
        created: message.time,
        operation,
        seen_current: false,
    }))
}

impl NatsBackend {
    /// Takes `key` under `token` for `hold` unless a live holder has it.
    async fn take(&self, key: &Topic, token: &str, hold: Duration) -> Result<bool> {
        let inner = &self.inner;
        let k = inner.names.claim_key(key);
        let value = Bytes::from(format!("{}\n{token}", now_ms().saturating_add(ms(hold))));
        let entry = inner
            .timed("claim", leader_entry(&inner.claims, &k))
            .await?;
        match entry {
            Some(entry) if entry.operation == Operation::Put => {
                if live_holder(&entry).is_some() {
                    return Ok(false);
                }
                inner
                    .timed("claim", async {
                        match inner.claims.update(&k, value, entry.revision).await {
                            Ok(_) => Ok(true),
                            Err(err) if err.kind() == UpdateErrorKind::WrongLastRevision => {
                                Ok(false)
                            }
                            Err(err) => Err(err),
                        }
                    })
                    .await
            }
            _ => {
                let created = inner
                    .timed("claim", async {
                        match inner.claims.create(&k, value).await {
                            Ok(_) => Ok(true),
                            Err(err) if err.kind() == CreateErrorKind::AlreadyExists => Ok(false),
                            Err(err) => Err(err),
                        }
                    })
                    .await;
                match created {
                    Ok(won) => Ok(won),
                    // Over a deleted key the create is an update at the
                    // delete's revision, and a writer that lost that race
                    // gets an error: the claim is somebody else's then.
                    Err(err) => match self.holder(key).await? {
                        Some(holder) if holder != token => Ok(false),
                        _ => Err(err),
                    },
                }
            }
        }
    }
}

#[async_trait]
impl ExclusiveClaim for NatsBackend {
    async fn try_claim(&self, key: &Topic, hold: Duration) -> Result<bool> {
        let token = uuid::Uuid::new_v4().simple().to_string();
        self.take(key, &token, hold).await
    }

    async fn claim(&self, key: &Topic, token: &str, hold: Duration) -> Result<ClaimOutcome> {
        // The holder can end between the write and the read: look again.
        for _ in 0..3 {
            if self.take(key, token, hold).await? {
                return Ok(ClaimOutcome::Won);
            }
            if let Some(holder) = self.holder(key).await? {
                return Ok(ClaimOutcome::Held(Some(holder)));
            }
        }
        Ok(ClaimOutcome::Held(None))
    }

    async fn holder(&self, key: &Topic) -> Result<Option<String>> {
        let inner = &self.inner;
        let entry = inner
            .timed(
                "claim holder",
                leader_entry(&inner.claims, &inner.names.claim_key(key)),
            )
            .await?;
        Ok(entry.as_ref().and_then(live_holder).map(str::to_owned))
    }

    async fn release(&self, key: &Topic, token: &str) -> Result<bool> {
        let inner = &self.inner;
        let k = inner.names.claim_key(key);
        let entry = inner
            .timed("release claim", leader_entry(&inner.claims, &k))
            .await?;
        let Some(entry) = entry else { return Ok(false) };
        if live_holder(&entry) != Some(token) {
            return Ok(false);
        }
        let deleted = inner
            .timed(
                "release claim",
                inner
                    .claims
                    .delete_expect_revision(&k, Some(entry.revision)),
            )
            .await;
        match deleted {
            Ok(()) => Ok(true),
            // Refused at that revision (the client does not tell it apart
            // from other failures): the claim changed hands meanwhile,
            // unless it is still this token's.
            Err(err) => match self.holder(key).await? {
                Some(holder) if holder == token => Err(err),
                _ => Ok(false),
            },
        }
    }
}
