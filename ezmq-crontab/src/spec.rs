//! Cron expressions: parsing (5, 6 or 7 fields, `@` shorthands) and tick
//! arithmetic in a time zone.

use std::collections::BTreeSet;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use cron::Schedule;
use ezmq_core::{Error, Result};

/// A parsed cron expression with the time zone its fields are read in.
#[derive(Clone, Debug)]
pub(crate) struct CronSpec {
    /// The expression as the user wrote it.
    source: String,
    schedule: Schedule,
    timezone: Tz,
}

impl CronSpec {
    /// Parses `spec`:
    ///
    /// - 5 fields `min hour day-of-month month day-of-week` (seconds = 0 is
    ///   prepended);
    /// - 6 fields `sec min hour day-of-month month day-of-week` and 7 fields
    ///   (plus `year`);
    /// - `@yearly`, `@annually`, `@monthly`, `@weekly`, `@daily`, `@hourly`.
    ///
    /// Days of week use the Unix numbering in every form (`0`–`7`, `0` and
    /// `7` = Sunday, `1` = Monday), translated for the `cron` crate (whose
    /// own numbering is `1` = Sunday); names (`MON-FRI`) work everywhere.
    /// Numeric values are range-checked here, so errors name the user's
    /// field and value rather than the translated expression.
    pub(crate) fn parse(spec: &str, timezone: Tz) -> Result<Self> {
        let trimmed = spec.trim();
        let expression = if let Some(shorthand) = trimmed.strip_prefix('@') {
            check_shorthand(shorthand).map_err(|reason| invalid(spec, &reason))?;
            trimmed.to_owned()
        } else {
            let fields: Vec<&str> = trimmed.split_whitespace().collect();
            let names: &[Field] = match fields.len() {
                5 => &FIVE,
                6 => &SIX,
                7 => &SEVEN,
                n => {
                    return Err(invalid(
                        spec,
                        &format!("has {n} fields, expected 5, 6 or 7"),
                    ))
                }
            };
            let mut out: Vec<String> = Vec::with_capacity(7);
            if fields.len() == 5 {
                out.push("0".to_owned());
            }
            for (position, (field, kind)) in fields.iter().zip(names).enumerate() {
                check_field(field, kind).map_err(|reason| {
                    invalid(
                        spec,
                        &format!("field {} ({}) {reason}", position + 1, kind.name),
                    )
                })?;
                if kind.name == "day-of-week" {
                    out.push(unix_day_of_week(field).map_err(|reason| {
                        invalid(
                            spec,
                            &format!("field {} (day-of-week): {reason}", position + 1),
                        )
                    })?);
                } else {
                    out.push((*field).to_owned());
                }
            }
            out.join(" ")
        };
        let schedule =
            Schedule::from_str(&expression).map_err(|e| invalid(spec, &e.to_string()))?;
        let parsed = CronSpec {
            source: spec.to_owned(),
            schedule,
            timezone,
        };
        if parsed.next_after(Utc::now()).is_none() {
            return Err(invalid(spec, "has no upcoming tick"));
        }
        Ok(parsed)
    }

    /// The expression as given.
    pub(crate) fn source(&self) -> &str {
        &self.source
    }

    /// The first tick strictly after `t` (whole seconds).
    pub(crate) fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.schedule
            .after(&t.with_timezone(&self.timezone))
            .next()
            .map(|d| d.with_timezone(&Utc))
    }

    /// The last tick at or before `t`.
    pub(crate) fn last_at_or_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        // `prev_from` is strict for whole seconds; nudge by a nanosecond so
        // a tick exactly at `t` counts.
        let probe = t + chrono::Duration::nanoseconds(1);
        self.schedule
            .after(&probe.with_timezone(&self.timezone))
            .next_back()
            .map(|d| d.with_timezone(&Utc))
    }

    /// The time from `tick` to the tick after it: the schedule's period at
    /// that point (`None` when no tick follows).
    pub(crate) fn gap_after(&self, tick: DateTime<Utc>) -> Option<std::time::Duration> {
        let next = self.next_after(tick)?;
        (next - tick).to_std().ok()
    }
}

