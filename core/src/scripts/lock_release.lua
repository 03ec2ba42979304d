-- RLock release (§2.3, without the unlock latch, which only the releasing client reads).
-- KEYS[1] lock hash, KEYS[2] unlock channel.
-- ARGV[1] unlock message "0"; ARGV[2] lease in ms kept while still held; ARGV[3] holder;
-- ARGV[4] publish command ("publish" or "spublish");
-- ARGV[5] "" on a first attempt; on a retry after an unanswered attempt, the hold count the
--         caller had before it, so a release that already happened is not applied twice.
-- Returns nil when the caller holds nothing, 0 when a re-entrant hold remains, 1 when released.
local count = redis.call('hget', KEYS[1], ARGV[3])
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
    return nil
end
if tonumber(count) > 1 then
    redis.call('hincrby', KEYS[1], ARGV[3], -1)
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
