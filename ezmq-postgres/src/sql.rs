//! Every statement the backend runs, written out once for its schema.
//!
//! One table holds every job (`jobs`): a topic's queue, a broadcast
//! group's queue (`<topic>#<group>`) and a reply inbox
//! (`__ezmq|inbox|<id>`) are all values of its `queue` column. A job is
//! due when `visible_at <= now()`, by the database's clock:
//!
//! | state | `leased` | `visible_at` |
//! |---|---|---|
//! | ready | either | `<= now()` (a leased one's lease ended: it is taken again) |
//! | running | true | `> now()` (the lease's end) |
//! | scheduled | false | `> now()`, `attempt = 1` |
//! | retrying | false | `> now()`, `attempt > 1` |
//!
//! A fetch takes the oldest due rows with `FOR UPDATE SKIP LOCKED` through
//! the index `(queue, visible_at, seq)`, and marks them leased until now
//! plus the lease; `deliveries` counts fetches, and a settle call names
//! the `(seq, deliveries)` it was given, so a delivery whose lease ended
//! and whose job another consumer took settles nothing. Every statement
//! that makes a job due sooner sends `NOTIFY <channel>, '<queue>'`.

/// The statements of one schema.
#[derive(Debug)]
pub(crate) struct Sql {
    /// The channel of `NOTIFY`/`LISTEN`: `ezmq_<schema>`.
    pub(crate) channel: String,
    pub(crate) push: String,
    pub(crate) push_deduplicated: String,
    pub(crate) push_batch: String,
    pub(crate) fetch: String,
    pub(crate) next_due: String,
    pub(crate) ack: String,
    pub(crate) ack_batch: String,
    pub(crate) retry: String,
    pub(crate) release: String,
    pub(crate) defer: String,
    pub(crate) extend: String,
    pub(crate) queue_len: String,
    pub(crate) in_flight: String,
    /// The distinct queues, by a loose index scan (one index probe each).
    pub(crate) topics: String,
    pub(crate) peek: String,
    pub(crate) job: String,
    /// Listing by state, in [`ezmq_core::spi::JobState::ALL`]'s order.
    pub(crate) jobs: [String; 4],
    /// Counting by state, in the same order.
    pub(crate) count: [String; 4],
    pub(crate) cancel: String,
    pub(crate) exists: String,
    pub(crate) promote: String,
    pub(crate) reschedule: String,
    pub(crate) claim: String,
    pub(crate) holder: String,
    pub(crate) release_claim: String,
    pub(crate) join_group: String,
    pub(crate) join_member: String,
    pub(crate) leave_member: String,
    pub(crate) publish_to_groups: String,
    pub(crate) groups: String,
    pub(crate) send_reply: String,
    pub(crate) take_replies: String,
    pub(crate) drop_queue: String,
    /// The sweep's statements, run in order.
    pub(crate) sweep: [String; 5],
}

/// The state of a row as a number: [`ezmq_core::spi::JobState::ALL`]'s
/// index.
const STATE: &str = "CASE WHEN visible_at <= now() THEN 2 WHEN leased THEN 3 \
                     WHEN attempt > 1 THEN 1 ELSE 0 END";

/// The attempt a row's next delivery gets (a leased row whose lease ended
/// counts one more).
const NEXT_ATTEMPT: &str = "attempt + CASE WHEN leased AND visible_at <= now() THEN 1 ELSE 0 END";

/// Rows not past their ttl.
const LIVE: &str = "(expires_at IS NULL OR expires_at > now())";

/// `$n` milliseconds from now.
fn ms_from_now(n: u8) -> String {
    format!("now() + ${n}::bigint * interval '1 millisecond'")
}

