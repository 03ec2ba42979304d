-- The last fencing token handed out (Redisson's getToken). KEYS[1] token counter. Returns it, or 0.
return tonumber(redis.call('get', KEYS[1]) or '0')
