-- After an unanswered fenced acquire: the caller's hold count and the current token (while the
-- caller holds the lock nobody else can have taken a token since its own acquisition).
-- KEYS[1] lock hash, KEYS[2] token counter; ARGV[1] holder. Returns {count, token}.
local bad = not_a_lock(KEYS[1])
if bad then return wrong_type(bad) end
return { tonumber(redis.call('hget', KEYS[1], ARGV[1]) or '0'), tonumber(redis.call('get', KEYS[2]) or '0') }
