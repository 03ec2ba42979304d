-- extend() of a group lock hold: its fields' expiry becomes now + ARGV[1] (sooner or later than
-- before), the hash living at least that long, if ARGV[3] still owns every field.
-- KEYS[1] the group's hash; ARGV[1] lease ms; ARGV[2] now (epoch ms); ARGV[3] holder; ARGV[4]
-- the fields, comma-separated.
-- Returns 1 (extended) or 0 (a field is not held by the holder any more).
local lease = ms_arg(ARGV[1], 'the lease')
local bad = not_a_group_lock(KEYS[1])
if bad then return wrong_type(bad) end
local fields = {}
for field in string.gmatch(ARGV[4], '[^,]+') do
    if redis.call('hget', KEYS[1], field) ~= ARGV[3] then return 0 end
    fields[#fields + 1] = field
end
local until_ms = string.format('%d', tonumber(ARGV[2]) + lease)
for _, field in ipairs(fields) do
    redis.call('hset', KEYS[1], field .. ':' .. ARGV[3] .. ':expire_time', until_ms)
end
if redis.call('pttl', KEYS[1]) < lease then redis.call('pexpire', KEYS[1], lease) end
return 1
