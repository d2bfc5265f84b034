//! Jobs, job IDs and ID generation.

use crate::body::Body;
use bytes::Bytes;
use std::sync::Arc;

/// A queue name held by jobs: one allocation shared by every job of the
/// queue (see `Queue::shared`), 16 bytes in each job.
pub(crate) type QName = Arc<[u8]>;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};

/// Length of a Disque job ID.
pub(crate) const JOB_ID_LEN: usize = 40;

/// A job ID: `D-<8 hex node prefix>-<24 base64>-<4 hex TTL minutes>`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct JobId(pub(crate) [u8; JOB_ID_LEN]);

impl std::fmt::Debug for JobId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", String::from_utf8_lossy(&self.0))
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const HEX: &[u8; 16] = b"0123456789abcdef";

impl JobId {
    /// Validates the shape of a job ID exactly like Disque (length, `D-`
    /// prefix, `-` at offsets 10 and 35) and returns it.
    pub(crate) fn parse(b: &[u8]) -> Option<JobId> {
        if b.len() != JOB_ID_LEN || b[0] != b'D' || b[1] != b'-' || b[10] != b'-' || b[35] != b'-' {
            return None;
        }
        let mut id = [0u8; JOB_ID_LEN];
        id.copy_from_slice(b);
        Some(JobId(id))
    }

    /// The raw 40 bytes of the ID.
    pub(crate) fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// The ID as a `Bytes` value.
    pub(crate) fn to_bytes(self) -> Bytes {
        Bytes::copy_from_slice(self.as_bytes())
    }

    /// Generates a new ID for a job created by the node whose ID starts with
    /// `node_prefix`.
    pub(crate) fn generate(node_prefix: &[u8; 8], rng: &mut Rng, ttl: i64, retry: i64) -> JobId {
        let mut id = [0u8; JOB_ID_LEN];
        id[0] = b'D';
        id[1] = b'-';
        id[2..10].copy_from_slice(node_prefix);
        id[10] = b'-';
        let mut r = rng.next_u64();
        let mut r2 = rng.next_u64();
        for (i, slot) in id[11..35].iter_mut().enumerate() {
            if i == 10 {
                r = r2;
                r2 = rng.next_u64();
            }
            *slot = B64[(r & 63) as usize];
            r >>= 6;
        }
        let _ = r2;
        id[35] = b'-';
        let mut minutes = (ttl / 60).clamp(0, 0xffff) as u32;
        if retry > 0 {
            minutes |= 1;
        } else {
            minutes &= !1;
        }
        for (i, slot) in id[36..40].iter_mut().enumerate() {
            *slot = HEX[((minutes >> (12 - 4 * i)) & 0xf) as usize];
        }
        JobId(id)
    }
}

/// Job state as reported by SHOW.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JobState {
    /// Waiting for synchronous replication (cluster only).
    WaitRepl,
    /// Not queued: delayed, delivered or dequeued.
    Active,
    /// In its queue.
    Queued,
    /// Acknowledged (cluster only; a single node deletes at once).
    Acked,
}

impl JobState {
    /// The name used by SHOW and JSCAN.
    pub(crate) fn name(self) -> &'static str {
        match self {
            JobState::WaitRepl => "wait-repl",
            JobState::Active => "active",
            JobState::Queued => "queued",
            JobState::Acked => "acked",
        }
    }

    /// Parses a state name (case-insensitive).
    pub(crate) fn from_name(b: &[u8]) -> Option<JobState> {
        [
            JobState::WaitRepl,
            JobState::Active,
            JobState::Queued,
            JobState::Acked,
        ]
        .into_iter()
        .find(|s| s.name().as_bytes().eq_ignore_ascii_case(b))
    }
}

/// A job held by this node.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    pub(crate) id: JobId,
    pub(crate) queue: QName,
    pub(crate) body: Body,
    pub(crate) state: JobState,
    pub(crate) repl: u16,
    /// Creation time: unix milliseconds * 1e6 plus a per-millisecond counter.
    pub(crate) ctime: u64,
    /// Expire time, unix milliseconds.
    pub(crate) etime: u64,
    /// Delay in seconds.
    pub(crate) delay: u32,
    /// Retry period in seconds (0 = at most once).
    pub(crate) retry: u32,
    /// Next time the job is (re)queued, unix milliseconds; 0 = never.
    pub(crate) qtime: u64,
    pub(crate) nacks: u32,
    pub(crate) deliveries: u32,
    /// The job was delivered to a client at least once.
    pub(crate) delivered: bool,
    /// The job was queued at least once (later queueings count as
    /// additional deliveries).
    pub(crate) queued_before: bool,
    /// Key of this job in the timer set (0 = not scheduled).
    pub(crate) timer: u64,
    /// Cluster only: bus indexes of the nodes holding a copy (this node
    /// included). Empty on a standalone node, where SHOW lists only itself.
    pub(crate) nodes: Nodes,
    /// Cluster only: a dummy ACK for an unknown job (no queue, no body).
    pub(crate) dummy: bool,
    /// Cluster only: WILLQUEUE was sent; queue at `qtime` unless another
    /// node answers that the job is queued there.
    pub(crate) willqueue: bool,
}

