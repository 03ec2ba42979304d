-- RReadWriteLock write acquire (docs/protocol.md, ReadWriteLock): one writer, re-entrant.
-- KEYS[1] lock hash; ARGV[1] lease ms; ARGV[2] holder .. ":write"; ARGV[3] holder (to refuse an
-- upgrade: a holder of the read lock asking for the write lock would wait for itself forever).
-- Returns nil when acquired, otherwise the lock's PTTL in ms; an UPGRADE_REFUSED error for an
-- upgrade.
ms_arg(ARGV[1], 'the lease')
local mode = redis.pcall('hget', KEYS[1], 'mode')
if type(mode) == 'table' then return wrong_type(not_a_rwlock(KEYS[1]) or 'another type of value') end
if mode == false then
    local bad = not_a_rwlock(KEYS[1])
    if bad then return wrong_type(bad) end
    redis.call('hset', KEYS[1], 'mode', 'write')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'write' and redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
    redis.call('hincrby', KEYS[1], ARGV[2], 1)
    -- Re-entry adds the lease to what is left, as Redisson does (capped at 2^53-1 ms).
    local ttl = math.min(math.max(redis.call('pttl', KEYS[1]), 0) + tonumber(ARGV[1]), 9007199254740991)
    redis.call('pexpire', KEYS[1], string.format('%d', ttl))
    return nil
end
if mode == 'read' and redis.call('hexists', KEYS[1], ARGV[3]) == 1 then
    return redis.error_reply('UPGRADE_REFUSED ' .. ARGV[3] .. ' holds the read lock')
end
return redis.call('pttl', KEYS[1])
