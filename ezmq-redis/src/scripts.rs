//! The Lua scripts. Each touches only keys of one topic (one hash tag), so
//! it runs on a Redis Cluster too, and is atomic. Times come from the
//! server's clock (`TIME`), so client clock skew never makes a delayed
//! message early.

use std::sync::LazyLock;

use redis::Script;

/// Helpers prepended to every script: the server time in ms (rounded up
/// when scheduling, down when comparing, so nothing is ever early) and the
/// delayed-member decoder (see [`crate::codec`]).
const PRELUDE: &str = r#"
local function now_ms(up)
  local t = redis.call('TIME')
  local us = tonumber(t[2])
  if up then return tonumber(t[1]) * 1000 + math.floor((us + 999) / 1000) end
  return tonumber(t[1]) * 1000 + math.floor(us / 1000)
end
local function decode(m)
  local f = {}
  local pos = 33
  while pos <= #m do
    local c = string.find(m, ':', pos, true)
    local n = tonumber(string.sub(m, pos, c - 1))
    f[#f + 1] = string.sub(m, c + 1, c + n)
    pos = c + n + 1
  end
  return f
end
local function xadd(key, maxlen, fields)
  if tonumber(maxlen) > 0 then
    return redis.call('XADD', key, 'MAXLEN', '~', maxlen, '*', unpack(fields))
  end
  return redis.call('XADD', key, '*', unpack(fields))
end
"#;

fn script(body: &str) -> Script {
    Script::new(&format!("{PRELUDE}{body}"))
}

/// Schedules a delayed message. KEYS: delayed zset. ARGV: delay ms,
/// member. Returns the due time (server ms).
pub(crate) static SCHEDULE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local due = now_ms(true) + tonumber(ARGV[1])
redis.call('ZADD', KEYS[1], due, ARGV[2])
return due
"#,
    )
});

/// A push with a message id, stored once per id and window: when the
/// message-id key exists, nothing is stored and its value (the first
/// push's job id) is returned; otherwise the key is set (`PX` window) and
/// the message added to the stream (delay 0) or scheduled. KEYS:
/// message-id key, stream, delayed zset. ARGV: window ms, job id, stream
/// MAXLEN (0 = none), delay ms (0 = none), member (when delayed, else
/// empty), then the fields (when not delayed). Returns `{stored (1/0), job
/// id}`.
pub(crate) static PUSH_ONCE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local first = redis.call('GET', KEYS[1])
if first then return {0, first} end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
local delay = tonumber(ARGV[4])
if delay > 0 then
  redis.call('ZADD', KEYS[3], now_ms(true) + delay, ARGV[5])
else
  xadd(KEYS[2], ARGV[3], {unpack(ARGV, 6)})
end
return {1, ARGV[2]}
"#,
    )
});

/// Moves due delayed messages into the stream. KEYS: delayed zset,
/// stream. ARGV: most to move, stream MAXLEN (0 = none). Returns
/// `{moved, ms until the next one is due or -1}`.
pub(crate) static PROMOTE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local now = now_ms(false)
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
for _, m in ipairs(due) do
  xadd(KEYS[2], ARGV[2], decode(m))
  redis.call('ZREM', KEYS[1], m)
end
local nxt = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #nxt == 0 then return {#due, -1} end
local wait = tonumber(nxt[2]) - now
if wait < 0 then wait = 0 end
return {#due, wait}
"#,
    )
});

/// Settles a queue delivery by putting its message back: acknowledges and
/// deletes the entry and, in the same step, re-adds the message (delay 0)
/// or schedules it. Nothing happens when the entry is no longer pending.
/// KEYS: stream, delayed zset. ARGV: group, entry id, delay ms, member,
/// stream MAXLEN (0 = none). Returns 1 when done, 0 when not pending.
pub(crate) static REQUEUE: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('XDEL', KEYS[1], ARGV[2])
local delay = tonumber(ARGV[3])
if delay <= 0 then
  xadd(KEYS[1], ARGV[5], decode(ARGV[4]))
else
  redis.call('ZADD', KEYS[2], now_ms(true) + delay, ARGV[4])
end
return 1
"#,
    )
});

/// Reclaims entries idle longer than the lease. KEYS: stream. ARGV: group,
/// consumer, min idle ms, count. Returns `[[id, fields, deliveries], ...]`
/// (fields empty for an entry deleted while pending).
pub(crate) static RECLAIM: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local r = redis.call('XAUTOCLAIM', KEYS[1], ARGV[1], ARGV[2], ARGV[3], '0-0', 'COUNT', ARGV[4])
local out = {}
for _, e in ipairs(r[2]) do
  local count = 1
  local p = redis.call('XPENDING', KEYS[1], ARGV[1], e[1], e[1], 1)
  if #p > 0 then count = p[1][4] end
  out[#out + 1] = {e[1], e[2] or {}, count}
end
return out
"#,
    )
});

