//! COMMAND, TIME, DEBUG, SLOWLOG and CONFIG.

use super::table::{entry, lookup, COMMANDS};
use super::{is, Outcome, Session};
use crate::frame::Frame;
use crate::parse::parse_i64;
use crate::persist::AppendFsync;
use crate::state::Node;
use bytes::Bytes;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// `COMMAND`, `COMMAND COUNT`, `COMMAND INFO name ...`.
pub(crate) fn command(_node: &Node, args: &[Bytes]) -> Frame {
    match args.first() {
        None => Frame::Array(COMMANDS.iter().map(entry).collect()),
        Some(sub) if is(sub, "count") && args.len() == 1 => Frame::Integer(COMMANDS.len() as i64),
        Some(sub) if is(sub, "info") => Frame::Array(
            args[1..]
                .iter()
                .map(|n| lookup(n).map_or(Frame::NullBulk, |i| entry(&COMMANDS[i])))
                .collect(),
        ),
        Some(_) => Frame::error("ERR Unknown subcommand or wrong number of arguments."),
    }
}

/// `TIME`: unix seconds and microseconds.
pub(crate) fn time(_node: &Node, _args: &[Bytes]) -> Frame {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Frame::Array(vec![
        Frame::Bulk(Bytes::from(now.as_secs().to_string())),
        Frame::Bulk(Bytes::from(now.subsec_micros().to_string())),
    ])
}

