//! Kafka topic and group names for ezmq's topics (docs/proposals/kafka.md
//! §3).
//!
//! Kafka allows `[A-Za-z0-9._-]`, at most 249 characters, and refuses a
//! name that equals an existing one with `.` and `_` swapped. So a name
//! is `<prefix>.<kind>.<part>…`, each part encoded on its own:
//!
//! * `[A-Za-z0-9]` stays;
//! * `-` becomes `--`;
//! * any other byte becomes `-` and two lower-case hex digits
//!   (`orders.eu` → `orders-2eeu`).
//!
//! Parts never contain `.`, so names are injective; they never contain
//! `_` either, so no two of them differ by a swapped `.`/`_`. A name over
//! 249 characters keeps its first 200 and appends `.-h` and 16 hex digits
//! of the FNV-1a-64 hash of its unencoded parts: an encoded part cannot
//! start with `-h` (after `-` comes `-` or a hex digit), so a hashed name
//! never equals an unhashed one.

use ezmq_core::Topic;

/// Kafka's longest topic name.
const MAX_NAME: usize = 249;
/// What a hashed name keeps of the encoded name.
const HASHED_KEEP: usize = 200;
/// The separator of core's internal names (`__ezmq|kind|part…`).
const INTERNAL_SEPARATOR: char = '|';

/// Appends `part`, encoded, to `out`.
fn encode_part(part: &str, out: &mut String) {
    for byte in part.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => out.push(char::from(byte)),
            b'-' => out.push_str("--"),
            other => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.push('-');
                out.push(char::from(HEX[usize::from(other >> 4)]));
                out.push(char::from(HEX[usize::from(other & 0xf)]));
            }
        }
    }
}

/// FNV-1a, 64 bits, over the parts with a 0 byte after each.
fn fnv1a(parts: &[&str]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash
}

/// `<prefix>.<kind>.<part>…`, each part encoded; hashed when too long.
pub(crate) fn name(prefix: &str, kind: &str, parts: &[&str]) -> String {
    let mut out = String::with_capacity(prefix.len() + kind.len() + 2 + parts.len() * 16);
    out.push_str(prefix);
    out.push('.');
    out.push_str(kind);
    for part in parts {
        out.push('.');
        encode_part(part, &mut out);
    }
    if out.len() > MAX_NAME {
        out.truncate(HASHED_KEEP);
        out.push_str(&format!(".-h{:016x}", fnv1a(parts)));
    }
    out
}

/// The Kafka topic (and consumer group) holding `topic`'s jobs: `q` for a
/// user's topic, `x` and the internal kind for one of core's
/// (`__ezmq|lane|orders|high` → `<prefix>.x.lane.orders.high`).
pub(crate) fn queue(prefix: &str, topic: &Topic) -> String {
    if topic.is_internal() {
        let parts: Vec<&str> = topic.as_str().split(INTERNAL_SEPARATOR).skip(1).collect();
        return name(prefix, "x", &parts);
    }
    name(prefix, "q", &[topic.as_str()])
}

/// The user topic whose jobs Kafka topic `name` holds (the inverse of
/// [`queue`]); `None` for any other name, and for a hashed one (its
/// topic cannot be read back).
pub(crate) fn user_topic_of(prefix: &str, name: &str) -> Option<Topic> {
    let part = name.strip_prefix(prefix)?.strip_prefix(".q.")?;
    Topic::new(decode_part(part)?).ok()
}

/// The inverse of [`encode_part`]; `None` for what it cannot produce.
fn decode_part(part: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(part.len());
    let mut rest = part.bytes();
    while let Some(byte) = rest.next() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' => bytes.push(byte),
            b'-' => match rest.next()? {
                b'-' => bytes.push(b'-'),
                high => {
                    let low = rest.next()?;
                    let hex = |b: u8| char::from(b).to_digit(16);
                    let value = hex(high)? * 16 + hex(low)?;
                    bytes.push(u8::try_from(value).ok()?);
                }
            },
            _ => return None,
        }
    }
    String::from_utf8(bytes).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queue_names_read_back_as_their_topics() {
        for name in ["orders", "orders.eu", "a-b_c", "x:y/z"] {
            let topic = topic(name);
            assert_eq!(user_topic_of("ezmq", &queue("ezmq", &topic)), Some(topic));
        }
        let lane = Topic::internal("lane", &["orders", "high"]).unwrap();
        assert_eq!(user_topic_of("ezmq", &queue("ezmq", &lane)), None);
        assert_eq!(
            user_topic_of("ezmq", &queue("ezmq", &topic(&":".repeat(90)))),
            None
        );
        assert_eq!(user_topic_of("other", &queue("ezmq", &topic("a"))), None);
    }

    fn topic(name: &str) -> Topic {
        Topic::new(name).unwrap()
    }

    #[test]
    fn parts_are_encoded_without_dots_or_underscores() {
        assert_eq!(queue("ezmq", &topic("orders.eu")), "ezmq.q.orders-2eeu");
        assert_eq!(
            queue("ezmq", &topic("order-events")),
            "ezmq.q.order--events"
        );
        assert_eq!(queue("ezmq", &topic("a_b")), "ezmq.q.a-5fb");
        let internal = Topic::internal("lane", &["orders", "high"]).unwrap();
        assert_eq!(queue("ezmq", &internal), "ezmq.x.lane.orders.high");
        for name in ["a.b", "a-b", "a_b", "a:b/c", "../x"] {
            let encoded = queue("p", &topic(name));
            assert!(
                encoded
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-'),
                "{encoded}"
            );
            assert_eq!(encoded.matches('.').count(), 2, "{encoded}");
        }
    }

    #[test]
    fn distinct_topics_get_distinct_names() {
        // The pair KAFKA-13743 would refuse if `_` were used to escape.
        let a = name("p", "q", &["a", "2e_z"]);
        let b = name("p", "q", &["a.", "5fz"]);
        assert_ne!(a, b);
        assert_ne!(a.replace('.', "_"), b.replace('.', "_"));
        assert_ne!(queue("p", &topic("a-2e")), queue("p", &topic("a.")));
    }

    #[test]
    fn long_names_are_hashed_within_kafkas_limit() {
        let long = ".".repeat(100);
        let other = format!("{}:", ".".repeat(99));
        let a = queue("ezmq", &topic(&long));
        let b = queue("ezmq", &topic(&other));
        assert!(a.len() <= MAX_NAME, "{}", a.len());
        assert!(a.contains(".-h"), "{a}");
        assert_ne!(a, b, "same first 200 characters, different hash");
        let short = queue("ezmq", &topic("orders"));
        assert!(!short.contains("-h"), "{short}");
    }
}
