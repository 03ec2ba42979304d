-- crosslock script prelude: shared checks, prepended to every script (see scripts/mod.rs).
-- Layout facts are in docs/protocol.md; every script validates its arguments and the type of
-- what it finds before it writes anything.

-- A duration argument in whole milliseconds within 1 .. 2^53-1, or raises an ERR_ARG error.
local function ms_arg(value, what)
    local n = tonumber(value)
    if n == nil or n < 1 or n > 9007199254740991 or n ~= math.floor(n) then
        error({ err = 'ERR_ARG ' .. what .. ' must be a whole number of milliseconds in 1..2^53-1, got ' .. tostring(value) })
    end
    return n
end

-- Whether `field` looks like a Redisson holder: <client-id>:<thread-id>, optionally :write.
local function holder_shaped(field)
    return string.find(field, '^.+:%-?%d+$') ~= nil or string.find(field, '^.+:%-?%d+:write$') ~= nil
end

-- not_a_lock for a key known to hold a hash (a hash command on it just succeeded): two calls
-- where a lock is what it finds, which is the busy path every waiter's failed attempt takes.
local function not_a_lock_hash(key)
    local n = redis.call('hlen', key)
    if n ~= 1 then
        if redis.call('hexists', key, 'mode') == 1 then return 'a read-write lock' end
        return 'a hash with ' .. n .. ' fields that is not a lock'
    end
    local pair = redis.call('hgetall', key)
    if pair[1] == 'mode' then return 'a read-write lock' end
    if not holder_shaped(pair[1]) or tonumber(pair[2]) == nil then
        return 'a hash that is not a lock (field "' .. pair[1] .. '")'
    end
    return nil
end

-- What the key holds when it is not an RLock-family lock hash (one holder field with a count),
-- or nil when it is one (or absent). Only called on the busy paths, so a lock costs nothing.
local function not_a_lock(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then return nil end
    if kind ~= 'hash' then return 'a ' .. kind end
    return not_a_lock_hash(key)
end

-- What the key holds when it is not a read-write lock hash (a `mode` field plus holders), or nil.
local function not_a_rwlock(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then return nil end
    if kind ~= 'hash' then return 'a ' .. kind end
    local mode = redis.call('hget', key, 'mode')
    if mode == 'read' or mode == 'write' then return nil end
    if redis.call('hlen', key) == 1 and holder_shaped(redis.call('hkeys', key)[1]) then
        return 'a lock (not a read-write lock)'
    end
    return 'a hash that is not a lock'
end

local function wrong_type(what)
    return redis.error_reply('WRONGTYPE ' .. what)
end

-- Fair lock: drops queue heads whose deadline passed (or that have none), oldest first.
-- KEYS: queue, timeout zset; `now` in epoch ms. Returns the head left (false: the queue is empty).
local function purge_stale_heads(queue, timeouts, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false then return false end
        local score = redis.call('zscore', timeouts, head)
        if score ~= false and tonumber(score) > now then return head end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
    end
end

-- Fair lock: a waiter has just left 1-based place `from` of `queue`, so the waiters now at `from`
-- and after it each moved up one place and their deadlines come earlier by one step each. A
-- waiter's step is its own wait, which Redis does not know: it is at most `wait` (the leaver's) and
-- at most the time left to its deadline divided by the place it stood at (a deadline is about the
-- waiter's wait x its place). So a live waiter with a short wait limit keeps its place when one
-- with a long wait moves on, and a dead waiter's deadline still comes closer with every move.
local function move_up(queue, timeouts, from, wait, now)
    local waiters = redis.call('lrange', queue, from - 1, -1)
    for i, waiter in ipairs(waiters) do
        local score = redis.call('zscore', timeouts, waiter)
        if score then
            local step = math.min(wait, math.floor((tonumber(score) - now) / (from + i)))
            if step > 0 then redis.call('zincrby', timeouts, -step, waiter) end
        end
    end
end

-- Fair lock: fails with WRONGTYPE unless the queue is a list and the timeouts a sorted set.
local function check_fair_keys(queue, timeouts)
    local q = redis.call('type', queue)['ok']
    if q ~= 'none' and q ~= 'list' then return 'a fair-lock queue key holding a ' .. q end
    local t = redis.call('type', timeouts)['ok']
    if t ~= 'none' and t ~= 'zset' then return 'a fair-lock timeout key holding a ' .. t end
    return nil
end

-- A whole-number argument within `low` .. 2^53-1, or raises an ERR_ARG error.
local function int_arg(value, what, low)
    local n = tonumber(value)
    if n == nil or n < low or n > 9007199254740991 or n ~= math.floor(n) then
        error({ err = 'ERR_ARG ' .. what .. ' must be a whole number in ' .. low .. '..2^53-1, got ' .. tostring(value) })
    end
    return n
end

-- The integer a counter key (a semaphore's permits, a latch's count) holds: nil when absent;
-- raises WRONGTYPE when the key holds anything but an integer string.
local function counter_of(key, what)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then return nil end
    if kind ~= 'string' then error({ err = 'WRONGTYPE a ' .. kind }) end
    local n = tonumber(redis.call('get', key))
    if n == nil or n ~= math.floor(n) then error({ err = 'WRONGTYPE a string that is not ' .. what }) end
    return n
end

-- Permit ids travel as 32 hex characters and are stored as Redisson stores them: 16 raw bytes.
local function permit_id(hex)
    if type(hex) ~= 'string' or string.len(hex) ~= 32 or string.find(hex, '[^0-9a-f]') then
        error({ err = 'ERR_ARG a permit id must be 32 lower-case hex characters, got ' .. tostring(hex) })
    end
    return (string.gsub(hex, '..', function(cc) return string.char(tonumber(cc, 16)) end))
end

-- The permit-expirable semaphore's "reclaim expired" step: permits whose expiry (score) is at or
-- before `now` go back to the counter (at most `limit` of them when given), and the new count is
-- published when some are available. KEYS: counter, timeouts, channel.
local function reclaim(counter, timeouts, channel, now, publish, limit)
    local kind = redis.call('type', timeouts)['ok']
    if kind ~= 'none' and kind ~= 'zset' then error({ err = 'WRONGTYPE a permit timeout key holding a ' .. kind }) end
    local expired
    if limit then
        expired = redis.call('zrangebyscore', timeouts, 0, now, 'limit', 0, limit)
    else
        expired = redis.call('zrangebyscore', timeouts, 0, now)
    end
    if #expired == 0 then return end
    for _, id in ipairs(expired) do redis.call('zrem', timeouts, id) end
    counter_of(counter, 'a permit count')
    local available = redis.call('incrby', counter, #expired)
    if available > 0 then redis.call(publish, channel, available) end
end

-- What the key holds when it is not a group lock's hash (Redisson's getMultiLock(group, values):
-- fields named by a value's hash, 22 Base64 characters, plus "<field>:<holder>:expire_time" and
-- "<field>:<holder>:lock_count"), or nil when it is one (or absent). One field is looked at.
local function not_a_group_lock(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then return nil end
    if kind ~= 'hash' then return 'a ' .. kind end
    local field = redis.call('hrandfield', key)
    if not field then return nil end
    if #field == 22 and string.find(field, '^[%w+/]+$') then return nil end
    if string.find(field, '^[%w+/]+:.+:expire_time$') or string.find(field, '^[%w+/]+:.+:lock_count$') then
        return nil
    end
    if field == 'mode' then return 'a read-write lock' end
    if holder_shaped(field) then return 'a lock of another kind (not a group lock)' end
    return 'a hash that is not a group lock (field "' .. field .. '")'
end
