-- RReadWriteLock read acquire (docs/protocol.md, ReadWriteLock): many readers, or the writer's own
-- holder re-entering as a reader (downgrade). Each read hold keeps a timeout key of its own.
-- KEYS[1] lock hash; KEYS[2] the caller's timeout-key prefix "<{name}>:<holder>:rwlock_timeout".
-- ARGV[1] lease ms; ARGV[2] holder; ARGV[3] holder .. ":write".
-- Returns nil when acquired, otherwise the lock's PTTL in ms.
ms_arg(ARGV[1], 'the lease')
local mode = redis.pcall('hget', KEYS[1], 'mode')
if type(mode) == 'table' then return wrong_type(not_a_rwlock(KEYS[1]) or 'another type of value') end
if mode == false then
    local bad = not_a_rwlock(KEYS[1])
    if bad then return wrong_type(bad) end
    redis.call('hset', KEYS[1], 'mode', 'read')
    redis.call('hset', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':1', 1, 'px', ARGV[1])
    redis.call('pexpire', KEYS[1], ARGV[1])
    return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', KEYS[1], ARGV[3]) == 1) then
    local k = redis.call('hincrby', KEYS[1], ARGV[2], 1)
    redis.call('set', KEYS[2] .. ':' .. k, 1, 'px', ARGV[1])
    if redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
        redis.call('pexpire', KEYS[1], ARGV[1])
    end
    return nil
end
return redis.call('pttl', KEYS[1])
