package crosslock.interop;

import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.Config;

/**
 * Executes driver commands against one Redisson client. Not thread-safe: every call must come
 * from the same thread (the driver's main thread), because Redisson lock holders are
 * {@code <clientId>:<Thread.getId()>}.
 */
final class Session {

    private RedissonClient client;

    /**
     * Runs one command. Returns the result token(s) printed after {@code OK}, or null for a bare
     * {@code OK}. Any exception becomes an {@code ERR} line.
     */
    String execute(String[] a) throws Exception {
        switch (a[0]) {
            case "connect": {
                args(a, 1, 2);
                return connect(a[1], a.length > 2 ? Long.parseLong(a[2]) : -1);
            }
            case "clientid":
                args(a, 0, 0);
                return client().getId();
            case "threadid":
                args(a, 0, 0);
                return Long.toString(Thread.currentThread().getId());
            case "now":
                args(a, 0, 0);
                return null;
            case "sleep":
                args(a, 1, 1);
                Thread.sleep(Long.parseLong(a[1]));
                return null;
            case "lock":
                args(a, 1, 1);
                lock(a[1]).lock();
                return null;
            case "lockLease":
                args(a, 2, 2);
                lock(a[1]).lock(Long.parseLong(a[2]), TimeUnit.MILLISECONDS);
                return null;
            case "tryLock":
                args(a, 1, 1);
                return Boolean.toString(lock(a[1]).tryLock());
            case "tryLockWait":
                args(a, 3, 3);
                return Boolean.toString(lock(a[1]).tryLock(
                        Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "unlock":
                args(a, 1, 1);
                lock(a[1]).unlock();
                return null;
            case "forceUnlock":
                args(a, 1, 1);
                return Boolean.toString(lock(a[1]).forceUnlock());
            case "isLocked":
                args(a, 1, 1);
                return Boolean.toString(lock(a[1]).isLocked());
            case "isHeld":
                args(a, 1, 1);
                return Boolean.toString(lock(a[1]).isHeldByCurrentThread());
            case "holdCount":
                args(a, 1, 1);
                return Integer.toString(lock(a[1]).getHoldCount());
            case "ttl":
                args(a, 1, 1);
                return Long.toString(lock(a[1]).remainTimeToLive());
            case "counter":
                args(a, 3, 3);
                return Long.toString(counter(a[1], a[2], Long.parseLong(a[3])));
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    private String connect(String url, long watchdogTimeoutMs) {
        Config config = new Config();
        config.useSingleServer().setAddress(url);
        if (watchdogTimeoutMs > 0) {
            config.setLockWatchdogTimeout(watchdogTimeoutMs);
        }
        RedissonClient fresh = Redisson.create(config);
        if (client != null) {
            client.shutdown();
        }
        client = fresh;
        return client.getId();
    }

    /**
     * Mutual-exclusion stress loop: the counter is read and written back with separate GET and SET
     * commands on purpose, so that any overlap of two holders loses increments.
     */
    private long counter(String lockName, String counterKey, long iterations) {
        RLock lock = lock(lockName);
        RBucket<String> bucket = client().getBucket(counterKey, StringCodec.INSTANCE);
        for (long i = 0; i < iterations; i++) {
            lock.lock();
            try {
                String raw = bucket.get();
                long value = raw == null ? 0 : Long.parseLong(raw);
                Thread.yield();
                bucket.set(Long.toString(value + 1));
            } finally {
                lock.unlock();
            }
        }
        return iterations;
    }

    void shutdown() {
        if (client != null) {
            RedissonClient c = client;
            client = null;
            c.shutdown();
        }
    }

    private RLock lock(String name) {
        return client().getLock(name);
    }

    private RedissonClient client() {
        if (client == null) {
            throw new IllegalStateException("not connected (send: connect redis://host:port)");
        }
        return client;
    }

    private static void args(String[] a, int min, int max) {
        int n = a.length - 1;
        if (n < min || n > max) {
            String want = min == max ? Integer.toString(min) : min + ".." + max;
            throw new IllegalArgumentException(a[0] + " takes " + want + " argument(s), got " + n);
        }
    }
}
