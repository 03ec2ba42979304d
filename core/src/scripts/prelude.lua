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

-- What the key holds when it is not an RLock-family lock hash (one holder field with a count),
-- or nil when it is one (or absent). Only called on the busy paths, so a lock costs nothing.
local function not_a_lock(key)
    local kind = redis.call('type', key)['ok']
    if kind == 'none' then return nil end
    if kind ~= 'hash' then return 'a ' .. kind end
    if redis.call('hexists', key, 'mode') == 1 then return 'a read-write lock' end
    local n = redis.call('hlen', key)
    if n ~= 1 then return 'a hash with ' .. n .. ' fields that is not a lock' end
    local pair = redis.call('hgetall', key)
    if not holder_shaped(pair[1]) or tonumber(pair[2]) == nil then
        return 'a hash that is not a lock (field "' .. pair[1] .. '")'
    end
    return nil
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
-- KEYS: queue, timeout zset; `now` in epoch ms.
local function purge_stale_heads(queue, timeouts, now)
    while true do
        local head = redis.call('lindex', queue, 0)
        if head == false then return end
        local score = redis.call('zscore', timeouts, head)
        if score ~= false and tonumber(score) > now then return end
        redis.call('lpop', queue)
        redis.call('zrem', timeouts, head)
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
