//! AOF records: `[len u32 LE][crc32 u32 LE][payload]`, the payload a type
//! byte and the fields. A record whose length runs past the end of the
//! file or whose CRC does not match ends the log (a torn write).

use crate::job::{Job, JobId, JobState, JOB_ID_LEN};
use bytes::Bytes;

/// First bytes of every AOF file.
pub(crate) const MAGIC: &[u8; 8] = b"EZMQAOF1";
/// Bytes before a record's payload.
pub(crate) const HEADER: usize = 8;
/// Largest payload accepted when reading (a corrupt length is a torn tail).
const MAX_PAYLOAD: usize = 1 << 31;

const T_JOB: u8 = 1;
const T_STATE: u8 = 2;
const T_DEL: u8 = 3;

/// One decoded record.
#[derive(Debug)]
pub(crate) enum Record {
    /// A whole job (ADDJOB, or a rewrite).
    Job(Box<Job>),
    /// The mutable fields of a job changed.
    State(StateFields),
    /// A job was acknowledged, deleted or expired.
    Del(JobId),
}

/// The fields a [`Record::State`] carries.
#[derive(Debug, Clone, Copy)]
pub(crate) struct StateFields {
    pub(crate) id: JobId,
    pub(crate) state: JobState,
    pub(crate) qtime: u64,
    pub(crate) nacks: u64,
    pub(crate) deliveries: u64,
    pub(crate) delivered: bool,
    pub(crate) queued_before: bool,
}

impl StateFields {
    /// The mutable fields of `job`.
    pub(crate) fn of(job: &Job) -> StateFields {
        StateFields {
            id: job.id,
            state: job.state,
            qtime: job.qtime,
            nacks: u64::from(job.nacks),
            deliveries: u64::from(job.deliveries),
            delivered: job.delivered,
            queued_before: job.queued_before,
        }
    }

    /// Copies these fields into `job`.
    pub(crate) fn apply(&self, job: &mut Job) {
        job.state = self.state;
        job.qtime = self.qtime;
        job.nacks = u32::try_from(self.nacks).unwrap_or(u32::MAX);
        job.deliveries = u32::try_from(self.deliveries).unwrap_or(u32::MAX);
        job.delivered = self.delivered;
        job.queued_before = self.queued_before;
    }
}

fn state_code(s: JobState) -> u8 {
    match s {
        JobState::WaitRepl => 0,
        JobState::Active => 1,
        JobState::Queued => 2,
        JobState::Acked => 3,
    }
}

fn state_from(c: u8) -> Option<JobState> {
    Some(match c {
        0 => JobState::WaitRepl,
        1 => JobState::Active,
        2 => JobState::Queued,
        3 => JobState::Acked,
        _ => return None,
    })
}

/// Appends one framed record with `payload` written by `fill`.
fn frame(out: &mut Vec<u8>, fill: impl FnOnce(&mut Vec<u8>)) {
    let start = out.len();
    out.extend_from_slice(&[0u8; HEADER]);
    fill(out);
    let payload = &out[start + HEADER..];
    let len = payload.len() as u32;
    let crc = crc32(payload);
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
}

fn put_state(out: &mut Vec<u8>, s: &StateFields) {
    out.push(state_code(s.state));
    out.push(u8::from(s.delivered) | (u8::from(s.queued_before) << 1));
    out.extend_from_slice(&s.qtime.to_le_bytes());
    out.extend_from_slice(&s.nacks.to_le_bytes());
    out.extend_from_slice(&s.deliveries.to_le_bytes());
}

/// Encodes a whole job.
pub(crate) fn encode_job(out: &mut Vec<u8>, job: &Job) {
    frame(out, |o| {
        o.push(T_JOB);
        o.extend_from_slice(job.id.as_bytes());
        put_state(o, &StateFields::of(job));
        o.extend_from_slice(&job.repl.to_le_bytes());
        for v in [
            job.ctime,
            job.etime,
            u64::from(job.delay),
            u64::from(job.retry),
        ] {
            o.extend_from_slice(&v.to_le_bytes());
        }
        o.extend_from_slice(&(job.queue.len() as u32).to_le_bytes());
        o.extend_from_slice(&job.queue);
        o.extend_from_slice(&(job.body.len() as u32).to_le_bytes());
        o.extend_from_slice(&job.body);
    });
}

/// Encodes the mutable fields of a job.
pub(crate) fn encode_state(out: &mut Vec<u8>, s: &StateFields) {
    frame(out, |o| {
        o.push(T_STATE);
        o.extend_from_slice(s.id.as_bytes());
        put_state(o, s);
    });
}

/// Encodes a deletion.
pub(crate) fn encode_del(out: &mut Vec<u8>, id: &JobId) {
    frame(out, |o| {
        o.push(T_DEL);
        o.extend_from_slice(id.as_bytes());
    });
}

