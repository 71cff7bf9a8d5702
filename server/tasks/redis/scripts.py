"""The Lua scripts of the Redis task store; each touches the keys of one hash tag only (one
slot of a Redis Cluster), so it runs atomically there too. BATCH, which runs several of WRITE,
INDEX and SETTLE in one call, spans slots and is for a standalone Redis only.

Task hash fields: body (Task bytes), ver, tenant, owner, state, ctx, updated (ns), ik (the
task's ListTasks index member), runner (the replica working on it, "" when none).
"""

from __future__ import annotations

WRITE = """
-- KEYS: task, events, push configs, push version.  ARGV: expected ver (-1: must not exist),
-- body, state, updated, ik, event ("" = none), flags, stream maxlen, ttl ms (0 = none),
-- runner ("-" = keep), channel, force ("1": write over a cancel in progress), then
-- field/value pairs to set as well (create: tenant, owner, ctx).
-- Returns {1, ver, event id, replaced ik, push version}, {0, state} when the version moved,
-- {2, state} when a cancel is in progress (STOP) and this write does not force.
local ver = tonumber(redis.call('HGET', KEYS[1], 'ver') or '-1')
if ver ~= tonumber(ARGV[1]) then
  return {0, tonumber(redis.call('HGET', KEYS[1], 'state') or '0'), ver}
end
if ARGV[12] ~= '1' and redis.call('HGET', KEYS[1], 'stop') == '1' then
  return {2, tonumber(redis.call('HGET', KEYS[1], 'state') or '0'), ver}
end
local old_ik = redis.call('HGET', KEYS[1], 'ik') or ''
redis.call('HSET', KEYS[1], 'body', ARGV[2], 'ver', ver + 1, 'state', ARGV[3],
           'updated', ARGV[4], 'ik', ARGV[5])
if ARGV[10] ~= '-' then redis.call('HSET', KEYS[1], 'runner', ARGV[10]) end
if #ARGV > 12 then redis.call('HSET', KEYS[1], unpack(ARGV, 13)) end
local id = ''
if ARGV[6] ~= '' then
  id = redis.call('XADD', KEYS[2], 'MAXLEN', ARGV[8], '*', 'e', ARGV[6], 'f', ARGV[7])
  redis.call('PUBLISH', ARGV[11], id .. '\\n' .. ARGV[7] .. '\\n' .. ARGV[6])
end
local ttl = tonumber(ARGV[9])
local push_version = tonumber(redis.call('GET', KEYS[4]) or '0')
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
  -- Finished, and no webhook will replay its events: its stream goes now (streams are read
  -- through pub/sub and snapshots), which saves the ~4.7 KiB a stream's first node takes.
  -- A task a stream followed keeps it (field rs), for streams that resume after an event id.
  if push_version == 0 and redis.call('HGET', KEYS[1], 'rs') ~= '1' then
    redis.call('DEL', KEYS[2])
  end
end
return {1, ver + 1, id, old_ik, push_version}
"""

EMIT = """
-- KEYS: events.  ARGV: event, flags, maxlen, channel, ttl ms.
local id = redis.call('XADD', KEYS[1], 'MAXLEN', ARGV[3], '*', 'e', ARGV[1], 'f', ARGV[2])
redis.call('PUBLISH', ARGV[4], id .. '\\n' .. ARGV[2] .. '\\n' .. ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
return id
"""

NOTICE = """
-- KEYS: events (it names the task's slot: the notice is published where the task's events are,
-- so a Cluster delivers it after them).  ARGV: channel, notice.  A notice on the task's channel
-- that is not one of its events (see events.py).
return redis.call('PUBLISH', ARGV[1], ARGV[2])
"""

SNAPSHOT = """
-- KEYS: task, events.  ARGV: ("1": a stream follows the task: it keeps its events to the end).
-- The task's fields and the id of its last event, read together.
local fields = redis.call('HMGET', KEYS[1], 'body', 'tenant', 'owner', 'ver', 'runner', 'ik')
if ARGV[1] == '1' and fields[1] then redis.call('HSET', KEYS[1], 'rs', '1') end
local last = redis.call('XREVRANGE', KEYS[2], '+', '-', 'COUNT', 1)
local id = '0-0'
if #last > 0 then id = last[1][1] end
table.insert(fields, id)
return fields
"""

