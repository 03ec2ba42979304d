-- Group lock release (docs/protocol.md, GroupLock; without Redisson's unlock latch, which only
-- the releasing client reads): one hold of every field, or all of them, or nothing at all.
-- KEYS[1] the group's hash, KEYS[2] its channel "redisson_lock__channel:{group}".
-- ARGV[1] holder; ARGV[2] lease ms kept while still held; ARGV[3] publish command; ARGV[4] now
-- (epoch ms); ARGV[5] "1" to release one hold, "all" for every hold; ARGV[6] "" on a first
-- attempt, on a retry the hold count the caller had before it; ARGV[7..] the fields.
-- Returns nil when the holder does not hold every field (nothing changes), 0 when re-entrant holds
-- remain, 1 when released (then "0" is published, waking a waiter on any side).
local bad = not_a_group_lock(KEYS[1])
if bad then return wrong_type(bad) end
local holder = ARGV[1]
local now = tonumber(ARGV[4])
local counts = {}
for i = 7, #ARGV do
    local owner = redis.call('hget', KEYS[1], ARGV[i])
    local count = owner == holder and tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':lock_count') or '0') or 0
    counts[i] = count
end
if ARGV[6] ~= '' then
    local before = tonumber(ARGV[6])
    local first = counts[7]
    if first == 0 then
        if before <= 1 then return 1 end
        return nil
    end
    if first == before - 1 then return 0 end
end
for i = 7, #ARGV do
    local expiry = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. holder .. ':expire_time') or '0')
    if counts[i] < 1 or expiry < now then return nil end
end
local freed = 0
for i = 7, #ARGV do
    local count_field = ARGV[i] .. ':' .. holder .. ':lock_count'
    local left = 0
    if ARGV[5] ~= 'all' then left = redis.call('hincrby', KEYS[1], count_field, -1) end
    if left <= 0 then
        redis.call('hdel', KEYS[1], ARGV[i], count_field, ARGV[i] .. ':' .. holder .. ':expire_time')
        freed = freed + 1
    end
end
if freed > 0 and ARGV[3] ~= '' then redis.call(ARGV[3], KEYS[2], '0') end
if freed == #ARGV - 6 then return 1 end
local lease = ms_arg(ARGV[2], 'the lease')
local until_ms = now + lease
for i = 7, #ARGV do
    local expiry_field = ARGV[i] .. ':' .. holder .. ':expire_time'
    if tonumber(redis.call('hget', KEYS[1], expiry_field) or '0') < until_ms then
        redis.call('hset', KEYS[1], expiry_field, string.format('%d', until_ms))
    end
end
if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
return 0
