//! Spans and metrics of cron ticks (see [`ezmq_core::telemetry`]).

use chrono::{DateTime, Utc};
use ezmq_core::telemetry::{self, names, SpanName};
use tracing::field::Empty;
use tracing::Span;

/// `ezmq.cron.outcome` of a tick this process claimed and ran.
pub(crate) const RUN: &str = "run";
/// `ezmq.cron.outcome` of a tick another participant claimed.
pub(crate) const LOST: &str = "lost";
/// `ezmq.cron.outcome` of a tick skipped here: the previous run still
/// going (no overlap allowed), or the claim failed.
pub(crate) const SKIPPED: &str = "skipped";
/// `ezmq.cron.outcome` of a tick this process was too late for (asleep past
/// the claim window, or too old to catch up).
pub(crate) const MISSED: &str = "missed";

/// The span of one tick of crontab `name`: `cron {name}`, kind internal.
pub(crate) fn tick_span(system: &'static str, name: &str, tick: DateTime<Utc>) -> Span {
    tracing::info_span!(
        "cron_tick",
        otel.name = %SpanName::new("cron", name),
        otel.kind = "internal",
        otel.status_code = Empty,
        "messaging.system" = system,
        "error.type" = Empty,
        cron = %name,
        tick = %tick,
    )
}

/// Counts a tick of crontab `name` with `outcome` (`ezmq.cron.ticks`).
pub(crate) fn tick(system: &'static str, name: &str, outcome: &'static str) {
    telemetry::cron_tick(system, name, outcome);
}

/// Marks the current tick span failed: the handler returned an error.
pub(crate) fn handler_failed() {
    telemetry::record_error(&Span::current(), names::ERROR_HANDLER);
}