fn invalid(spec: &str, reason: &str) -> Error {
    Error::invalid_option(
        "spec",
        format!(
            "{spec:?} is not a valid cron expression: {reason} (expected `min hour day-of-month \
             month day-of-week`, `sec min hour day-of-month month day-of-week [year]` or \
             @yearly/@monthly/@weekly/@daily/@hourly; days of week 0-7, 0 and 7 = Sunday)"
        ),
    )
}

/// One field of an expression: its name and the range of its numbers.
struct Field {
    name: &'static str,
    min: u32,
    max: u32,
}

const SECOND: Field = Field {
    name: "second",
    min: 0,
    max: 59,
};
const MINUTE: Field = Field {
    name: "minute",
    min: 0,
    max: 59,
};
const HOUR: Field = Field {
    name: "hour",
    min: 0,
    max: 23,
};
const DAY_OF_MONTH: Field = Field {
    name: "day-of-month",
    min: 1,
    max: 31,
};
const MONTH: Field = Field {
    name: "month",
    min: 1,
    max: 12,
};
const DAY_OF_WEEK: Field = Field {
    name: "day-of-week",
    min: 0,
    max: 7,
};
const YEAR: Field = Field {
    name: "year",
    min: 1970,
    max: 2100,
};

const FIVE: [Field; 5] = [MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];
const SIX: [Field; 6] = [SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK];
const SEVEN: [Field; 7] = [SECOND, MINUTE, HOUR, DAY_OF_MONTH, MONTH, DAY_OF_WEEK, YEAR];

