-- RReadWriteLock read release (docs/protocol.md, ReadWriteLock).
-- KEYS[1] lock hash, KEYS[2] channel "redisson_rwlock:{name}", KEYS[3] the caller's timeout-key
-- prefix "<{name}>:<holder>:rwlock_timeout", KEYS[4] the key prefix "<{name}>".
-- ARGV[1] message "0"; ARGV[2] holder; ARGV[3] publish command; ARGV[4] "" or the retry count (see
-- lock/release.lua); ARGV[5] "1" or "all".
-- The newest hold's timeout key goes; the hash then lives as long as the longest-lived remaining
-- read hold, and goes (with a "0" to wake a waiter) when no live holder is left.
-- Returns nil when the caller holds no read lock, 0 when it still holds one, 1 when its last read
-- hold is released.
local mode = redis.pcall('hget', KEYS[1], 'mode')
if type(mode) == 'table' then return wrong_type(not_a_rwlock(KEYS[1]) or 'another type of value') end
if mode == false then
    local bad = not_a_rwlock(KEYS[1])
    if bad then return wrong_type(bad) end
end
local count = redis.call('hget', KEYS[1], ARGV[2])
if ARGV[4] ~= '' then
    local before = tonumber(ARGV[4])
    if count == false then
        if before <= 1 then return 1 end
        return nil
    end
    if tonumber(count) == before - 1 then return 0 end
end
if count == false then
    if mode == false then redis.call(ARGV[3], KEYS[2], ARGV[1]) end
    return nil
end
count = tonumber(count)
local n = (ARGV[5] == 'all') and count or 1
local left = redis.call('hincrby', KEYS[1], ARGV[2], -n)
if left <= 0 then redis.call('hdel', KEYS[1], ARGV[2]) end
for k = left + 1, count do
    redis.call('del', KEYS[3] .. ':' .. k)
end
local mine = (left <= 0) and 1 or 0
if redis.call('hlen', KEYS[1]) > 1 then
    local longest = -3
    local fields = redis.call('hgetall', KEYS[1])
    for i = 1, #fields, 2 do
        local holds = tonumber(fields[i + 1])
        if fields[i] ~= 'mode' and holds ~= nil then
            for k = holds, 1, -1 do
                local remain = redis.call('pttl', KEYS[4] .. ':' .. fields[i] .. ':rwlock_timeout:' .. k)
                longest = math.max(remain, longest)
            end
        end
    end
    if longest > 0 then
        redis.call('pexpire', KEYS[1], longest)
        return mine
    end
    if mode == 'write' then return mine end
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return mine
