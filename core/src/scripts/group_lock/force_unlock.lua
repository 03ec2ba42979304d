-- Group lock forceUnlock of some values: their fields are freed whoever holds them, and "0" is
-- published when one was held. The group's other values are left alone.
-- KEYS[1] the group's hash, KEYS[2] its channel; ARGV[1] publish command; ARGV[2] now (epoch ms);
-- ARGV[3..] the fields.
-- Returns 1 when some field was held, 0 when none was.
local bad = not_a_group_lock(KEYS[1])
if bad then return wrong_type(bad) end
local now = tonumber(ARGV[2])
local held = 0
for i = 3, #ARGV do
    local owner = redis.call('hget', KEYS[1], ARGV[i])
    if owner then
        local expiry_field = ARGV[i] .. ':' .. owner .. ':expire_time'
        if tonumber(redis.call('hget', KEYS[1], expiry_field) or '0') > now then held = 1 end
        redis.call('hdel', KEYS[1], ARGV[i], expiry_field, ARGV[i] .. ':' .. owner .. ':lock_count')
    end
end
if held == 1 and ARGV[1] ~= '' then redis.call(ARGV[1], KEYS[2], '0') end
return held
