//! Reading the log on start. A record cut short or damaged ends the log:
//! it and everything after it are dropped (the file is truncated there) and
//! the server starts with what came before, never refusing to start.

use super::record::{decode, Decoded, Record, MAGIC};
use super::{sync_dir, AOF_FILE};
use crate::job::{Job, JobId};
use crate::Error;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use tracing::{info, warn};

/// The log of a data directory, read and ready for appending.
#[derive(Debug)]
pub(crate) struct Opened {
    /// The log file, opened for appending at its (valid) end.
    pub(crate) file: File,
    /// Its size after any truncation.
    pub(crate) size: u64,
    /// The jobs it describes, oldest first.
    pub(crate) jobs: Vec<Job>,
    /// Bytes of a torn or damaged tail that were dropped.
    pub(crate) dropped: u64,
}

fn io_err(path: &Path, source: std::io::Error) -> Error {
    Error::Persistence {
        path: path.to_path_buf(),
        source,
    }
}

/// Opens (creating when missing) and replays the log in `dir`.
pub(crate) fn open(dir: &Path) -> Result<Opened, Error> {
    std::fs::create_dir_all(dir).map_err(|e| io_err(dir, e))?;
    let path = dir.join(AOF_FILE);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io_err(&path, e)),
    };
    let mut fresh = false;
    if data.len() < MAGIC.len() {
        // Empty, or a crash while the header was written.
        if !MAGIC.starts_with(&data) {
            return Err(Error::AofFormat(path));
        }
        fresh = true;
    } else if &data[..MAGIC.len()] != MAGIC {
        return Err(Error::AofFormat(path));
    }
    let mut jobs: HashMap<JobId, Job> = HashMap::new();
    let mut pos = MAGIC.len().min(data.len());
    while !fresh && pos < data.len() {
        match decode(&data[pos..]) {
            Decoded::Record(r, n) => {
                pos += n;
                match r {
                    Record::Job(j) => {
                        jobs.insert(j.id, *j);
                    }
                    Record::State(s) => {
                        if let Some(j) = jobs.get_mut(&s.id) {
                            s.apply(j);
                        }
                    }
                    Record::Del(id) => {
                        jobs.remove(&id);
                    }
                }
            }
            Decoded::Torn => break,
        }
    }
    let dropped = if fresh { 0 } else { (data.len() - pos) as u64 };
    if dropped > 0 {
        warn!(
            path = %path.display(),
            dropped_bytes = dropped,
            valid_bytes = pos,
            "the append-only file ends with a torn or damaged record: dropping it and what follows"
        );
    }
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .read(true)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    let size = if fresh {
        file.set_len(0).map_err(|e| io_err(&path, e))?;
        file.write_all(MAGIC).map_err(|e| io_err(&path, e))?;
        MAGIC.len() as u64
    } else {
        if dropped > 0 {
            file.set_len(pos as u64).map_err(|e| io_err(&path, e))?;
        }
        pos as u64
    };
    file.sync_all().map_err(|e| io_err(&path, e))?;
    sync_dir(dir);
    let mut jobs: Vec<Job> = jobs.into_values().collect();
    jobs.sort_by_key(|j| (j.ctime, j.id));
    info!(path = %path.display(), jobs = jobs.len(), "append-only file loaded");
    Ok(Opened {
        file,
        size,
        jobs,
        dropped,
    })
}
