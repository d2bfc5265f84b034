//! W3C trace context (`traceparent`, `tracestate`) in message headers.
//!
//! Compiled only with the `opentelemetry` feature. The producer writes the
//! context of its `send` span; the consumer's `process` span takes it as
//! its OpenTelemetry parent, whatever the broker (headers travel on every
//! backend). The format is fixed (W3C Trace Context, version `00`) rather
//! than the global propagator's, so producer and consumer agree without
//! configuration.

use std::str::FromStr;

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

use crate::headers::Headers;

use super::{TRACEPARENT_HEADER, TRACESTATE_HEADER};

/// Writes `span`'s OpenTelemetry context into `headers`, unless the span
/// has none (no OpenTelemetry layer) or the headers already carry one.
/// Returns whether it wrote anything.
pub fn inject_context(span: &Span, headers: &mut Headers) -> bool {
    if headers.get(TRACEPARENT_HEADER).is_some() {
        return false;
    }
    let Some((parent, state)) = trace_headers(span) else {
        return false;
    };
    headers.insert(TRACEPARENT_HEADER, parent);
    if let Some(state) = state {
        headers.insert(TRACESTATE_HEADER, state);
    }
    true
}

/// `span`'s `traceparent` and `tracestate` values, if it has a valid
/// OpenTelemetry context.
pub(crate) fn trace_headers(span: &Span) -> Option<(String, Option<String>)> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let span_ref = cx.span();
    let sc = span_ref.span_context();
    if !sc.is_valid() {
        return None;
    }
    let parent = format!(
        "00-{:032x}-{:016x}-{:02x}",
        sc.trace_id(),
        sc.span_id(),
        sc.trace_flags().to_u8()
    );
    let state = sc.trace_state().header();
    Some((parent, (!state.is_empty()).then_some(state)))
}

/// The remote span context `headers` carry, if they carry a valid one.
pub fn extract_context(headers: &Headers) -> Option<SpanContext> {
    let parent = headers.get(TRACEPARENT_HEADER)?;
    let mut parts = parent.trim().split('-');
    let (version, trace_id, span_id, flags) =
        (parts.next()?, parts.next()?, parts.next()?, parts.next()?);
    // Version 00 has exactly four parts; later versions may add some.
    if version.len() != 2 || version == "ff" || (version == "00" && parts.next().is_some()) {
        return None;
    }
    if trace_id.len() != 32 || span_id.len() != 16 || flags.len() != 2 {
        return None;
    }
    let trace_id = TraceId::from_hex(trace_id).ok()?;
    let span_id = SpanId::from_hex(span_id).ok()?;
    let flags = u8::from_str_radix(flags, 16).ok()?;
    let state = headers
        .get(TRACESTATE_HEADER)
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let sc = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(flags) & TraceFlags::SAMPLED,
        true,
        state,
    );
    sc.is_valid().then_some(sc)
}

/// Makes the remote context in `headers` the OpenTelemetry parent of
/// `span`.
pub(crate) fn set_parent_from(span: &Span, headers: &Headers) {
    if span.is_disabled() {
        return;
    }
    if let Some(sc) = extract_context(headers) {
        if let Err(err) = span.set_parent(Context::new().with_remote_span_context(sc)) {
            tracing::debug!(cause = %err, "could not set the span's parent from the message's trace context");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_a_w3c_traceparent() {
        let mut h = Headers::new();
        h.insert(
            TRACEPARENT_HEADER,
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        );
        h.insert(TRACESTATE_HEADER, "congo=t61rcWkgMzE");
        let sc = extract_context(&h).expect("valid context");
        assert_eq!(
            format!("{:032x}", sc.trace_id()),
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
        assert_eq!(format!("{:016x}", sc.span_id()), "00f067aa0ba902b7");
        assert!(sc.is_sampled());
        assert!(sc.is_remote());
        assert_eq!(sc.trace_state().get("congo"), Some("t61rcWkgMzE"));
    }

    #[test]
    fn rejects_malformed_traceparents() {
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-xyz92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            let mut h = Headers::new();
            h.insert(TRACEPARENT_HEADER, bad);
            assert!(extract_context(&h).is_none(), "{bad:?}");
        }
        assert!(extract_context(&Headers::new()).is_none());
    }

    #[test]
    fn nothing_to_inject_without_an_opentelemetry_layer() {
        let mut h = Headers::new();
        assert!(!inject_context(&Span::none(), &mut h));
        assert!(h.is_empty());
    }
}
