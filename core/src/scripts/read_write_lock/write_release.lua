-- RReadWriteLock write release (docs/protocol.md, ReadWriteLock). A "1" wakes every waiter.
-- KEYS[1] lock hash, KEYS[2] channel "redisson_rwlock:{name}".
-- ARGV[1] message "1"; ARGV[2] lease ms kept while still held; ARGV[3] holder .. ":write";
-- ARGV[4] publish command; ARGV[5] "" or the retry count (see lock/release.lua); ARGV[6] "1" or "all".
-- When the writer also holds read locks (a downgrade) the hash stays, in read mode: readers may
-- come in now, so the waiters are woken then too.
-- Returns nil when the caller does not hold the write lock, 0 when it still does, 1 when released.

-- "1", then "0": Redisson answers a "1" by waking only the Java threads blocked at that moment,
-- so one between its attempt and its wait would sleep through this release for the PTTL it was
-- given (up to the 30 s watchdog lease); a "0" leaves it a permit. Both are hints to every reader.
local function wake_all()
    redis.call(ARGV[4], KEYS[2], ARGV[1])
    redis.call(ARGV[4], KEYS[2], '0')
end

local mode = redis.pcall('hget', KEYS[1], 'mode')
if type(mode) == 'table' then return wrong_type(not_a_rwlock(KEYS[1]) or 'another type of value') end
if mode == false then
    local bad = not_a_rwlock(KEYS[1])
    if bad then return wrong_type(bad) end
end
local count = redis.call('hget', KEYS[1], ARGV[3])
if ARGV[5] ~= '' then
    local before = tonumber(ARGV[5])
    if count == false then
        if before <= 1 then return 1 end
        return nil
    end
    if tonumber(count) == before - 1 then return 0 end
end
if mode == false then
    wake_all()
    return nil
end
if mode ~= 'write' or count == false then
    return nil
end
if ARGV[6] ~= 'all' and tonumber(count) > 1 then
    ms_arg(ARGV[2], 'the lease')
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('hdel', KEYS[1], ARGV[3])
if redis.call('hlen', KEYS[1]) == 1 then
    redis.call('del', KEYS[1])
else
    redis.call('hset', KEYS[1], 'mode', 'read')
end
wake_all()
return 1