REPLAY = """
-- KEYS: task, events.  ARGV: an event id as Redis writes one ("<ms>-<seq>", checked by the
-- caller), or "" for a text that is none; a count.  The task's body, tenant, owner and state,
-- then 'ok' and the first <count> events after the id ({id, {'e', event, 'f', flags}}; a replay
-- reads page after page, each checked as the first), or 'expired' (some were trimmed, or the
-- stream is gone), or 'unknown' (the id is no entry of the task's stream); {} for a task that
-- is not stored.  Marks the task as followed by a stream (see WRITE).
-- Ids are compared by Redis itself (XRANGE), never as Lua numbers (doubles: 53 bits).
-- Trimming (exact, one entry more than the events kept: the oldest entry is the last event
-- let go of, for streams to resume after) is the only deletion, from the front.
local fields = redis.call('HMGET', KEYS[1], 'body', 'tenant', 'owner', 'state')
if not fields[1] then return {} end
redis.call('HSET', KEYS[1], 'rs', '1')
local after = ARGV[1]
if after == '' then table.insert(fields, 'unknown') return fields end
if redis.call('EXISTS', KEYS[2]) == 0 then table.insert(fields, 'expired') return fields end
if #redis.call('XRANGE', KEYS[2], after, after) == 0 then
  -- No entry: trimmed (before the first one kept, once some went), or none of the task's.
  local trimmed = false
  local info = redis.call('XINFO', 'STREAM', KEYS[2])
  for i = 1, #info, 2 do
    if info[i] == 'entries-added' then trimmed = info[i + 1] > redis.call('XLEN', KEYS[2]) end
  end
  if trimmed and #redis.call('XRANGE', KEYS[2], '-', after, 'COUNT', 1) == 0 then
    table.insert(fields, 'expired')
  else
    table.insert(fields, 'unknown')
  end
  return fields
end
table.insert(fields, 'ok')
local entries = redis.call('XRANGE', KEYS[2], '(' .. after, '+', 'COUNT', tonumber(ARGV[2]))
for i = 1, #entries do table.insert(fields, entries[i]) end
return fields
"""

RESERVE = """
-- KEYS: all, owner live, tenant live, this replica's tasks.  ARGV: task id, now ms, max tasks,
-- max per owner, max per tenant ("" = no bound), scope, how many finished tasks one eviction
-- takes.  Returns {'ok', evicted ids...} | {'owner' | 'tenant', live count} | {'full'}.
-- Finished tasks past their time to live (up to one eviction batch) leave the room here, and a
-- full room evicts its oldest finished tasks (finite scores; live ones, +inf, never), both
-- atomically with this reservation, so no other reservation can take the room they free; the
-- caller deletes their keys (every id that leaves the room is returned: one dropped unreturned
-- would keep its keys until their backstop TTL, and its index entries for good).  The
-- replica's tasks hash gets the id at once, so a reaper can give the room back if the replica
-- dies before it creates the task.
if ARGV[4] ~= '' and redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[4]) then
  return {'owner', redis.call('ZCARD', KEYS[2])}
end
if ARGV[5] ~= '' and redis.call('ZCARD', KEYS[3]) >= tonumber(ARGV[5]) then
  return {'tenant', redis.call('ZCARD', KEYS[3])}
end
local reply = {'ok'}
local batch = tonumber(ARGV[7])
local expired = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'LIMIT', 0, batch)
if #expired > 0 then
  redis.call('ZREM', KEYS[1], unpack(expired))
  for i = 1, #expired do reply[#reply + 1] = expired[i] end
end
local excess = redis.call('ZCARD', KEYS[1]) - tonumber(ARGV[3]) + 1
if excess > 0 then
  local oldest = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(+inf', 'LIMIT', 0,
                            math.max(excess, batch))
  if #oldest < excess then
    -- Full of live tasks: the expired ones taken above go all the same (the caller deletes
    -- them); nothing else changed.
    reply[1] = 'full'
    return reply
  end
  redis.call('ZREM', KEYS[1], unpack(oldest))
  for i = 1, #oldest do reply[#reply + 1] = oldest[i] end
end
redis.call('ZADD', KEYS[1], '+inf', ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
redis.call('ZADD', KEYS[3], ARGV[2], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[1], ARGV[6])
return reply
"""

SETTLE = """
-- KEYS: all, owner live, tenant live, parked, replica's tasks.  ARGV: task id, how
-- ("terminal" | "interrupted" | "working" | "release"), now ms, expiry ms, scope.
local id = ARGV[1]
local how = ARGV[2]
if how == 'terminal' then
  redis.call('ZADD', KEYS[1], 'XX', ARGV[4], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
elseif how == 'interrupted' then
  redis.call('ZADD', KEYS[4], ARGV[3], id)
  redis.call('HDEL', KEYS[5], id)
elseif how == 'working' then
  redis.call('ZREM', KEYS[4], id)
  redis.call('HSET', KEYS[5], id, ARGV[5])
else -- release: reserved room that no task used
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
  redis.call('HDEL', KEYS[5], id)
end
return 1
"""

