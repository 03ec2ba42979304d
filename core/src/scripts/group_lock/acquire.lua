-- Group lock acquire (Redisson's getMultiLock(group, values), RedissonFasterMultiLock;
-- docs/protocol.md, GroupLock): all the fields or none.
-- KEYS[1] the group's hash; ARGV[1] lease ms; ARGV[2] now (the client's epoch ms, as Redisson's);
-- ARGV[3] holder; ARGV[4..] the values' fields.
-- Per field: <field> -> holder, <field>:<holder>:expire_time -> epoch ms, <field>:<holder>:lock_count.
-- Returns nil when acquired (or re-entered), otherwise the ms until the last of the fields another
-- holder has expires.
local lease = ms_arg(ARGV[1], 'the lease')
local now = tonumber(ARGV[2])
local holder = ARGV[3]
local bad = not_a_group_lock(KEYS[1])
if bad then return wrong_type(bad) end
local existed = redis.call('exists', KEYS[1]) == 1
if existed then
    local latest = nil
    for i = 4, #ARGV do
        local owner = redis.call('hget', KEYS[1], ARGV[i])
        if owner and owner ~= holder then
            local expiry = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':expire_time') or '0')
            if expiry > now and (latest == nil or expiry > latest) then latest = expiry end
        end
    end
    if latest then return latest - now end
end
local until_ms = now + lease
for i = 4, #ARGV do
    local field = ARGV[i]
    local owner = redis.call('hget', KEYS[1], field)
    if owner and owner ~= holder then
        -- Expired: taken over, the former holder's leftovers go.
        redis.call('hdel', KEYS[1], field .. ':' .. owner .. ':expire_time', field .. ':' .. owner .. ':lock_count')
    end
    local expiry_field = field .. ':' .. holder .. ':expire_time'
    local count_field = field .. ':' .. holder .. ':lock_count'
    local expiry = tonumber(redis.call('hget', KEYS[1], expiry_field) or '0')
    if owner == holder and expiry < now then
        -- Our own hold ran out unrenewed: it was lost, so it starts again from one.
        redis.call('hdel', KEYS[1], count_field)
    end
    redis.call('hset', KEYS[1], field, holder)
    if until_ms > expiry then
        redis.call('hset', KEYS[1], expiry_field, string.format('%d', until_ms))
    end
    redis.call('hincrby', KEYS[1], count_field, 1)
end
local pttl = redis.call('pttl', KEYS[1])
if not existed or pttl < lease then
    redis.call('pexpire', KEYS[1], lease)
end
return nil
