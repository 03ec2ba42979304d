-- Drops every hold of one holder at once (used when a client closes or a Node worker ends).
-- KEYS[1] lock hash, KEYS[2] unlock channel; ARGV[1] message "0"; ARGV[2] holder; ARGV[3] publish command.
-- Returns 1 when the holder's holds were dropped, 0 when it held nothing.
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
    return 0
end
redis.call('del', KEYS[1])
redis.call(ARGV[3], KEYS[2], ARGV[1])
return 1
