-- RLock release (docs/protocol.md, Lock; without Redisson's unlock latch, which only the releasing
-- client reads). Also the spin, fenced and non-reentrant locks' release.
-- KEYS[1] lock hash, KEYS[2] unlock channel.
-- ARGV[1] unlock message "0"; ARGV[2] lease in ms kept while still held; ARGV[3] holder;
-- ARGV[4] publish command ("publish", "spublish", or "" to publish nothing: the spin lock);
-- ARGV[5] "" on a first attempt; on a retry after an unanswered attempt, the hold count the
--         caller had before it, so a release that already happened is not applied twice;
-- ARGV[6] "1" to release one hold, "all" to release every hold of the holder.
-- Returns nil when the caller holds nothing, 0 when a re-entrant hold remains, 1 when released.
local count = redis.pcall('hget', KEYS[1], ARGV[3])
if type(count) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
if ARGV[5] ~= '' then
    local before = tonumber(ARGV[5])
    if count == false then
        -- Gone: the first attempt released the last hold (or the lock expired meanwhile).
        if before <= 1 then return 1 end
        return nil
    end
    if tonumber(count) == before - 1 then
        return 0 -- the first attempt released one hold and some remain
    end
end
if count == false then
    -- Not ours: a read-write lock, or a hash that is no lock, is a kind mix, not "not held".
    local bad = not_a_lock(KEYS[1])
    if bad then return wrong_type(bad) end
    return nil
end
if ARGV[6] ~= 'all' and tonumber(count) > 1 then
    ms_arg(ARGV[2], 'the lease')
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
if ARGV[4] ~= '' then
    redis.call(ARGV[4], KEYS[2], ARGV[1])
end
return 1
