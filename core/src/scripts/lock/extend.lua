-- extend() of an RLock-family hold (Lock, FairLock, SpinLock, FencedLock, NonReentrantLock, and the
-- write lock of a read-write lock): the lease of the hash is set to ARGV[1], as the watchdog's
-- renewal would set it, if ARGV[2] still holds it.
-- KEYS[1] lock hash; ARGV[1] lease in ms; ARGV[2] holder field.
-- Returns 1 (the lease is now ARGV[1]) or 0 (the holder holds nothing there: expired, deleted or
-- taken over).
local lease = ms_arg(ARGV[1], 'the lease')
local kind = redis.call('type', KEYS[1])['ok']
if kind == 'none' then return 0 end
if kind ~= 'hash' then return wrong_type('a ' .. kind) end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then return 0 end
redis.call('pexpire', KEYS[1], lease)
return 1
