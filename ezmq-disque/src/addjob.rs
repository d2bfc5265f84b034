//! The `ADDJOB` of a push: its arguments, always explicit (`REPLICATE`,
//! `RETRY`, `TTL` and the replication timeout, from the push's options
//! and the client's defaults, durations rounded up to whole seconds), as a
//! [`redis::Cmd`] for a single push or written straight into a
//! connection's buffer for a batch ([`PackedAddJobs`]).

use std::time::Duration;

use ezmq_core::spi::envelope;
use ezmq_core::{PushOptions, Topic};

use crate::config::DisqueConfig;
use crate::push_options::DisquePushOptions;

/// The arguments of one `ADDJOB` after the queue and the body.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct AddJobArgs {
    timeout_ms: u64,
    replicate: u32,
    retry: u64,
    ttl: u64,
    delay: u64,
    maxlen: Option<u64>,
    async_replication: bool,
}

impl AddJobArgs {
    /// The arguments of a push with `options` on a cluster of
    /// `node_count` nodes, and its replication timeout.
    fn of(cfg: &DisqueConfig, node_count: u32, options: &PushOptions) -> (Self, Duration) {
        let default_disque = DisquePushOptions::default();
        let disque = options
            .backend_options::<DisquePushOptions>()
            .unwrap_or(&default_disque);
        let (replicate, retry) = if disque.at_most_once {
            (1, 0)
        } else {
            let replicate = disque
                .replicate
                .or(cfg.default_replicate)
                .unwrap_or_else(|| node_count.clamp(1, 2));
            let retry = ceil_secs(disque.retry.unwrap_or(cfg.default_retry)).max(1);
            (replicate, retry)
        };
        let delay = options.delay.map(ceil_secs).unwrap_or(0);
        let mut ttl = ceil_secs(options.ttl.unwrap_or(cfg.default_ttl)).max(1);
        if delay >= ttl {
            // Disque refuses DELAY >= TTL: an explicit TTL only lost to the
            // rounding, a default TTL counts from the end of the delay.
            ttl = if options.ttl.is_some() {
                delay + 1
            } else {
                delay + ttl
            };
        }
        let timeout = disque.timeout.unwrap_or(cfg.default_add_timeout);
        let timeout_ms = u64::try_from(timeout.as_millis())
            .unwrap_or(u64::MAX)
            .max(1);
        let args = AddJobArgs {
            timeout_ms,
            replicate,
            retry,
            ttl,
            delay,
            maxlen: disque.maxlen.map(u64::from),
            async_replication: disque.async_replication,
        };
        (args, timeout)
    }

    /// Number of RESP arguments, the command name, queue and body included.
    fn count(&self) -> usize {
        10 + if self.delay > 0 { 2 } else { 0 }
            + if self.maxlen.is_some() { 2 } else { 0 }
            + usize::from(self.async_replication)
    }

    /// Feeds every argument after the body to `arg`, in order.
    fn each_after_body(&self, mut arg: impl FnMut(Arg<'_>)) {
        arg(Arg::Number(self.timeout_ms));
        arg(Arg::Text("REPLICATE"));
        arg(Arg::Number(u64::from(self.replicate)));
        arg(Arg::Text("RETRY"));
        arg(Arg::Number(self.retry));
        arg(Arg::Text("TTL"));
        arg(Arg::Number(self.ttl));
        if self.delay > 0 {
            arg(Arg::Text("DELAY"));
            arg(Arg::Number(self.delay));
        }
        if let Some(maxlen) = self.maxlen {
            arg(Arg::Text("MAXLEN"));
            arg(Arg::Number(maxlen));
        }
        if self.async_replication {
            arg(Arg::Text("ASYNC"));
        }
    }
}

/// One argument after the body.
enum Arg<'a> {
    Text(&'a str),
    Number(u64),
}

/// Builds the `ADDJOB` of a push of the (already enveloped) `body`.
/// Returns the command and its replication timeout.
pub(crate) fn addjob_cmd(
    cfg: &DisqueConfig,
    node_count: u32,
    topic: &Topic,
    body: &[u8],
    options: &PushOptions,
) -> (redis::Cmd, Duration) {
    let (args, timeout) = AddJobArgs::of(cfg, node_count, options);
    // Sized for every argument, so building it does not reallocate
    // (numbers take at most 20 digits).
    let mut cmd = redis::Cmd::with_capacity(args.count(), body.len() + topic.as_str().len() + 160);
    cmd.arg("ADDJOB").arg(topic.as_str()).arg(body);
    args.each_after_body(|arg| match arg {
        Arg::Text(text) => {
            cmd.arg(text);
        }
        Arg::Number(n) => {
            cmd.arg(n);
        }
    });
    (cmd, timeout)
}

/// `ADDJOB`s written one after the other in RESP, ready for one write to a
/// node: a batch costs no command object per job, and each job's envelope
/// ([`envelope`]) is written in place.
pub(crate) struct PackedAddJobs {
    bytes: Vec<u8>,
    count: usize,
    longest: Duration,
    /// The envelope prefix of the job being written (reused).
    prefix: Vec<u8>,
}

impl PackedAddJobs {
    /// Room for `jobs` jobs of about `body_len` bytes each.
    pub(crate) fn with_capacity(jobs: usize, body_len: usize) -> Self {
        PackedAddJobs {
            bytes: Vec::with_capacity(jobs.saturating_mul(body_len.saturating_add(200))),
            count: 0,
            longest: Duration::ZERO,
            prefix: Vec::new(),
        }
    }

