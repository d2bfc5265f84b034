//! HTML building: escaping, the page shell, forms. Every value from the
//! broker goes through [`escape`] (a job body holding `<script>` is shown
//! as text); the page has no script and loads nothing from elsewhere.

use std::fmt::Write;
use std::time::SystemTime;

use axum::response::Html;
use chrono::{DateTime, Utc};

/// `text` with `& < > " '` escaped: safe in element content and in
/// quoted attribute values.
pub(crate) fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `text` percent-encoded for one path segment.
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-_.~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

/// At most `max` characters of `text`, with `…` when cut.
pub(crate) fn clip(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A time as `2026-12-07 14:22:02Z`.
pub(crate) fn time(at: SystemTime) -> String {
    DateTime::<Utc>::from(at)
        .format("%Y-%m-%d %H:%M:%SZ")
        .to_string()
}

/// A Unix-milliseconds time as [`time`] does; `-` when out of range.
pub(crate) fn time_ms(ms: i64) -> String {
    DateTime::<Utc>::from_timestamp_millis(ms).map_or_else(
        || "-".to_owned(),
        |t| t.format("%Y-%m-%d %H:%M:%SZ").to_string(),
    )
}

/// A rate per second: `-` when unknown (the first 10 seconds of
/// sampling, or a broker with no presence).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)] // rounded, non-negative
pub(crate) fn rate(per_second: Option<f64>) -> String {
    match per_second {
        None => "-".to_owned(),
        Some(r) if r >= 100.0 => format!("{}/s", r.round() as u64),
        Some(r) => format!("{r:.1}/s"),
    }
}

/// A count, or `-` when the broker cannot tell.
pub(crate) fn count(n: Option<u64>) -> String {
    n.map_or_else(|| "-".to_owned(), |n| n.to_string())
}

/// A form posting to `action` with one button; `fields` are hidden
/// inputs (name, value), the CSRF token included.
pub(crate) fn button(action: &str, label: &str, csrf: &str, fields: &[(&str, &str)]) -> String {
    let mut out = format!(
        r#"<form class="inline" method="post" action="{}"><input type="hidden" name="csrf" value="{}">"#,
        escape(action),
        escape(csrf)
    );
    for (name, value) in fields {
        let _ = write!(
            out,
            r#"<input type="hidden" name="{}" value="{}">"#,
            escape(name),
            escape(value)
        );
    }
    let _ = write!(
        out,
        r#"<button type="submit">{}</button></form>"#,
        escape(label)
    );
    out
}

/// A table: header cells (text) and rows of cells (HTML, already escaped).
pub(crate) fn table(id: &str, header: &[&str], rows: &[Vec<String>]) -> String {
    let mut out = format!(r#"<table id="{}"><thead><tr>"#, escape(id));
    for h in header {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    if rows.is_empty() {
        let _ = write!(
            out,
            r#"<tr class="none"><td class="note" colspan="{}">none</td></tr>"#,
            header.len()
        );
    }
    for row in rows {
        out.push_str("<tr>");
        for cell in row {
            let _ = write!(out, "<td>{cell}</td>");
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>");
    out
}

const STYLE: &str = "body{font:14px system-ui,sans-serif;margin:0;color:#222}\
header{background:#243447;color:#fff;padding:8px 16px}\
header a{color:#fff;margin-right:16px;text-decoration:none}\
header a.on{text-decoration:underline}\
main{padding:8px 16px}\
table{border-collapse:collapse;margin:8px 0 16px}\
th,td{border-bottom:1px solid #ddd;padding:4px 8px;text-align:left;vertical-align:top}\
td.n,th.n{text-align:right}\
code,pre{font:12px ui-monospace,monospace;white-space:pre-wrap;word-break:break-all;margin:0}\
form.inline{display:inline;margin:0 4px 0 0}\
.note{color:#666}.flash{background:#e8f5e9;padding:6px 10px;margin:8px 0}\
.error{background:#fdecea;padding:6px 10px;margin:8px 0}\
svg.spark{color:#2b6cb0;vertical-align:middle}";

/// One of the sections the header links to.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Section {
    Topics,
    Cron,
    Groups,
    Processes,
    Health,
}

/// A whole page: the header, `flash` (a message after an action, text),
/// then `body` (HTML).
pub(crate) fn page(
    title: &str,
    section: Section,
    backend: &str,
    flash: Option<&str>,
    body: &str,
) -> Html<String> {
    let link = |href: &str, label: &str, s: Section| {
        let class = if s == section { r#" class="on""# } else { "" };
        format!(r#"<a href="{href}"{class}>{label}</a>"#)
    };
    let flash = flash
        .map(|text| format!(r#"<p class="flash" id="flash">{}</p>"#, escape(text)))
        .unwrap_or_default();
    Html(format!(
        "<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{title} · ezmq</title><style>{STYLE}</style></head><body>\
         <header><strong>ezmq</strong> <span class=\"note\">{backend}</span> &nbsp; {topics}{cron}{groups}{processes}{health}</header>\
         <main><h1>{title}</h1>{flash}{body}</main></body></html>",
        title = escape(title),
        backend = escape(backend),
        topics = link("/", "Topics", Section::Topics),
        cron = link("/cron", "Cron", Section::Cron),
        groups = link("/groups", "Groups", Section::Groups),
        processes = link("/processes", "Processes", Section::Processes),
        health = link("/health", "Health", Section::Health),
    ))
}

/// A note shown in a page (escaped).
pub(crate) fn note(text: &str) -> String {
    format!(r#"<p class="note">{}</p>"#, escape(text))
}

/// An error shown in a page (escaped).
pub(crate) fn error(text: &str) -> String {
    format!(r#"<p class="error">{}</p>"#, escape(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_is_escaped() {
        assert_eq!(
            escape(r#"<script>alert("x")</script> & 'y'"#),
            "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &#39;y&#39;"
        );
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(path_segment("orders.eu/1 x"), "orders.eu%2F1%20x");
    }

    #[test]
    fn long_text_is_clipped_on_a_char_boundary() {
        assert_eq!(clip("héllo", 2), "hé…");
        assert_eq!(clip("hi", 5), "hi");
    }
}