impl Sql {
    /// The statements for `schema` (already validated as an identifier).
    pub(crate) fn new(schema: &str) -> Self {
        let s = schema;
        let channel = format!("ezmq_{schema}");
        let notify = format!("pg_notify('{channel}', queue)");
        let insert = format!(
            "INSERT INTO {s}.jobs (queue, id, body, headers, attempt, visible_at, expires_at)"
        );
        let expires =
            "CASE WHEN $7::bigint > 0 THEN now() + $7::bigint * interval '1 millisecond' END";
        let due_in_6 = ms_from_now(6);
        let push = format!(
            "WITH ins AS ({insert} VALUES ($1, $2, $3, $4::jsonb, $5, {due_in_6}, {expires}) \
             ON CONFLICT (queue, id) DO NOTHING RETURNING queue) \
             SELECT {notify} FROM ins"
        );
        let push_deduplicated = format!(
            "WITH seen AS (INSERT INTO {s}.message_ids (queue, message_id, expires_at) \
             VALUES ($1, $8, {window}) ON CONFLICT (queue, message_id) DO UPDATE \
             SET expires_at = EXCLUDED.expires_at WHERE {s}.message_ids.expires_at <= now() \
             RETURNING 1), \
             ins AS ({insert} SELECT $1, $2, $3, $4::jsonb, $5, {due_in_6}, {expires} FROM seen \
             ON CONFLICT (queue, id) DO NOTHING RETURNING queue) \
             SELECT {notify} FROM ins",
            window = ms_from_now(9),
        );
        let push_batch = format!(
            "WITH ins AS ({insert} \
             SELECT $1, t.id, t.body, t.headers::jsonb, t.attempt, \
             now() + t.delay_ms * interval '1 millisecond', \
             CASE WHEN t.ttl_ms > 0 THEN now() + t.ttl_ms * interval '1 millisecond' END \
             FROM unnest($2::text[], $3::bytea[], $4::text[], $5::int[], $6::bigint[], $7::bigint[]) \
             AS t(id, body, headers, attempt, delay_ms, ttl_ms) \
             ON CONFLICT (queue, id) DO NOTHING RETURNING queue) \
             SELECT {notify} FROM (SELECT queue FROM ins LIMIT 1) one"
        );
        let fetch = format!(
            "WITH picked AS (SELECT seq FROM {s}.jobs WHERE queue = $1 AND visible_at <= now() \
             ORDER BY visible_at, seq LIMIT $2 FOR UPDATE SKIP LOCKED) \
             UPDATE {s}.jobs j SET visible_at = {lease}, \
             attempt = CASE WHEN j.leased THEN j.attempt + 1 ELSE j.attempt END, \
             leased = true, deliveries = j.deliveries + 1 \
             FROM picked WHERE j.seq = picked.seq \
             RETURNING j.seq, j.id, j.body, j.headers::text, j.attempt, j.deliveries, \
             (j.expires_at IS NOT NULL AND j.expires_at <= now()) AS expired",
            lease = ms_from_now(3),
        );
        let next_due = format!(
            "SELECT (extract(epoch FROM min(visible_at) - now()) * 1000)::bigint \
             FROM {s}.jobs WHERE queue = $1"
        );
        let held = "seq = $1 AND deliveries = $2 AND leased";
        let ack = format!("DELETE FROM {s}.jobs WHERE {held}");
        let ack_batch = format!(
            "DELETE FROM {s}.jobs j USING unnest($1::bigint[], $2::int[]) AS t(seq, deliveries) \
             WHERE j.seq = t.seq AND j.deliveries = t.deliveries AND j.leased"
        );
        let due_in_3 = ms_from_now(3);
        let retry = format!(
            "WITH u AS (UPDATE {s}.jobs SET leased = false, attempt = attempt + 1, \
             visible_at = {due_in_3} WHERE {held} RETURNING queue) SELECT {notify} FROM u"
        );
        let release = format!(
            "WITH u AS (UPDATE {s}.jobs SET leased = false, visible_at = now() \
             WHERE {held} RETURNING queue) SELECT {notify} FROM u"
        );
        let defer = format!(
            "WITH u AS (UPDATE {s}.jobs SET leased = false, visible_at = {due_in_3}, \
             headers = CASE WHEN $4::text IS NULL THEN headers - $5::text \
             ELSE headers || jsonb_build_object($5::text, $4::text) END \
             WHERE {held} RETURNING queue) SELECT {notify} FROM u"
        );
        let extend = format!("UPDATE {s}.jobs SET visible_at = {due_in_3} WHERE {held}");
        let queue_len = format!(
            "SELECT count(*) FROM {s}.jobs WHERE queue = $1 AND visible_at <= now() AND {LIVE}"
        );
        let in_flight = format!(
            "SELECT count(*) FROM {s}.jobs WHERE queue = $1 AND leased AND visible_at > now()"
        );
        let topics = format!(
            "WITH RECURSIVE q AS ( \
                 (SELECT queue FROM {s}.jobs ORDER BY queue LIMIT 1) \
                 UNION ALL \
                 SELECT (SELECT queue FROM {s}.jobs WHERE queue > q.queue ORDER BY queue LIMIT 1) \
                 FROM q WHERE q.queue IS NOT NULL \
             ) SELECT queue FROM q WHERE queue IS NOT NULL"
        );
        let peek = format!(
            "SELECT id, body, headers::text, {NEXT_ATTEMPT} FROM {s}.jobs \
             WHERE queue = $1 AND visible_at <= now() AND {LIVE} \
             ORDER BY visible_at, seq LIMIT $2"
        );
        let info = format!(
            "id, body, headers::text, {NEXT_ATTEMPT}, {STATE}, \
             (extract(epoch FROM visible_at) * 1000)::bigint"
        );
        let job = format!("SELECT {info} FROM {s}.jobs WHERE queue = $1 AND id = $2 AND {LIVE}");
        let predicates = [
            "NOT leased AND visible_at > now() AND attempt = 1",
            "NOT leased AND visible_at > now() AND attempt > 1",
            "visible_at <= now()",
            "leased AND visible_at > now()",
        ];
        let jobs = predicates.map(|p| {
            format!(
                "SELECT {info} FROM {s}.jobs WHERE queue = $1 AND {p} AND {LIVE} \
                 AND ($2::text IS NULL OR id > $2) ORDER BY id LIMIT $3"
            )
        });
        let count = predicates
            .map(|p| format!("SELECT count(*) FROM {s}.jobs WHERE queue = $1 AND {p} AND {LIVE}"));
        let cancel = format!(
            "DELETE FROM {s}.jobs WHERE queue = $1 AND id = $2 \
             AND NOT (leased AND visible_at > now())"
        );
        let exists = format!("SELECT 1 FROM {s}.jobs WHERE queue = $1 AND id = $2 AND {LIVE}");
        let not_due = "queue = $1 AND id = $2 AND NOT leased AND visible_at > now()";
        let promote = format!(
            "WITH u AS (UPDATE {s}.jobs SET visible_at = now() WHERE {not_due} AND {LIVE} \
             RETURNING queue) SELECT {notify} FROM u"
        );
        let reschedule = format!(
            "WITH u AS (UPDATE {s}.jobs \
             SET visible_at = greatest(to_timestamp($3::float8 / 1000), now()) \
             WHERE {not_due} AND {LIVE} RETURNING queue) SELECT {notify} FROM u"
        );
        let claim = format!(
            "INSERT INTO {s}.claims (key, token, expires_at) VALUES ($1, $2, {hold}) \
             ON CONFLICT (key) DO UPDATE SET token = EXCLUDED.token, expires_at = EXCLUDED.expires_at \
             WHERE {s}.claims.expires_at <= now()",
            hold = ms_from_now(3),
        );
        let holder = format!("SELECT token FROM {s}.claims WHERE key = $1 AND expires_at > now()");
        let release_claim =
            format!("DELETE FROM {s}.claims WHERE key = $1 AND token = $2 AND expires_at > now()");
        let join_group = format!(
            "INSERT INTO {s}.groups (topic, name, retention_ms, expires_at) \
             VALUES ($1, $2, $3, {until}) ON CONFLICT (topic, name) DO UPDATE \
             SET retention_ms = EXCLUDED.retention_ms, \
             expires_at = greatest({s}.groups.expires_at, EXCLUDED.expires_at)",
            until = ms_from_now(3),
        );
        let join_member = format!(
            "INSERT INTO {s}.group_members (topic, name, member, expires_at) \
             VALUES ($1, $2, $3, {until}) ON CONFLICT (topic, name, member) DO UPDATE \
             SET expires_at = EXCLUDED.expires_at",
            until = ms_from_now(4),
        );
        let leave_member =
            format!("DELETE FROM {s}.group_members WHERE topic = $1 AND name = $2 AND member = $3");
        let publish_to_groups = format!(
            "WITH g AS (SELECT name FROM {s}.groups WHERE topic = $1 AND expires_at > now()), \
             ins AS ({insert} SELECT $1 || '#' || g.name, $2, $3, $4::jsonb, $5, {due_in_6}, \
             {expires} FROM g ON CONFLICT (queue, id) DO NOTHING RETURNING queue) \
             SELECT {notify} FROM ins"
        );
        let groups = format!(
            "SELECT g.name, \
             (SELECT count(*) FROM {s}.group_members m WHERE m.topic = g.topic \
              AND m.name = g.name AND m.expires_at > now()), \
             (SELECT count(*) FROM {s}.jobs j WHERE j.queue = g.topic || '#' || g.name \
              AND j.visible_at <= now() AND (j.expires_at IS NULL OR j.expires_at > now())) \
             FROM {s}.groups g WHERE g.topic = $1 AND g.expires_at > now() ORDER BY g.name"
        );
        let send_reply = format!(
            "WITH ins AS ({insert} VALUES ($1, $2, $3, '{{}}'::jsonb, 1, now(), {until}) \
             RETURNING queue) SELECT {notify} FROM ins",
            until = ms_from_now(4),
        );
        let take_replies = format!(
            "DELETE FROM {s}.jobs WHERE seq IN (SELECT seq FROM {s}.jobs WHERE queue = $1 \
             AND {LIVE} ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED) RETURNING seq, body"
        );
        let drop_queue = format!("DELETE FROM {s}.jobs WHERE queue = $1");
        let sweep = [
            format!(
                "DELETE FROM {s}.jobs WHERE seq IN (SELECT seq FROM {s}.jobs \
                 WHERE expires_at <= now() AND NOT (leased AND visible_at > now()) \
                 LIMIT 10000 FOR UPDATE SKIP LOCKED)"
            ),
            format!("DELETE FROM {s}.message_ids WHERE expires_at <= now()"),
            format!("DELETE FROM {s}.claims WHERE expires_at <= now()"),
            format!("DELETE FROM {s}.group_members WHERE expires_at <= now()"),
            format!(
                "WITH gone AS (DELETE FROM {s}.groups WHERE expires_at <= now() \
                 RETURNING topic || '#' || name AS queue) \
                 DELETE FROM {s}.jobs WHERE queue IN (SELECT queue FROM gone)"
            ),
        ];
        Sql {
            channel,
            push,
            push_deduplicated,
            push_batch,
            fetch,
            next_due,
            ack,
            ack_batch,
            retry,
            release,
            defer,
            extend,
            queue_len,
            in_flight,
            topics,
            peek,
            job,
            jobs,
            count,
            cancel,
            exists,
            promote,
            reschedule,
            claim,
            holder,
            release_claim,
            join_group,
            join_member,
            leave_member,
            publish_to_groups,
            groups,
            send_reply,
            take_replies,
            drop_queue,
            sweep,
        }
    }
}