/// Counts the waiting messages of a queue: stream length minus pending.
/// KEYS: stream. ARGV: group.
pub(crate) static QUEUE_LEN: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local len = redis.call('XLEN', KEYS[1])
if len == 0 then return 0 end
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(p) == 'table' and p[1] ~= nil and type(p[1]) == 'number' then len = len - p[1] end
if len < 0 then len = 0 end
return len
"#,
    )
});

/// The entries of a queue delivered and not settled yet (the group's
/// pending count), 0 when the stream or the group does not exist. KEYS:
/// stream. ARGV: group.
pub(crate) static IN_FLIGHT: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local p = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(p) == 'table' and p[1] ~= nil and type(p[1]) == 'number' then return p[1] end
return 0
"#,
    )
});

/// The live groups of a broadcast stream: for each, its name, its members
/// whose announcement has not expired, and its lag (-1 when unknown).
/// KEYS: stream, group registry, member registry.
pub(crate) static GROUPS: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local out = {}
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local alive = {}
local registry = redis.call('HGETALL', KEYS[2])
for i = 1, #registry, 2 do
  local deadline = tonumber(string.match(registry[i + 1], '(%d+),'))
  if deadline ~= nil and deadline >= now then alive[registry[i]] = 0 end
end
local members = redis.call('HGETALL', KEYS[3])
for i = 1, #members, 2 do
  local group = string.match(members[i], '^([^|]*)|')
  local deadline = tonumber(members[i + 1])
  if deadline == nil or deadline < now then
    redis.call('HDEL', KEYS[3], members[i])
  elseif group ~= nil and alive[group] ~= nil then
    alive[group] = alive[group] + 1
  end
end
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) ~= 'table' or groups.err ~= nil then return out end
for _, g in ipairs(groups) do
  local name, lag
  for i = 1, #g, 2 do
    if g[i] == 'name' then name = g[i + 1] end
    if g[i] == 'lag' then lag = g[i + 1] end
  end
  if name ~= nil and alive[name] ~= nil then
    if type(lag) ~= 'number' then lag = -1 end
    table.insert(out, name)
    table.insert(out, alive[name])
    table.insert(out, lag)
  end
end
return out
"#,
    )
});

/// The not-yet-delivered entries of a queue, oldest first. KEYS: stream.
/// ARGV: group, count.
pub(crate) static PEEK: LazyLock<Script> = LazyLock::new(|| {
    script(
        r#"
local start = '-'
local groups = redis.pcall('XINFO', 'GROUPS', KEYS[1])
if type(groups) == 'table' and groups.err == nil then
  for _, g in ipairs(groups) do
    local name, last
    for i = 1, #g, 2 do
      if g[i] == 'name' then name = g[i + 1] end
      if g[i] == 'last-delivered-id' then last = g[i + 1] end
    end
    if name == ARGV[1] and last ~= nil then start = '(' .. last end
  end
end
return redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', tonumber(ARGV[2]))
"#,
    )
});

/// Drops broadcast groups whose deadline passed, from the registry and
/// the stream. Shared by [`BROADCAST`] and [`JOIN`].
const PRUNE: &str = r#"
local function prune(stream, registry, now)
  local groups = redis.call('HGETALL', registry)
  local live, maxret = 0, 0
  for i = 1, #groups, 2 do
    local deadline, ret = string.match(groups[i + 1], '(%d+),(%d+)')
    deadline = tonumber(deadline)
    ret = tonumber(ret)
    if deadline == nil or deadline < now then
      redis.pcall('XGROUP', 'DESTROY', stream, groups[i])
      redis.call('HDEL', registry, groups[i])
    else
      live = live + 1
      if ret > maxret then maxret = ret end
    end
  end
  return live, maxret
end
"#;

/// Publishes to every live group of a broadcast topic. KEYS: stream,
/// group registry, delayed zset. ARGV: MAXLEN, delay ms (0 = none),
/// member (when delayed), then the fields. Returns the number of live
/// groups (nothing is stored when there are none).
pub(crate) static BROADCAST: LazyLock<Script> = LazyLock::new(|| {
    script(&format!(
        r#"{PRUNE}
local now = now_ms(false)
local live, maxret = prune(KEYS[1], KEYS[2], now)
if live == 0 then return 0 end
local delay = tonumber(ARGV[2])
if delay > 0 then
  redis.call('ZADD', KEYS[3], now_ms(true) + delay, ARGV[3])
else
  redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(ARGV, 4))
end
redis.call('XTRIM', KEYS[1], 'MINID', '~', string.format('%d', now - maxret))
return live
"#
    ))
});

/// Joins (or refreshes) a broadcast group: creates its consumer group at
/// the stream's end (`$`, the join point) when missing, and records its
/// deadline. KEYS: stream, group registry. ARGV: group, retention ms.
/// Returns 1 when the group was created, 0 when it existed.
pub(crate) static JOIN: LazyLock<Script> = LazyLock::new(|| {
    script(&format!(
        r#"{PRUNE}
local now = now_ms(false)
prune(KEYS[1], KEYS[2], now)
local created = redis.pcall('XGROUP', 'CREATE', KEYS[1], ARGV[1], '$', 'MKSTREAM')
local ret = tonumber(ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d,%d', now + ret, ret))
if type(created) == 'table' and created.err ~= nil then return 0 end
return 1
"#
    ))
});

/// Sends a reply: `RPUSH` and `PEXPIRE` at once. KEYS: inbox. ARGV: body,
/// ttl ms.
pub(crate) static SEND_REPLY: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
redis.call('RPUSH', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#,
    )
});