/// Result of reading one record at the start of a buffer.
#[derive(Debug)]
pub(crate) enum Decoded {
    /// A record and the bytes it took.
    Record(Record, usize),
    /// The buffer ends inside a record, or the record is damaged: the log
    /// ends here.
    Torn,
}

/// Reads one record from the start of `buf` (which must not be empty).
pub(crate) fn decode(buf: &[u8]) -> Decoded {
    let Some(head) = buf.get(..HEADER) else {
        return Decoded::Torn;
    };
    let len = u32::from_le_bytes([head[0], head[1], head[2], head[3]]) as usize;
    let crc = u32::from_le_bytes([head[4], head[5], head[6], head[7]]);
    if len > MAX_PAYLOAD {
        return Decoded::Torn;
    }
    let Some(payload) = buf.get(HEADER..HEADER + len) else {
        return Decoded::Torn;
    };
    if crc32(payload) != crc {
        return Decoded::Torn;
    }
    match parse_payload(payload) {
        Some(r) => Decoded::Record(r, HEADER + len),
        None => Decoded::Torn,
    }
}

/// A cursor over a payload.
struct Cur<'a>(&'a [u8]);

impl<'a> Cur<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> Option<u64> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Some(u64::from_le_bytes(a))
    }
    fn id(&mut self) -> Option<JobId> {
        JobId::parse(self.take(JOB_ID_LEN)?)
    }
    fn state(&mut self, id: JobId) -> Option<StateFields> {
        let state = state_from(self.u8()?)?;
        let flags = self.u8()?;
        Some(StateFields {
            id,
            state,
            qtime: self.u64()?,
            nacks: self.u64()?,
            deliveries: self.u64()?,
            delivered: flags & 1 != 0,
            queued_before: flags & 2 != 0,
        })
    }
    fn bytes(&mut self) -> Option<Bytes> {
        let n = self.u32()? as usize;
        self.take(n).map(Bytes::copy_from_slice)
    }
}

fn parse_payload(p: &[u8]) -> Option<Record> {
    let mut c = Cur(p);
    let rec = match c.u8()? {
        T_JOB => {
            let id = c.id()?;
            let st = c.state(id)?;
            let repl = c.u16()?;
            let (ctime, etime, delay, retry) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
            let queue = c.bytes()?;
            let body = c.bytes()?;
            let mut job = Job::new(
                id,
                crate::job::QName::from(&queue[..]),
                crate::body::Body::from_bytes(body),
                repl,
                ctime,
                etime,
                delay,
                retry,
            );
            st.apply(&mut job);
            Record::Job(Box::new(job))
        }
        T_STATE => {
            let id = c.id()?;
            Record::State(c.state(id)?)
        }
        T_DEL => Record::Del(c.id()?),
        _ => return None,
    };
    c.0.is_empty().then_some(rec)
}

/// CRC-32 (IEEE), table driven.
pub(crate) fn crc32(data: &[u8]) -> u32 {
    static TABLE: std::sync::OnceLock<[u32; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        let mut t = [0u32; 256];
        for (i, slot) in t.iter_mut().enumerate() {
            let mut c = i as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    0xEDB8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
            }
            *slot = c;
        }
        t
    });
    let mut crc = !0u32;
    for &b in data {
        crc = table[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Rng;

    fn job() -> Job {
        let id = JobId::generate(b"01234567", &mut Rng::new(), 3600, 5);
        let mut j = Job::new(
            id,
            crate::job::QName::from(&b"q"[..]),
            crate::body::Body::copy_from(b"body"),
            1,
            7,
            8,
            0,
            5,
        );
        j.nacks = 3;
        j.delivered = true;
        j
    }

    #[test]
    fn crc_matches_the_standard() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let j = job();
        let mut buf = Vec::new();
        encode_job(&mut buf, &j);
        encode_state(&mut buf, &StateFields::of(&j));
        encode_del(&mut buf, &j.id);
        let mut pos = 0;
        let mut kinds = Vec::new();
        while pos < buf.len() {
            match decode(&buf[pos..]) {
                Decoded::Record(r, n) => {
                    if let Record::Job(got) = &r {
                        assert_eq!(got.body, j.body);
                        assert_eq!(got.nacks, 3);
                        assert!(got.delivered);
                    }
                    kinds.push(std::mem::discriminant(&r));
                    pos += n;
                }
                Decoded::Torn => panic!("torn at {pos}"),
            }
        }
        assert_eq!(kinds.len(), 3);
        // Every strict prefix of the last record is torn, and so is a flipped bit.
        let last = buf.len() - (HEADER + 1 + JOB_ID_LEN);
        for cut in last + 1..buf.len() {
            assert!(matches!(decode(&buf[last..cut]), Decoded::Torn));
        }
        let mut bad = buf.clone();
        let n = bad.len();
        bad[n - 1] ^= 1;
        assert!(matches!(decode(&bad[last..]), Decoded::Torn));
    }
}