/// `DEBUG SLEEP seconds` (delays only this client) and `DEBUG ERROR text`.
pub(crate) fn debug(_node: &Node, _sess: &mut Session, args: &[Bytes]) -> Outcome {
    let sub = &args[0];
    if is(sub, "sleep") && args.len() == 2 {
        let secs = std::str::from_utf8(&args[1])
            .ok()
            .and_then(|s| s.parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .unwrap_or(0.0)
            .min(3600.0);
        return if secs == 0.0 {
            Outcome::Reply(Frame::status("OK"))
        } else {
            Outcome::Delay(Duration::from_secs_f64(secs), Frame::status("OK"))
        };
    }
    if is(sub, "error") && args.len() == 2 {
        return Outcome::Reply(Frame::Error(args[1].clone()));
    }
    Outcome::Reply(Frame::error_owned(format!(
        "ERR Unknown DEBUG subcommand or wrong number of arguments for '{}'",
        String::from_utf8_lossy(sub)
    )))
}

/// `SLOWLOG GET [n]`, `SLOWLOG LEN`, `SLOWLOG RESET`.
pub(crate) fn slowlog(node: &Node, args: &[Bytes]) -> Frame {
    let sub = &args[0];
    if is(sub, "len") && args.len() == 1 {
        return Frame::Integer(node.slowlog.len() as i64);
    }
    if is(sub, "reset") && args.len() == 1 {
        node.slowlog.reset();
        return Frame::status("OK");
    }
    if is(sub, "get") && args.len() <= 2 {
        let n = match args.get(1) {
            None => 10,
            Some(a) => match parse_i64(a) {
                Some(n) => n.max(0) as usize,
                None => return super::not_int(),
            },
        };
        return Frame::Array(
            node.slowlog
                .get(n)
                .into_iter()
                .map(|e| {
                    Frame::Array(vec![
                        Frame::Integer(e.id as i64),
                        Frame::Integer(e.time_s as i64),
                        Frame::Integer(e.usec as i64),
                        Frame::Array(e.args.into_iter().map(Frame::Bulk).collect()),
                    ])
                })
                .collect(),
        );
    }
    Frame::error("ERR Unknown SLOWLOG subcommand or wrong # of args. Try GET, RESET, LEN.")
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

/// Every parameter CONFIG GET knows, with its current value.
fn parameters(node: &Node) -> Vec<(&'static str, String)> {
    let c = &node.config;
    let s = &node.settings;
    let fsync = node.aof.as_ref().map_or(c.appendfsync, |a| a.policy());
    vec![
        ("port", node.port.to_string()),
        ("bind", c.bind.to_string()),
        ("dir", c.dir.display().to_string()),
        ("appendonly", yes_no(node.aof.is_some())),
        ("appendfsync", fsync.to_string()),
        (
            "aof-enqueue-jobs-once",
            yes_no(s.enqueue_jobs_once.load(Ordering::Relaxed)),
        ),
        ("requirepass", node.auth.get().unwrap_or_default()),
        ("maxclients", c.max_clients.to_string()),
        ("maxmemory", c.max_memory_bytes.to_string()),
        ("maxmemory-policy", "noeviction".to_string()),
        ("maxmemory-clients", node.query_budget.max().to_string()),
        ("proto-max-bulk-len", node.max_request.to_string()),
        (
            "request-stall-timeout",
            c.request_stall_timeout.as_secs().to_string(),
        ),
        ("timeout", s.timeout.load(Ordering::Relaxed).to_string()),
        ("hz", s.hz.load(Ordering::Relaxed).to_string()),
        (
            "slowlog-log-slower-than",
            node.slowlog.slower_than.load(Ordering::Relaxed).to_string(),
        ),
        (
            "slowlog-max-len",
            node.slowlog.max_len.load(Ordering::Relaxed).to_string(),
        ),
    ]
}

/// Redis-style glob match (`*`, `?`, `[...]` without ranges), case-sensitive.
///
/// Iterative, with backtracking to the last `*` only: O(pattern × name)
/// steps whatever the pattern (a recursive matcher is exponential in the
/// number of stars).
fn glob(p: &[u8], s: &[u8]) -> bool {
    let (mut pi, mut si) = (0, 0);
    // After the last `*` seen: where the pattern resumes, and how much of
    // the name that `*` has taken so far.
    let mut star: Option<(usize, usize)> = None;
    while si < s.len() {
        if p.get(pi) == Some(&b'*') {
            pi += 1;
            star = Some((pi, si));
            continue;
        }
        if let Some(next) = glob_one(p, pi, s[si]) {
            pi = next;
            si += 1;
        } else if let Some((resume, taken)) = star {
            pi = resume;
            si = taken + 1;
            star = Some((resume, si));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&b| b == b'*')
}

/// Matches the one-character token at `p[pi]` (`?`, a `[...]` class or a
/// literal; never `*`) against `c`; returns the index after the token.
fn glob_one(p: &[u8], pi: usize, c: u8) -> Option<usize> {
    let rest = p.get(pi..).filter(|r| !r.is_empty())?;
    match rest[0] {
        b'?' => Some(pi + 1),
        b'[' => match rest.iter().position(|&b| b == b']') {
            Some(end) if end > 1 => rest[1..end].contains(&c).then_some(pi + end + 1),
            _ => (c == b'[').then_some(pi + 1),
        },
        b => (b == c).then_some(pi + 1),
    }
}

/// `CONFIG GET pattern`, `CONFIG SET name value`, RESETSTAT, REWRITE.
pub(crate) fn config(node: &Node, _sess: &mut Session, args: &[Bytes]) -> Outcome {
    Outcome::Reply(config_inner(node, args))
}

fn config_inner(node: &Node, args: &[Bytes]) -> Frame {
    let sub = &args[0];
    if is(sub, "get") {
        if args.len() != 2 {
            return Frame::error("ERR Wrong number of arguments for CONFIG GET");
        }
        let mut out = Vec::new();
        for (name, value) in parameters(node) {
            if glob(&args[1], name.as_bytes()) {
                out.push(Frame::Bulk(Bytes::from_static(name.as_bytes())));
                out.push(Frame::Bulk(Bytes::from(value)));
            }
        }
        return Frame::Array(out);
    }
    if is(sub, "set") {
        if args.len() != 3 {
            return Frame::error("ERR Wrong number of arguments for CONFIG SET");
        }
        return config_set(node, &args[1], &args[2]);
    }
    if is(sub, "resetstat") && args.len() == 1 {
        node.slowlog.reset();
        return Frame::status("OK");
    }
    if is(sub, "rewrite") && args.len() == 1 {
        return Frame::error("ERR The server is running without a config file");
    }
    Frame::error("ERR CONFIG subcommand must be one of GET, SET, RESETSTAT, REWRITE")
}

fn config_set(node: &Node, name: &Bytes, value: &Bytes) -> Frame {
    let lname = String::from_utf8_lossy(name).to_ascii_lowercase();
    let text = String::from_utf8_lossy(value).into_owned();
    let invalid = || {
        Frame::error_owned(format!(
            "ERR Invalid argument '{text}' for CONFIG SET '{lname}'"
        ))
    };
    let int = parse_i64(value);
    let yes_no = match text.to_ascii_lowercase().as_str() {
        "yes" => Some(true),
        "no" => Some(false),
        _ => None,
    };
    match lname.as_str() {
        "requirepass" => node.auth.set((!text.is_empty()).then_some(text.clone())),
        "slowlog-log-slower-than" => match int {
            Some(n) => node.slowlog.slower_than.store(n, Ordering::Relaxed),
            None => return invalid(),
        },
        "slowlog-max-len" => match int {
            Some(n) if n >= 0 => node.slowlog.set_max_len(n as usize),
            _ => return invalid(),
        },
        "hz" => match int {
            Some(n) if n > 0 => node.settings.hz.store(n.min(500) as u64, Ordering::Relaxed),
            _ => return invalid(),
        },
        "timeout" => match int {
            Some(n) if n >= 0 => node.settings.timeout.store(n as u64, Ordering::Relaxed),
            _ => return invalid(),
        },
        "aof-enqueue-jobs-once" => match yes_no {
            Some(b) => node.settings.enqueue_jobs_once.store(b, Ordering::Relaxed),
            None => return invalid(),
        },
        "appendfsync" => match text.parse::<AppendFsync>() {
            Ok(p) => {
                if let Some(aof) = &node.aof {
                    aof.set_policy(p);
                }
            }
            Err(_) => return invalid(),
        },
        _ => {
            return Frame::error_owned(format!(
                "ERR Unsupported CONFIG parameter: {}",
                String::from_utf8_lossy(name)
            ))
        }
    }
    Frame::status("OK")
}

#[cfg(test)]
mod tests {
    use super::glob;

    #[test]
    fn globs() {
        assert!(glob(b"app*", b"appendonly"));
        assert!(glob(b"*", b"port"));
        assert!(glob(b"p?rt", b"port"));
        assert!(!glob(b"PORT", b"port"));
        assert!(glob(b"[ab]ind", b"bind"));
        assert!(!glob(b"app*", b"port"));
    }

    /// The recursive matcher this one replaced (exponential in stars).
    fn reference(p: &[u8], s: &[u8]) -> bool {
        match (p.first(), s.first()) {
            (None, None) => true,
            (Some(b'*'), _) => reference(&p[1..], s) || (!s.is_empty() && reference(p, &s[1..])),
            (Some(b'?'), Some(_)) => reference(&p[1..], &s[1..]),
            (Some(b'['), Some(&c)) => match p.iter().position(|&b| b == b']') {
                Some(end) if end > 1 => p[1..end].contains(&c) && reference(&p[end + 1..], &s[1..]),
                _ => p[0] == c && reference(&p[1..], &s[1..]),
            },
            (Some(&a), Some(&b)) => a == b && reference(&p[1..], &s[1..]),
            _ => false,
        }
    }

    /// Every word of up to `len` letters of `alphabet`.
    fn words(alphabet: &[u8], len: usize) -> Vec<Vec<u8>> {
        let mut all = vec![Vec::new()];
        let mut last = vec![Vec::new()];
        for _ in 0..len {
            last = last
                .iter()
                .flat_map(|w: &Vec<u8>| alphabet.iter().map(move |&c| [&w[..], &[c]].concat()))
                .collect();
            all.extend(last.iter().cloned());
        }
        all
    }

    #[test]
    fn same_answers_as_the_recursive_matcher() {
        let names = words(b"ab[]", 4);
        for p in words(b"*?[]ab", 5) {
            for s in &names {
                assert_eq!(
                    glob(&p, s),
                    reference(&p, s),
                    "{:?} {:?}",
                    String::from_utf8_lossy(&p),
                    String::from_utf8_lossy(s)
                );
            }
        }
    }

    /// `CONFIG GET ************x` (26 bytes, no AUTH needed without a
    /// password) ran for minutes with the recursive matcher: every `*`
    /// tried every split of the name, C(23 + 12, 12) ways for
    /// `slowlog-log-slower-than`.
    #[test]
    fn many_stars_match_in_linear_time() {
        let start = std::time::Instant::now();
        let stars = [&[b'*'; 64][..], b"x"].concat();
        assert!(!glob(&stars, b"slowlog-log-slower-than"));
        let star_a = b"*a".repeat(32);
        assert!(!glob(&star_a, b"slowlog-log-slower-than"));
        assert!(glob(b"*s*l*o*w*", b"slowlog-log-slower-than"));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(1),
            "glob took {:?}",
            start.elapsed()
        );
    }
}
