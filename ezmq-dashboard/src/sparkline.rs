//! A topic's backlog over the last 15 minutes as a small inline SVG (no
//! script, no asset).

use std::fmt::Write;

use crate::history::KEPT_MS;

/// The chart's size in CSS pixels.
const WIDTH: f64 = 120.0;
const HEIGHT: f64 = 24.0;

/// A line of `points` ((Unix ms, jobs), oldest first) over the 15 minutes
/// up to `now_ms`, scaled to its highest point; empty with under two
/// points.
#[allow(clippy::cast_precision_loss)] // times and counts far below 2^52
pub(crate) fn backlog(points: &[(i64, u64)], now_ms: i64) -> String {
    if points.len() < 2 {
        return String::new();
    }
    let high = points.iter().map(|(_, n)| *n).max().unwrap_or(0).max(1) as f64;
    let low = points.iter().map(|(_, n)| *n).min().unwrap_or(0);
    let start = now_ms - KEPT_MS;
    let mut line = String::new();
    for (at, n) in points {
        let x = ((at - start).max(0) as f64 / KEPT_MS as f64 * WIDTH).min(WIDTH);
        let y = HEIGHT - 1.0 - (*n as f64 / high) * (HEIGHT - 2.0);
        let _ = write!(line, "{x:.1},{y:.1} ");
    }
    format!(
        r#"<svg class="spark" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="backlog, last 15 minutes: {low} to {high} jobs"><title>backlog, last 15 minutes: {low} to {high} jobs</title><polyline fill="none" stroke="currentColor" stroke-width="1.5" points="{}"/></svg>"#,
        line.trim_end(),
        high = high as u64,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_point_draws_nothing_and_the_line_spans_the_window() {
        assert_eq!(backlog(&[(0, 5)], 0), "");
        let svg = backlog(&[(KEPT_MS / 2, 0), (KEPT_MS, 10)], KEPT_MS);
        assert!(svg.contains(r#"points="60.0,23.0 120.0,1.0""#), "{svg}");
        assert!(svg.contains("0 to 10 jobs"), "{svg}");
    }
}