/// The prelude of the job-control scripts: finding a job by its id. A
/// delayed member holds the id as the field `h:ezmq-message-id` encoded
/// `17:h:ezmq-message-id<len>:<id>`, so one plain `string.find` per member
/// finds it exactly; a stream entry holds it as that field (or, pushed
/// without it by a raw producer, is its own id).
const FIND_JOB: &str = r#"
local function find_delayed(key, id)
  local needle = '17:h:ezmq-message-id' .. #id .. ':' .. id
  for _, m in ipairs(redis.call('ZRANGE', key, 0, -1)) do
    if string.find(m, needle, 33, true) then return m end
  end
  return nil
end
local function find_entry(key, id)
  for _, e in ipairs(redis.call('XRANGE', key, '-', '+')) do
    if e[1] == id then return e[1] end
    local f = e[2]
    for i = 1, #f, 2 do
      if f[i] == 'h:ezmq-message-id' then
        if f[i + 1] == id then return e[1] end
        break
      end
    end
  end
  return nil
end
"#;

fn job_script(body: &str) -> Script {
    script(&format!("{FIND_JOB}{body}"))
}

/// Finds job `id` of a topic on the server, so that a lookup sends back
/// one job, not the topic's. KEYS: delayed zset, stream. ARGV: job id,
/// group. Returns `{1, member, score}` for a delayed job, `{2, XRANGE of
/// its entry, 1 when pending else 0}` for a stream entry, `{0}` when not
/// found. O(n) in the topic's jobs, like [`CANCEL`].
pub(crate) static FIND_JOB_BY_ID: LazyLock<Script> = LazyLock::new(|| {
    job_script(
        r#"
local m = find_delayed(KEYS[1], ARGV[1])
if m then return {1, m, redis.call('ZSCORE', KEYS[1], m)} end
local e = find_entry(KEYS[2], ARGV[1])
if not e then return {0} end
local pending = redis.pcall('XPENDING', KEYS[2], ARGV[2], e, e, 1)
local running = 0
if type(pending) == 'table' and #pending > 0 then running = 1 end
return {2, redis.call('XRANGE', KEYS[2], e, e), running}
"#,
    )
});

/// Cancels job `id` of a topic in one step: removes it from the delayed
/// set, or its entry from the stream unless a consumer has it (pending).
/// KEYS: delayed zset, stream. ARGV: job id, group. Returns 1 when
/// removed, -1 when it is running (left alone), 0 when not found. O(n) in
/// the topic's delayed and waiting jobs, on the server.
pub(crate) static CANCEL: LazyLock<Script> = LazyLock::new(|| {
    job_script(
        r#"
local m = find_delayed(KEYS[1], ARGV[1])
if m then return redis.call('ZREM', KEYS[1], m) end
local e = find_entry(KEYS[2], ARGV[1])
if not e then return 0 end
local pending = redis.pcall('XPENDING', KEYS[2], ARGV[2], e, e, 1)
if type(pending) == 'table' and #pending > 0 then return -1 end
return redis.call('XDEL', KEYS[2], e)
"#,
    )
});

/// Makes delayed job `id` ready now: removes it from the delayed set and
/// adds it to the stream in the same step. KEYS: delayed zset, stream.
/// ARGV: job id, stream MAXLEN (0 = none). Returns 1 when done, 0 when it
/// is not delayed.
pub(crate) static PROMOTE_JOB: LazyLock<Script> = LazyLock::new(|| {
    job_script(
        r#"
local m = find_delayed(KEYS[1], ARGV[1])
if not m then return 0 end
redis.call('ZREM', KEYS[1], m)
xadd(KEYS[2], ARGV[2], decode(m))
return 1
"#,
    )
});

/// Moves delayed job `id` to a new due time. KEYS: delayed zset. ARGV:
/// job id, delay ms from the server's now (0 or less: due at once).
/// Returns 1 when moved, 0 when it is not delayed.
pub(crate) static RESCHEDULE_JOB: LazyLock<Script> = LazyLock::new(|| {
    job_script(
        r#"
local m = find_delayed(KEYS[1], ARGV[1])
if not m then return 0 end
local delay = tonumber(ARGV[2])
if delay < 0 then delay = 0 end
redis.call('ZADD', KEYS[1], 'XX', now_ms(true) + delay, m)
return 1
"#,
    )
});

/// Takes a claim under a token unless it is held. KEYS: claim key. ARGV:
/// token, hold ms. Returns false when taken, else the holder's token.
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
local holder = redis.call('GET', KEYS[1])
if holder then return holder end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"#,
    )
});

/// Deletes a claim when the token holds it. KEYS: claim key. ARGV: token.
/// Returns 1 when deleted.
pub(crate) static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"#,
    )
});