    /// Appends the `ADDJOB` of a push of `body` with `options` (its
    /// headers stored in their envelope, the bare body when there are
    /// none): the same bytes as [`addjob_cmd`] of the enveloped body.
    pub(crate) fn push(
        &mut self,
        cfg: &DisqueConfig,
        node_count: u32,
        topic: &Topic,
        body: &[u8],
        options: &PushOptions,
    ) {
        let (args, timeout) = AddJobArgs::of(cfg, node_count, options);
        self.longest = self.longest.max(timeout);
        self.count += 1;
        self.prefix.clear();
        envelope::write_prefix(&options.headers, &mut self.prefix);
        let out = &mut self.bytes;
        write_header(out, b'*', args.count());
        write_bulk(out, b"ADDJOB");
        write_bulk(out, topic.as_str().as_bytes());
        write_header(out, b'$', self.prefix.len() + body.len());
        out.extend_from_slice(&self.prefix);
        out.extend_from_slice(body);
        out.extend_from_slice(b"\r\n");
        args.each_after_body(|arg| match arg {
            Arg::Text(text) => write_bulk(out, text.as_bytes()),
            Arg::Number(n) => write_bulk(out, digits(n, &mut [0; 20])),
        });
    }

    /// The commands, in RESP.
    pub(crate) fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Number of commands written.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The longest replication timeout of the commands written.
    pub(crate) fn longest_timeout(&self) -> Duration {
        self.longest
    }
}

/// `<kind><n>\r\n` (an array's or a bulk string's header).
fn write_header(out: &mut Vec<u8>, kind: u8, n: usize) {
    out.push(kind);
    let n = u64::try_from(n).unwrap_or(u64::MAX);
    out.extend_from_slice(digits(n, &mut [0; 20]));
    out.extend_from_slice(b"\r\n");
}

/// The decimal digits of `n`, written into the end of `buf`.
fn digits(mut n: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut start = buf.len();
    loop {
        start -= 1;
        buf[start] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            return &buf[start..];
        }
    }
}

fn write_bulk(out: &mut Vec<u8>, bytes: &[u8]) {
    write_header(out, b'$', bytes.len());
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
}

/// `d` in whole seconds, rounded up.
pub(crate) fn ceil_secs(d: Duration) -> u64 {
    d.as_secs() + u64::from(d.subsec_nanos() > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ezmq_core::Headers;

    fn args(cmd: &redis::Cmd) -> Vec<String> {
        cmd.args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "<other>".to_owned(),
            })
            .collect()
    }

    #[test]
    fn rounds_up() {
        assert_eq!(ceil_secs(Duration::from_millis(1)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1000)), 1);
        assert_eq!(ceil_secs(Duration::from_millis(1001)), 2);
        assert_eq!(ceil_secs(Duration::ZERO), 0);
    }

    #[test]
    fn addjob_is_always_explicit() {
        let cfg = DisqueConfig::default();
        let t = Topic::new("q").unwrap();
        let (cmd, timeout) = addjob_cmd(&cfg, 1, &t, b"b", &PushOptions::new());
        assert_eq!(
            args(&cmd).join(" "),
            "ADDJOB q b 5000 REPLICATE 1 RETRY 30 TTL 86400"
        );
        assert_eq!(timeout, Duration::from_secs(5));

        let opts = PushOptions::new()
            .with_delay(Duration::from_millis(1500))
            .with_ttl(Duration::from_millis(60_001))
            .with_backend_options(
                DisquePushOptions::new()
                    .with_retry(Duration::from_millis(200))
                    .with_maxlen(9)
                    .with_async_replication(true)
                    .with_timeout(Duration::from_millis(250)),
            );
        let (cmd, _) = addjob_cmd(&cfg, 5, &t, b"b", &opts);
        assert_eq!(
            args(&cmd).join(" "),
            "ADDJOB q b 250 REPLICATE 2 RETRY 1 TTL 61 DELAY 2 MAXLEN 9 ASYNC"
        );

        let once = PushOptions::new()
            .with_backend_options(DisquePushOptions::new().with_at_most_once(true));
        let (cmd, _) = addjob_cmd(&cfg, 5, &t, b"b", &once);
        let a = args(&cmd);
        assert_eq!(a[4..8], ["REPLICATE", "1", "RETRY", "0"]);

        // A delay past the default TTL pushes the TTL out.
        let opts = PushOptions::new().with_delay(Duration::from_secs(2 * 86400));
        let (cmd, _) = addjob_cmd(&cfg, 3, &t, b"b", &opts);
        assert_eq!(args(&cmd)[9], (3 * 86400).to_string());
    }

    #[test]
    fn packed_addjobs_are_the_commands_of_the_enveloped_bodies() {
        let cfg = DisqueConfig::default();
        let t = Topic::new("queue").unwrap();
        let mut headers = Headers::new();
        headers.insert("ezmq-message-id", "0193");
        let jobs = [
            PushOptions::new(),
            PushOptions::new()
                .with_headers(headers)
                .with_delay(Duration::from_secs(3))
                .with_backend_options(
                    DisquePushOptions::new()
                        .with_maxlen(7)
                        .with_async_replication(true)
                        .with_timeout(Duration::from_secs(9)),
                ),
        ];
        let mut packed = PackedAddJobs::with_capacity(2, 4);
        let mut expected = Vec::new();
        for options in &jobs {
            packed.push(&cfg, 3, &t, b"body", options);
            let stored = envelope::encode(&options.headers, b"body");
            let (cmd, _) = addjob_cmd(&cfg, 3, &t, &stored, options);
            expected.extend_from_slice(&cmd.get_packed_command());
        }
        assert_eq!(packed.bytes(), &expected[..]);
        assert_eq!(packed.count(), 2);
        assert_eq!(packed.longest_timeout(), Duration::from_secs(9));
        assert_eq!(digits(0, &mut [0; 20]), b"0");
        assert_eq!(
            digits(u64::MAX, &mut [0; 20]),
            u64::MAX.to_string().as_bytes()
        );
    }
}