/// Checks the numbers of one field against its range. Non-numeric items
/// (`*`, `?`, names, `L`, ...) are left to the `cron` crate.
fn check_field(field: &str, kind: &Field) -> std::result::Result<(), String> {
    for item in field.split(',') {
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => (base, Some(step)),
            None => (item, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(0) => return Err(format!("has a step of 0 in {item:?}")),
                Ok(_) => {}
                Err(_) => return Err(format!("has an invalid step in {item:?}")),
            }
        }
        let bounds: Vec<&str> = match base.split_once('-') {
            Some((a, b)) => vec![a, b],
            None => vec![base],
        };
        for bound in bounds {
            if let Ok(n) = bound.parse::<u32>() {
                if n < kind.min || n > kind.max {
                    return Err(format!(
                        "value {n} is out of range {}-{}",
                        kind.min, kind.max
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Accepts the shorthands the `cron` crate knows; explains the others.
fn check_shorthand(name: &str) -> std::result::Result<(), String> {
    match name.to_ascii_lowercase().as_str() {
        "yearly" | "annually" | "monthly" | "weekly" | "daily" | "hourly" => Ok(()),
        other if other.starts_with("every") => Err(
            "`@every <interval>` is not supported; write the interval as a 6-field \
             expression, e.g. `*/5 * * * * *` for every 5 seconds"
                .to_owned(),
        ),
        other => Err(format!("unknown shorthand `@{other}`")),
    }
}

/// Translates a classic Unix day-of-week field (`0`–`7`, `0` and `7` =
/// Sunday) into the `cron` crate's numbering (`1`–`7`, `1` = Sunday).
/// Names (`MON-FRI`), `*` and `?` are left alone; numeric items, ranges and
/// steps are expanded into an explicit list.
fn unix_day_of_week(field: &str) -> std::result::Result<String, String> {
    let mut out: Vec<String> = Vec::new();
    for item in field.split(',') {
        let (base, step) = match item.split_once('/') {
            Some((base, step)) => {
                let step: u32 = step
                    .parse()
                    .ok()
                    .filter(|s| *s > 0)
                    .ok_or_else(|| format!("bad step in day-of-week item {item:?}"))?;
                (base, Some(step))
            }
            None => (item, None),
        };
        let numeric = |s: &str| -> Option<u32> { s.parse().ok() };
        let range = if base == "*" || base == "?" {
            if step.is_none() {
                out.push(base.to_owned());
                continue;
            }
            Some((0, 6))
        } else if let Some(n) = numeric(base) {
            Some(if step.is_some() { (n, 6) } else { (n, n) })
        } else if let Some((a, b)) = base.split_once('-') {
            match (numeric(a), numeric(b)) {
                (Some(a), Some(b)) => Some((a, b)),
                _ => None,
            }
        } else {
            None
        };
        let Some((start, end)) = range else {
            // Names (`MON`, `MON-FRI`, with or without a step) mean the same
            // in both numberings.
            out.push(item.to_owned());
            continue;
        };
        if start > 7 || end > 7 || start > end {
            return Err(format!(
                "day-of-week item {item:?} is out of range (0-7, 0 and 7 = Sunday)"
            ));
        }
        let step = step.unwrap_or(1) as usize;
        let days: BTreeSet<u32> = (start..=end).step_by(step).map(|d| d % 7 + 1).collect();
        out.extend(days.iter().map(u32::to_string));
    }
    if out.is_empty() {
        return Err("empty day-of-week field".to_owned());
    }
    Ok(out.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{Datelike, TimeZone, Timelike, Weekday};

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).single().unwrap()
    }

    #[test]
    fn six_and_seven_fields() {
        let s = CronSpec::parse("0/10 * * * * *", Tz::UTC).unwrap();
        let t = utc(2030, 1, 1, 0, 0, 3);
        assert_eq!(s.next_after(t), Some(utc(2030, 1, 1, 0, 0, 10)));
        assert_eq!(
            s.gap_after(utc(2030, 1, 1, 0, 0, 10)),
            Some(std::time::Duration::from_secs(10))
        );
        let s = CronSpec::parse("0 0 12 1 1 * 2099", Tz::UTC).unwrap();
        assert_eq!(s.next_after(t), Some(utc(2099, 1, 1, 12, 0, 0)));
    }

    #[test]
    fn five_fields_prepend_seconds() {
        let s = CronSpec::parse("*/15 * * * *", Tz::UTC).unwrap();
        let t = utc(2030, 1, 1, 0, 7, 42);
        assert_eq!(s.next_after(t), Some(utc(2030, 1, 1, 0, 15, 0)));
        assert_eq!(s.source(), "*/15 * * * *");
    }

    #[test]
    fn five_fields_use_unix_day_numbers() {
        // 2030-01-01 is a Tuesday.
        let t = utc(2030, 1, 1, 12, 0, 0);
        let next_day = |spec: &str| {
            CronSpec::parse(spec, Tz::UTC)
                .unwrap()
                .next_after(t)
                .unwrap()
                .weekday()
        };
        assert_eq!(next_day("0 9 * * 0"), Weekday::Sun);
        assert_eq!(next_day("0 9 * * 7"), Weekday::Sun);
        assert_eq!(next_day("0 9 * * 1"), Weekday::Mon);
        assert_eq!(next_day("0 9 * * 6"), Weekday::Sat);
        assert_eq!(next_day("0 9 * * 1-5"), Weekday::Wed);
        assert_eq!(next_day("0 9 * * 5-7"), Weekday::Fri);
        assert_eq!(next_day("0 9 * * SUN"), Weekday::Sun);
        assert_eq!(next_day("0 9 * * MON-FRI"), Weekday::Wed);
        assert_eq!(unix_day_of_week("*/2").unwrap(), "1,3,5,7");
        assert_eq!(unix_day_of_week("1-5,0").unwrap(), "2,3,4,5,6,1");
        assert_eq!(unix_day_of_week("*").unwrap(), "*");
        assert!(unix_day_of_week("8").is_err());
        assert!(unix_day_of_week("5-2").is_err());
        assert!(unix_day_of_week("1/0").is_err());
    }

    #[test]
    fn every_form_uses_unix_day_numbers() {
        // 2030-01-01 is a Tuesday.
        let t = utc(2030, 1, 1, 12, 0, 0);
        let next_day = |spec: &str| {
            CronSpec::parse(spec, Tz::UTC)
                .unwrap()
                .next_after(t)
                .unwrap()
                .weekday()
        };
        for (five, six, seven, day) in [
            ("0 0 * * 0", "0 0 0 * * 0", "0 0 0 * * 0 *", Weekday::Sun),
            ("0 0 * * 7", "0 0 0 * * 7", "0 0 0 * * 7 *", Weekday::Sun),
            ("0 0 * * 1", "0 0 0 * * 1", "0 0 0 * * 1 *", Weekday::Mon),
            ("0 0 * * 6", "0 0 0 * * 6", "0 0 0 * * 6 *", Weekday::Sat),
            (
                "0 0 * * MON",
                "0 0 0 * * MON",
                "0 0 0 * * MON *",
                Weekday::Mon,
            ),
            (
                "0 0 * * 3-5",
                "0 0 0 * * 3-5",
                "0 0 0 * * 3-5 *",
                Weekday::Wed,
            ),
        ] {
            assert_eq!(next_day(five), day, "{five}");
            assert_eq!(next_day(six), day, "{six}");
            assert_eq!(next_day(seven), day, "{seven}");
        }
    }

    #[test]
    fn out_of_range_values_name_the_users_field() {
        let message = |spec: &str| CronSpec::parse(spec, Tz::UTC).unwrap_err().to_string();
        let m = message("61 * * * *");
        assert!(m.contains("\"61 * * * *\""), "{m}");
        assert!(
            m.contains("field 1 (minute) value 61 is out of range 0-59"),
            "{m}"
        );
        let m = message("0 61 * * * *");
        assert!(m.contains("field 2 (minute) value 61"), "{m}");
        let m = message("0 0 0 * * 8");
        assert!(
            m.contains("field 6 (day-of-week) value 8 is out of range 0-7"),
            "{m}"
        );
        let m = message("0 25 * * *");
        assert!(m.contains("field 2 (hour)"), "{m}");
        let m = message("*/0 * * * *");
        assert!(m.contains("step of 0"), "{m}");
        let m = message("@every 5s");
        assert!(
            m.contains("not supported") && m.contains("*/5 * * * * *"),
            "{m}"
        );
        assert!(message("@sometimes").contains("unknown shorthand"));
    }

    #[test]
    fn shorthands() {
        let s = CronSpec::parse("@hourly", Tz::UTC).unwrap();
        let next = s.next_after(utc(2030, 1, 1, 0, 7, 42)).unwrap();
        assert_eq!((next.hour(), next.minute(), next.second()), (1, 0, 0));
    }

    #[test]
    fn invalid_specs_are_explained() {
        for bad in [
            "",
            "* * *",
            "61 * * * * *",
            "* * * * * * * *",
            "not a cron",
            "0 0 0 1 1 * 2001",
        ] {
            let err = CronSpec::parse(bad, Tz::UTC).unwrap_err();
            assert!(
                matches!(err, Error::InvalidOption { option: "spec", .. }),
                "{bad}: {err}"
            );
            assert!(
                err.to_string().contains("not a valid cron expression"),
                "{err}"
            );
        }
    }

    #[test]
    fn time_zone_applies() {
        let s = CronSpec::parse("0 0 9 * * *", Tz::Europe__Paris).unwrap();
        // January: Paris is UTC+1, so 09:00 local is 08:00 UTC.
        let next = s.next_after(utc(2030, 1, 1, 0, 0, 0)).unwrap();
        assert_eq!(next, utc(2030, 1, 1, 8, 0, 0));
    }

    #[test]
    fn last_tick_includes_exact_time() {
        let s = CronSpec::parse("0/10 * * * * *", Tz::UTC).unwrap();
        assert_eq!(
            s.last_at_or_before(utc(2030, 1, 1, 0, 0, 10)),
            Some(utc(2030, 1, 1, 0, 0, 10))
        );
        let t = utc(2030, 1, 1, 0, 0, 15) + chrono::Duration::milliseconds(300);
        assert_eq!(s.last_at_or_before(t), Some(utc(2030, 1, 1, 0, 0, 10)));
    }
}
