//! Latency percentiles and process memory.

use std::time::Duration;

/// Percentiles of a set of latency samples.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Latency {
    /// Samples.
    pub(crate) count: usize,
    /// Median.
    pub(crate) p50: Duration,
    /// 99th percentile.
    pub(crate) p99: Duration,
    /// 99.9th percentile.
    pub(crate) p999: Duration,
    /// Largest sample.
    pub(crate) max: Duration,
}

impl Latency {
    /// Sorts the samples (nanoseconds) and takes the nearest-rank
    /// percentiles.
    pub(crate) fn from_nanos(mut samples: Vec<u64>) -> Self {
        if samples.is_empty() {
            return Latency::default();
        }
        samples.sort_unstable();
        let at = |q: f64| {
            // Nearest rank: the smallest sample with at least q of the
            // samples at or below it.
            let rank = (q * samples.len() as f64).ceil() as usize;
            Duration::from_nanos(samples[rank.clamp(1, samples.len()) - 1])
        };
        Latency {
            count: samples.len(),
            p50: at(0.50),
            p99: at(0.99),
            p999: at(0.999),
            max: Duration::from_nanos(samples[samples.len() - 1]),
        }
    }
}

/// Formats a duration as milliseconds with three decimals.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1e3)
}

/// Formats a rate with thousands separators.
pub(crate) fn rate(per_sec: f64) -> String {
    let n = per_sec.round() as u64;
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A field of `/proc/self/status` in KiB (`VmRSS`, `VmHWM`); `None` where
/// there is no procfs.
pub(crate) fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

/// CPU time (user + system, all threads) this process has used, from
/// `/proc/self/stat` (10 ms resolution: Linux reports it in `USER_HZ` =
/// 100 ticks per second); `None` where there is no procfs.
pub(crate) fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses and may hold
    // spaces): state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(Duration::from_millis((utime + stime) * 10))
}

/// Resets the peak RSS (`VmHWM`) to the current RSS (Linux
/// `clear_refs` 5). Returns false when the kernel refuses.
pub(crate) fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Microseconds with two decimals, or `n/a`.
pub(crate) fn us(d: Option<Duration>) -> String {
    d.map_or_else(
        || "n/a".to_owned(),
        |d| format!("{:.2}", d.as_secs_f64() * 1e6),
    )
}

/// KiB as MiB with one decimal, or `n/a`.
pub(crate) fn mib(kib: Option<u64>) -> String {
    kib.map_or_else(|| "n/a".to_owned(), |k| format!("{:.1}", k as f64 / 1024.0))
}

/// The measuring window of a throughput cell whose tasks (in `set`) count
/// what they sent in `done` until `stop`: waits out the warm-up, counts
/// over `measure`, stops and joins the tasks (their first error fails the
/// cell). Returns messages per second and CPU per message.
pub(crate) async fn measure_window(
    warm: std::time::Duration,
    measure: std::time::Duration,
    done: &std::sync::atomic::AtomicU64,
    stop: &std::sync::atomic::AtomicBool,
    set: &mut tokio::task::JoinSet<crate::BoxResult<()>>,
) -> crate::BoxResult<(f64, Option<std::time::Duration>)> {
    use std::sync::atomic::Ordering;
    use std::time::Instant;

    tokio::time::sleep(warm).await;
    let (c0, t0, cpu0) = (done.load(Ordering::Relaxed), Instant::now(), process_cpu());
    tokio::time::sleep(measure).await;
    let (c1, t1, cpu1) = (done.load(Ordering::Relaxed), Instant::now(), process_cpu());
    stop.store(true, Ordering::Relaxed);
    while let Some(result) = set.join_next().await {
        result??;
    }
    let cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) if c1 > c0 => Some((b - a) / u32::try_from(c1 - c0).unwrap_or(u32::MAX)),
        _ => None,
    };
    Ok(((c1 - c0) as f64 / (t1 - t0).as_secs_f64(), cpu))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let l = Latency::from_nanos((1..=1000).rev().collect());
        assert_eq!(l.count, 1000);
        assert_eq!(l.p50, Duration::from_nanos(500));
        assert_eq!(l.p99, Duration::from_nanos(990));
        assert_eq!(l.p999, Duration::from_nanos(999));
        assert_eq!(l.max, Duration::from_nanos(1000));
        assert_eq!(Latency::from_nanos(Vec::new()).count, 0);
    }

    #[test]
    fn formats_rates() {
        assert_eq!(rate(1234567.4), "1,234,567");
        assert_eq!(rate(999.0), "999");
    }
}
