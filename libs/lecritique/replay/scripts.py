"""Lua scripts that make every replay operation one atomic step inside Redis.

Keys (``KEYS``), identical for every script so the prelude can check them:

1. ``lecritique:{experiment}:replay`` — stream; one entry per trajectory, fields ``v`` (policy
   version, decimal) and ``p`` (payload bytes). Stream order is FIFO order.
2. ``...:replay:index`` — sorted set, member = entry id, score = policy version. Uniform sampling
   picks ranks in it; age eviction is one ``ZRANGEBYSCORE``.
3. ``...:replay:uses`` — hash, entry id -> times sampled (absent: never sampled).
4. ``...:replay:stats`` — hash of totals: ``pushed``, ``sampled``, ``evicted_capacity``,
   ``evicted_reuse``, ``evicted_age``.
5. ``...:replay:config`` — hash: ``capacity``, ``max_reuse``, ``max_age_versions`` (-1: none).
6. (push only) ``...:replay:push:{token}`` — ids of a finished push, kept a few minutes so a
   push retried after a lost reply returns the first result instead of storing twice.

``ARGV[1..3]`` are always the caller's capacity, max_reuse and max_age_versions. The prelude
rejects a call whose settings differ from the stored ones (two replicas configured differently
would break the reuse bound), and checks key types before any write, because Redis 6.2 does not
roll back a script that fails half way.
"""

from __future__ import annotations

_PRELUDE = """
local function check_layout()
  local expected = {'stream', 'zset', 'hash', 'hash', 'hash'}
  for i = 1, 5 do
    local kind = redis.call('TYPE', KEYS[i]).ok
    if kind ~= 'none' and kind ~= expected[i] then
      return 'key ' .. KEYS[i] .. ' holds a ' .. kind .. ', expected a ' .. expected[i]
    end
  end
  local names = {'capacity', 'max_reuse', 'max_age_versions'}
  local stored = redis.call('HMGET', KEYS[5], names[1], names[2], names[3])
  if not stored[1] then
    redis.call('HSET', KEYS[5], names[1], ARGV[1], names[2], ARGV[2], names[3], ARGV[3])
    return nil
  end
  for i = 1, 3 do
    if stored[i] ~= ARGV[i] then
      return 'replay config mismatch on ' .. KEYS[5] .. ': ' .. names[i] .. ' is ' .. tostring(stored[i])
        .. ' in Redis but ' .. ARGV[i] .. ' in this client'
    end
  end
  return nil
end

local problem = check_layout()
if problem then
  return redis.error_reply('LECRITIQUE ' .. problem)
end

-- Lua's unpack() is bounded by the C stack; commands with many arguments go in chunks (even-sized,
-- so score/member and field/value pairs stay together).
local CHUNK = 500

local function chunks(list)
  local out = {}
  for start = 1, #list, CHUNK do
    out[#out + 1] = {unpack(list, start, math.min(start + CHUNK - 1, #list))}
  end
  return out
end

-- Removes entries everywhere (one command per key and chunk, not per entry).
local function remove(ids)
  for _, chunk in ipairs(chunks(ids)) do
    redis.call('XDEL', KEYS[1], unpack(chunk))
    redis.call('ZREM', KEYS[2], unpack(chunk))
    redis.call('HDEL', KEYS[3], unpack(chunk))
  end
end

-- Times each entry has been sampled (0 if never), in the order of ids.
local function uses_of(ids)
  local uses = {}
  for _, chunk in ipairs(chunks(ids)) do
    local counts = redis.call('HMGET', KEYS[3], unpack(chunk))
    for i = 1, #chunk do
      uses[#uses + 1] = tonumber(counts[i] or '0')
    end
  end
  return uses
end

-- Removes entries that leave for a reason other than reuse; returns their use counts.
local function evict(ids)
  local uses = uses_of(ids)
  remove(ids)
  return uses
end
"""

CONFIGURE = (
    _PRELUDE
    + """
return 1
"""
)
"""Store the settings if none are stored; error if different ones are."""

RECONFIGURE = """
redis.call('HSET', KEYS[5], 'capacity', ARGV[1], 'max_reuse', ARGV[2], 'max_age_versions', ARGV[3])
return 1
"""
"""Overwrite the stored settings (a deliberate change of an experiment's replay semantics)."""