impl Job {
    /// A job in state `active`, never queued nor delivered, not scheduled.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        id: JobId,
        queue: QName,
        body: Body,
        repl: u16,
        ctime: u64,
        etime: u64,
        delay: u64,
        retry: u64,
    ) -> Job {
        Job {
            id,
            queue,
            body,
            state: JobState::Active,
            repl,
            ctime,
            etime,
            delay: u32::try_from(delay).unwrap_or(u32::MAX),
            retry: u32::try_from(retry).unwrap_or(u32::MAX),
            qtime: 0,
            nacks: 0,
            deliveries: 0,
            delivered: false,
            queued_before: false,
            timer: 0,
            nodes: Nodes::default(),
            dummy: false,
            willqueue: false,
        }
    }

    /// Approximate memory used by the job.
    pub(crate) fn mem_size(&self) -> usize {
        self.body.len() + self.queue.len() + 256
    }

    /// The ttl field of the ID is odd: the job was created with RETRY > 0.
    pub(crate) fn id_has_retry(id: &JobId) -> bool {
        matches!(
            id.0[39],
            b'1' | b'3' | b'5' | b'7' | b'9' | b'b' | b'd' | b'f' | b'B' | b'D' | b'F'
        )
    }

    /// Next time the timer must look at this job.
    pub(crate) fn next_event(&self) -> u64 {
        let mut at = self.etime;
        if self.qtime != 0 && matches!(self.state, JobState::Active | JobState::Queued) {
            at = at.min(self.qtime);
        }
        at
    }
}

/// The bus indexes of the nodes holding a job: one pointer, no allocation
/// while empty (always on a standalone node).
// Boxed on purpose: 8 bytes in every job instead of a 24-byte `Vec`.
#[allow(clippy::box_collection)]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Nodes(Option<Box<Vec<u16>>>);

impl Nodes {
    /// Adds a node (no duplicate check).
    pub(crate) fn push(&mut self, n: u16) {
        self.0.get_or_insert_with(Box::default).push(n);
    }

    /// Adds every node of `from` missing here.
    pub(crate) fn merge(&mut self, from: &[u16]) {
        for &n in from {
            if !self.contains(&n) {
                self.push(n);
            }
        }
    }
}

impl std::ops::Deref for Nodes {
    type Target = [u16];
    fn deref(&self) -> &[u16] {
        self.0.as_deref().map_or(&[], Vec::as_slice)
    }
}

impl From<Vec<u16>> for Nodes {
    fn from(v: Vec<u16>) -> Nodes {
        Nodes((!v.is_empty()).then(|| Box::new(v)))
    }
}

/// Small fast PRNG (xorshift64*), seeded from the OS-randomised hasher keys.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    /// A new generator with a random seed.
    pub(crate) fn new() -> Rng {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0),
        );
        h.write_u32(std::process::id());
        Rng(h.finish() | 1)
    }

    /// Next 64 random bits.
    pub(crate) fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 40 lowercase hex chars, for node IDs.
    pub(crate) fn hex40(&mut self) -> String {
        let mut s = String::with_capacity(40);
        while s.len() < 40 {
            let v = self.next_u64();
            for i in 0..16 {
                if s.len() < 40 {
                    s.push(HEX[((v >> (4 * i)) & 0xf) as usize] as char);
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn id_shape_and_ttl_field() {
        let mut rng = Rng::new();
        let p = *b"0123abcd";
        let id = JobId::generate(&p, &mut rng, 86400, 300);
        assert!(JobId::parse(id.as_bytes()).is_some());
        assert_eq!(&id.0[36..], b"05a1");
        assert_eq!(&JobId::generate(&p, &mut rng, 86400, 0).0[36..], b"05a0");
        assert_eq!(&JobId::generate(&p, &mut rng, 119, 0).0[36..], b"0000");
        assert_eq!(
            &JobId::generate(&p, &mut rng, 65535 * 180, 1).0[36..],
            b"ffff"
        );
        assert!(JobId::parse(b"D-zzzzzzzz-????????????????????????-zzzz").is_some());
        assert!(JobId::parse(b"d-zzzzzzzz-????????????????????????-zzzz").is_none());
    }
}
