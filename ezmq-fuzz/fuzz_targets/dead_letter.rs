//! Dead-letter records: the JSON body of a job on a dead-letter topic,
//! which anyone can push. Decoding must never panic; a decoded record
//! encodes back to itself; and a record made from any failed job (any
//! body, any headers, `ezmq-first-failed-at` included) gives that job's
//! body and headers back.
//!
//! Input: one byte for the attempt count, then the bytes used both as a
//! record to decode and as the failed job's body; the same bytes, split
//! at NULs, give the failed job's headers.
#![no_main]

use bytes::Bytes;
use ezmq_core::{DeadLetterRecord, Headers, Job, JobId, Topic};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&attempts, data)) = data.split_first() else {
        return;
    };
    let topic = Topic::new("orders.dead-letter").expect("a valid topic");
    let job = Job::new(
        JobId::new("D-1"),
        topic.clone(),
        Bytes::copy_from_slice(data),
    );
    let from_slice = serde_json::from_slice::<DeadLetterRecord>(data);
    let from_job = DeadLetterRecord::from_job(&job);
    assert_eq!(from_slice.is_ok(), from_job.is_ok());
    if let Ok(record) = from_slice {
        assert_eq!(Some(&record), from_job.as_ref().ok());
        let _ = record.body();
        let json = serde_json::to_vec(&record).expect("a record encodes");
        let again: DeadLetterRecord = serde_json::from_slice(&json).expect("it decodes");
        assert_eq!(again, record);
    }
    // The input as a failed job: the record keeps its body and headers.
    let text = String::from_utf8_lossy(data);
    let mut parts = text.split('\0');
    let mut headers = Headers::new();
    if let Some(first) = parts.next() {
        headers.insert("ezmq-first-failed-at", first);
    }
    while let (Some(name), Some(value)) = (parts.next(), parts.next()) {
        headers.insert(name, value);
    }
    let failed = Job::new(
        JobId::new("D-2"),
        Topic::new("orders").expect("a valid topic"),
        Bytes::copy_from_slice(data),
    )
    .with_headers(headers.clone())
    .with_attempt(u32::from(attempts));
    let record = DeadLetterRecord::new(&failed, u32::from(attempts), "boom", false);
    let json = serde_json::to_vec(&record).expect("a record encodes");
    let dead = Job::new(JobId::new("D-3"), topic, Bytes::from(json));
    let decoded = DeadLetterRecord::from_job(&dead).expect("a record decodes");
    assert_eq!(&decoded.body()[..], data);
    assert_eq!(decoded.headers, headers);
    assert_eq!(decoded, record);
});
