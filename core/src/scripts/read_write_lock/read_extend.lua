-- extend() of a read hold of a read-write lock (docs/protocol.md, ReadWriteLock): what the watchdog's
-- read renewal touches, set to the new lease.
-- KEYS[1] read-write lock hash; ARGV[1] lease in ms; ARGV[2] the reader's holder; ARGV[3] its
-- timeout-key prefix ("{name}", or the name itself when it contains "{").
-- If the holder has n read holds: its timeout keys <prefix>:<holder>:rwlock_timeout:1..n are set
-- to the lease, and the hash lives as long as the longest of them and of the other holders' timeout
-- keys (a writer of the same owner keeps at least the hash's current lease). Returns 1, or 0 when
-- the holder holds no read lock there.
local lease = ms_arg(ARGV[1], 'the lease')
local bad = not_a_rwlock(KEYS[1])
if bad then return wrong_type(bad) end
local n = tonumber(redis.call('hget', KEYS[1], ARGV[2]) or '0')
if n == nil or n < 1 then return 0 end
local holder, prefix = ARGV[2], ARGV[3]
for k = 1, n do
    redis.call('set', prefix .. ':' .. holder .. ':rwlock_timeout:' .. k, 1, 'px', lease)
end
local longest = lease
local mode = redis.call('hget', KEYS[1], 'mode')
if mode == 'write' then
    longest = math.max(longest, redis.call('pttl', KEYS[1]))
end
local fields = redis.call('hgetall', KEYS[1])
for i = 1, #fields, 2 do
    local field, count = fields[i], tonumber(fields[i + 1])
    if field ~= 'mode' and field ~= holder and count then
        for k = 1, count do
            longest = math.max(longest, redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k))
        end
    end
end
redis.call('pexpire', KEYS[1], longest)
return 1