INDEX = """
-- KEYS: all, old state, new state, context ("" key name = none).  ARGV: old member, new member.
for i = 1, 3 do
  if ARGV[1] ~= '' then redis.call('ZREM', KEYS[i], ARGV[1]) end
end
if KEYS[4] ~= nil then
  if ARGV[1] ~= '' then redis.call('ZREM', KEYS[4], ARGV[1]) end
  redis.call('ZADD', KEYS[4], 0, ARGV[2])
end
redis.call('ZADD', KEYS[1], 0, ARGV[2])
redis.call('ZADD', KEYS[3], 0, ARGV[2])
return 1
"""

FORGET = """
-- KEYS: the six keys of each task (task, events, push configs, push version, push cursors,
-- push protocols), task after task.  Deletes them all; returns, per task, what its index
-- entries need: {tenant, owner, state, ctx, ik} (false each when it was gone).
local found = {}
for first = 1, #KEYS, 6 do
  found[#found + 1] = redis.call('HMGET', KEYS[first], 'tenant', 'owner', 'state', 'ctx', 'ik')
  redis.call('DEL', unpack(KEYS, first, first + 5))
end
return found
"""

UNINDEX = """
-- KEYS: the index keys of each task (all, state, context when it has one), task after task.
-- ARGV: per task, how many of KEYS are its, then its member.
local key_at = 1
for i = 1, #ARGV, 2 do
  local last = key_at + tonumber(ARGV[i]) - 1
  for k = key_at, last do redis.call('ZREM', KEYS[k], ARGV[i + 1]) end
  key_at = last + 1
end
return 1
"""

CLAIM = """
-- KEYS: claim.  ARGV: value, window ms.  The existing value, or false when this one was set.
local existing = redis.call('GET', KEYS[1])
if existing then return existing end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""

UNCLAIM = """
-- KEYS: claim.  ARGV: value.  Deletes the claim only when it is still this one.
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""

HEARTBEAT = """
-- KEYS: replicas.  ARGV: replica id, lease expiry ms, now ms.  Renews this replica's lease and
-- returns the replicas whose lease ran out (their reaping is claimed with ZREM).
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', '(' .. ARGV[3])
"""

PUSH_CHANGE = """
-- KEYS: push configs, push version, push protocols.  ARGV: "set", id, config, protocol ("" for
-- 1.0, which is not recorded) | "delete", id.
if ARGV[1] == 'set' then
  redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
  if ARGV[4] ~= '' then
    redis.call('HSET', KEYS[3], ARGV[2], ARGV[4])
  else
    redis.call('HDEL', KEYS[3], ARGV[2])
  end
else
  redis.call('HDEL', KEYS[1], ARGV[2])
  redis.call('HDEL', KEYS[3], ARGV[2])
end
return redis.call('INCR', KEYS[2])
"""

RESEAL = """
-- KEYS: push configs.  ARGV: id, the config as read, the config resealed.  Writes it only if it
-- is still as read (a config a server replaced meanwhile is left as that server wrote it).
-- The push version does not move: the config reads the same, only its sealing changed.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return 1
end
return 0
"""

STOP = """
-- KEYS: task.  A cancel in progress: from now on only forced writes (the cancel's, a reaper's)
-- change the task, so a run writing in a tight loop cannot starve the cancel.  Returns the
-- state, 0 when there is no such task.
local state = tonumber(redis.call('HGET', KEYS[1], 'state') or '0')
if state ~= 0 then redis.call('HSET', KEYS[1], 'stop', '1') end
return state
"""


def _as_function(name: str, script: str) -> str:
    """`script` as a local Lua function of its own KEYS and ARGV (they shadow the globals)."""
    return f"local function {name}(KEYS, ARGV)\n{script}\nend\n"


BATCH = (
    _as_function("write", WRITE)
    + _as_function("index", INDEX)
    + _as_function("settle", SETTLE)
    + """
-- KEYS: every part's keys, part after part.  ARGV: the number of parts, then per part its
-- script ("WRITE" | "INDEX" | "SETTLE"), key count and argument count, then every part's
-- arguments, part after part.  Returns each part's reply, in order.  The parts after a WRITE
-- that was refused (its version moved, or a cancel is in progress) belong to that write and do
-- not run: their replies are 0.
local scripts = {WRITE = write, INDEX = index, SETTLE = settle}
local parts = tonumber(ARGV[1])
local key_at, arg_at = 1, 2 + 3 * parts
local replies = {}
local refused = false
for part = 0, parts - 1 do
  local key_count = tonumber(ARGV[3 + 3 * part])
  local arg_count = tonumber(ARGV[4 + 3 * part])
  if refused then
    replies[part + 1] = 0
  else
    local name = ARGV[2 + 3 * part]
    local reply = scripts[name]({unpack(KEYS, key_at, key_at + key_count - 1)},
                                {unpack(ARGV, arg_at, arg_at + arg_count - 1)})
    if name == 'WRITE' and reply[1] ~= 1 then refused = true end
    replies[part + 1] = reply
  end
  key_at = key_at + key_count
  arg_at = arg_at + arg_count
end
return replies
"""
)
