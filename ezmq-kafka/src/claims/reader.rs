//! The claims reader: a consumer assigned the claim log's one partition
//! (no group: nothing to join, nothing to fail over), applying every
//! record in offset order with [`Claims::apply`] and handing each outcome
//! to the caller waiting for that record.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use rdkafka::consumer::StreamConsumer;
use rdkafka::message::{BorrowedMessage, Headers as _, Message};
use tokio::sync::{oneshot, watch};

use super::rule::{Applied, Claims, Op};
use super::{HOLD_HEADER, OP_HEADER, REQ_HEADER, TOKEN_HEADER};
use crate::consumer::record::now_ms;

/// What the reader and the callers share.
#[derive(Debug, Default)]
pub(crate) struct LogState {
    pub(crate) claims: Claims,
    /// Callers waiting for the outcome of their record, by its request id.
    pub(crate) waiting: HashMap<String, oneshot::Sender<Applied>>,
}

pub(crate) fn lock(state: &Mutex<LogState>) -> MutexGuard<'_, LogState> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Applies the log from its start until `stopped`; `applied` tells the
/// offset of the next record to apply.
pub(crate) async fn run(
    consumer: StreamConsumer,
    state: Arc<Mutex<LogState>>,
    applied: watch::Sender<i64>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            _ = stopped.changed() => break,
            message = consumer.recv() => match message {
                Ok(message) => {
                    apply(&state, &message);
                    applied.send_replace(message.offset() + 1);
                }
                Err(err) => {
                    tracing::debug!(error = %err, "Kafka claims reader error");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            },
        }
    }
    // Dropping an assigned consumer leaves no group: it closes at once.
    let closed = tokio::task::spawn_blocking(move || drop(consumer)).await;
    if closed.is_err() {
        tracing::warn!("closing the Kafka claims reader failed");
    }
}

/// Applies one record of the log and answers its caller, if it waits here.
fn apply(state: &Mutex<LogState>, message: &BorrowedMessage<'_>) {
    let Some(key) = message.key().and_then(|k| std::str::from_utf8(k).ok()) else {
        tracing::warn!(
            offset = message.offset(),
            "a claim-log record without a key; skipped"
        );
        return;
    };
    let (mut op, mut token, mut hold_ms, mut req) = (None, None, None, None);
    if let Some(headers) = message.headers() {
        for header in headers.iter() {
            let value = header.value.and_then(|v| std::str::from_utf8(v).ok());
            match header.key {
                OP_HEADER => op = value,
                TOKEN_HEADER => token = value,
                HOLD_HEADER => hold_ms = value.and_then(|v| v.parse::<u64>().ok()),
                REQ_HEADER => req = value,
                _ => {}
            }
        }
    }
    let op = match (op, token, hold_ms) {
        (Some("claim"), Some(token), Some(hold_ms)) => Op::Claim {
            token: token.to_owned(),
            hold_ms,
        },
        (Some("release"), Some(token), _) => Op::Release {
            token: token.to_owned(),
        },
        _ => {
            tracing::warn!(
                offset = message.offset(),
                key,
                "a claim-log record ezmq cannot read; skipped"
            );
            return;
        }
    };
    // The broker's append time (the topic is LogAppendTime), the same
    // for every reader.
    let at_ms = message
        .timestamp()
        .to_millis()
        .and_then(|t| u64::try_from(t).ok())
        .unwrap_or_else(now_ms);
    let mut state = lock(state);
    let outcome = state.claims.apply(key, &op, at_ms);
    if let Some(waiter) = req.and_then(|req| state.waiting.remove(req)) {
        let _ = waiter.send(outcome);
    }
}
