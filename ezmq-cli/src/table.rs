//! Human output: aligned text tables, and the JSON alternative.

use std::fmt::Write as _;
use std::io::Write;

use serde::Serialize;

use crate::exit::CliResult;

/// A text table: a header row and rows of cells, printed with aligned
/// columns (numbers right-aligned).
#[derive(Debug, Default)]
pub(crate) struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column titles.
    pub(crate) fn new<I, S>(header: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Table {
            header: header.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row (missing cells are blank, extra ones dropped).
    pub(crate) fn row<I, S>(&mut self, cells: I)
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut row: Vec<String> = cells.into_iter().map(Into::into).collect();
        row.resize(self.header.len(), String::new());
        self.rows.push(row);
    }

    /// True when the table has no rows.
    pub(crate) fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row, each ending with a newline.
    pub(crate) fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.header[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let numeric: Vec<bool> = (0..self.header.len())
            .map(|i| {
                !self.rows.is_empty()
                    && self
                        .rows
                        .iter()
                        .all(|r| r[i] == "-" || r[i].parse::<f64>().is_ok())
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i > 0 {
                    line.push_str("  ");
                }
                let pad = widths[i].saturating_sub(cell.chars().count());
                if numeric[i] {
                    let _ = write!(line, "{}{cell}", " ".repeat(pad));
                } else {
                    let _ = write!(line, "{cell}{}", " ".repeat(pad));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// Prints `value` as pretty JSON on stdout.
pub(crate) fn print_json<T: Serialize>(value: &T) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer_pretty(&mut out, value).map_err(std::io::Error::from)?;
    writeln!(out)?;
    Ok(())
}

/// Prints `text` on stdout.
pub(crate) fn print_text(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// A job's headers as `name=value,...` for a table cell, without the job
/// id (the ID column shows it), clipped to `width`.
pub(crate) fn headers_cell(headers: &ezmq::Headers, width: usize) -> String {
    let shown: Vec<String> = headers
        .iter()
        .filter(|(k, _)| *k != ezmq::MESSAGE_ID_HEADER)
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    clip(&shown.join(","), width)
}

/// A time in milliseconds since the Unix epoch as `2026-11-30 15:04:05Z`
/// (UTC), `-` for zero.
pub(crate) fn time_ms(ms: u64) -> String {
    if ms == 0 {
        return "-".to_owned();
    }
    i64::try_from(ms)
        .ok()
        .and_then(chrono::DateTime::from_timestamp_millis)
        .map_or_else(
            || "-".to_owned(),
            |t| t.format("%Y-%m-%d %H:%M:%SZ").to_string(),
        )
}

/// At most `max` characters of `text` on one line (`…` when cut).
pub(crate) fn clip(text: &str, max: usize) -> String {
    let one_line: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        return one_line;
    }
    let mut cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_numbers_go_right() {
        let mut t = Table::new(["TOPIC", "WAITING"]);
        t.row(["orders", "5"]);
        t.row(["emails.high", "120"]);
        assert_eq!(
            t.render(),
            "TOPIC        WAITING\norders             5\nemails.high      120\n"
        );
    }

    #[test]
    fn clip_and_times() {
        assert_eq!(clip("a\nb", 10), "a b");
        assert_eq!(clip("abcdef", 4), "abc…");
        assert_eq!(time_ms(0), "-");
        assert_eq!(time_ms(1_000), "1970-01-01 00:00:01Z");
    }
}
