-- Read-only snapshot of a group lock's fields for queries, settling and error messages.
-- KEYS[1] the group's hash; ARGV[1] holder (may be ""); ARGV[2] now (epoch ms); ARGV[3..] fields.
-- Returns {ms until the last of the fields' holds expires (-2: none is held), locked (0/1: some
-- field is held), the holder's hold count (the least over the fields; 0 unless it holds them
-- all), the holders of the fields...}.
local bad = not_a_group_lock(KEYS[1])
if bad then return wrong_type(bad) end
local now = tonumber(ARGV[2])
local latest, count, seen, holders = nil, nil, {}, {}
for i = 3, #ARGV do
    local owner = redis.call('hget', KEYS[1], ARGV[i])
    local expiry = owner and tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':expire_time') or '0') or 0
    local mine = 0
    if owner and expiry > now then
        if latest == nil or expiry > latest then latest = expiry end
        if not seen[owner] then
            seen[owner] = true
            holders[#holders + 1] = owner
        end
        if owner == ARGV[1] then
            mine = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':lock_count') or '0')
        end
    end
    if count == nil or mine < count then count = mine end
end
local out = { latest and (latest - now) or -2, latest and 1 or 0, count or 0 }
for _, owner in ipairs(holders) do out[#out + 1] = owner end
return out
