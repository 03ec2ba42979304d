-- RLock release (§2.3, without the unlock latch, which only the releasing client reads).
-- KEYS[1] lock hash, KEYS[2] unlock channel.
-- ARGV[1] unlock message "0"; ARGV[2] lease in ms kept while still held; ARGV[3] holder;
-- ARGV[4] publish command ("publish" or "spublish").
-- Returns nil when the caller holds nothing, 0 when a re-entrant hold remains, 1 when released.
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
    return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
    redis.call('pexpire', KEYS[1], ARGV[2])
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[4], KEYS[2], ARGV[1])
return 1