PUSH = (
    _PRELUDE
    + """
-- ARGV[4] = number of entries, ARGV[5] = idempotency TTL (s), then (version, payload) pairs.
local done = redis.call('GET', KEYS[6])
if done then
  local ids = {}
  for id in string.gmatch(done, '[^,]+') do ids[#ids + 1] = id end
  return {ids, {}, redis.call('XLEN', KEYS[1]), 1}
end
local count = tonumber(ARGV[4])
local ids = {}
local scored = {}
for i = 1, count do
  local version = ARGV[4 + 2 * i]
  local id = redis.call('XADD', KEYS[1], '*', 'v', version, 'p', ARGV[5 + 2 * i])
  ids[i] = id
  scored[#scored + 1] = version
  scored[#scored + 1] = id
end
for _, chunk in ipairs(chunks(scored)) do
  redis.call('ZADD', KEYS[2], unpack(chunk))
end
local depth = redis.call('XLEN', KEYS[1])
local capacity = tonumber(ARGV[1])
local evicted_uses = {}
if depth > capacity then
  local oldest = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', depth - capacity)
  local oldest_ids = {}
  for i, entry in ipairs(oldest) do
    oldest_ids[i] = entry[1]
  end
  evicted_uses = evict(oldest_ids)
  redis.call('HINCRBY', KEYS[4], 'evicted_capacity', #oldest_ids)
  depth = depth - #oldest_ids
end
redis.call('HINCRBY', KEYS[4], 'pushed', count)
redis.call('SET', KEYS[6], table.concat(ids, ','), 'EX', tonumber(ARGV[5]))
return {ids, evicted_uses, depth, 0}
"""
)
"""Append entries (FIFO), index them, evict the oldest beyond capacity. Returns
``{ids, uses_of_capacity_evicted, depth, was_duplicate}``."""

SAMPLE = (
    _PRELUDE
    + """
-- ARGV[4] = n, ARGV[5] = current policy version ('' if unknown), ARGV[6] = random seed.
local max_reuse = tonumber(ARGV[2])
local max_age = tonumber(ARGV[3])
local age_uses = {}
if max_age >= 0 and ARGV[5] ~= '' then
  -- current - version > max_age  <=>  version < current - max_age
  local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tonumber(ARGV[5]) - max_age))
  age_uses = evict(stale)
  if #stale > 0 then
    redis.call('HINCRBY', KEYS[4], 'evicted_age', #stale)
  end
end

local depth = redis.call('ZCARD', KEYS[2])
local k = math.min(tonumber(ARGV[4]), depth)
-- Partial Fisher-Yates over ranks 0..depth-1 (a sparse swap table keeps it O(k)). Redis seeds
-- math.random identically for every call, so the client sends a fresh seed.
math.randomseed(tonumber(ARGV[6]))
local swapped = {}
local ids = {}
for i = 0, k - 1 do
  local j = math.random(i, depth - 1)
  local at_i = swapped[i] or i
  local at_j = swapped[j] or j
  swapped[j] = at_i
  swapped[i] = at_j
  ids[i + 1] = redis.call('ZRANGE', KEYS[2], at_j, at_j)[1]
end

-- Ranks were all resolved above, before any entry below is removed from the index.
local previous = uses_of(ids)
local out = {}
local counted = {}
local used_up = {}
for i, id in ipairs(ids) do
  local fields = redis.call('XRANGE', KEYS[1], id, id)[1][2]
  local version, payload
  for f = 1, #fields, 2 do
    if fields[f] == 'v' then version = fields[f + 1] elseif fields[f] == 'p' then payload = fields[f + 1] end
  end
  local used = previous[i] + 1
  if used >= max_reuse then
    used_up[#used_up + 1] = id
  else
    counted[#counted + 1] = id
    counted[#counted + 1] = used
  end
  out[#out + 1] = struct.pack('<I2I4I8I4', #id, used, tonumber(version), #payload)
  out[#out + 1] = id
  out[#out + 1] = payload
end
for _, chunk in ipairs(chunks(counted)) do
  redis.call('HSET', KEYS[3], unpack(chunk))
end
remove(used_up)
local reuse_evicted = #used_up
if k > 0 then
  redis.call('HINCRBY', KEYS[4], 'sampled', k)
end
if reuse_evicted > 0 then
  redis.call('HINCRBY', KEYS[4], 'evicted_reuse', reuse_evicted)
end
return {table.concat(out), age_uses, reuse_evicted, depth - reuse_evicted}
"""
)
"""Evict entries past the age bound, then draw up to n distinct entries uniformly, count the use,
evict those that reached max_reuse. Returns ``{records, uses_of_age_evicted, reuse_evicted, depth}``
where ``records`` is one binary string (see :data:`SAMPLE_RECORD_HEADER`): one reply element
instead of four per entry keeps the client's RESP parsing off the hot path."""

SAMPLE_RECORD_HEADER = "<HIQI"
"""``struct`` layout of each sampled record's header, followed by the id and the payload bytes:
id length (u16), times used (u32), policy version (u64), payload length (u32), little-endian."""
