package crosslock.interop;

import java.util.concurrent.TimeUnit;

import org.redisson.Redisson;
import org.redisson.api.RBucket;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RPermitExpirableSemaphore;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.client.codec.StringCodec;
import org.redisson.config.ClusterServersConfig;
import org.redisson.config.Config;
import org.redisson.config.ReadMode;
import org.redisson.config.SentinelServersConfig;
import org.redisson.config.ShardedSubscriptionMode;

/**
 * Executes driver commands against one Redisson client. Not thread-safe: every call must come
 * from the same thread (the driver's main thread), because Redisson lock holders are
 * {@code <clientId>:<Thread.getId()>}.
 */
final class Session {

    private RedissonClient client;

    /** The lock type every lock command uses, set by {@code kind}: one of {@link #KINDS}. */
    private String kind = "lock";

    static final java.util.List<String> KINDS =
            java.util.List.of(
                    "lock", "fair", "spin", "fenced", "nonReentrant", "nonReentrantFair", "read", "write",
                    "group");

    /**
     * Runs one command. Returns the result token(s) printed after {@code OK}, or null for a bare
     * {@code OK}. Any exception becomes an {@code ERR} line.
     */
    String execute(String[] a) throws Exception {
        switch (a[0]) {
            case "connect": {
                args(a, 1, 3);
                return connect(a[1], a.length > 2 ? Long.parseLong(a[2]) : -1, a.length > 3 ? a[3] : "kryo5");
            }
            case "groupField":
                args(a, 0, 1);
                return groupField(a.length > 1 ? decode(a[1]) : "");
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
            case "kind":
                args(a, 1, 1);
                if (!KINDS.contains(a[1])) {
                    throw new IllegalArgumentException("unknown kind " + a[1] + " (one of " + KINDS + ")");
                }
                kind = a[1];
                return kind;
            case "token":
                args(a, 1, 1);
                return String.valueOf(fenced(a[1]).lockAndGetToken());
            case "tryToken":
                args(a, 3, 3);
                return String.valueOf(fenced(a[1]).tryLockAndGetToken(
                        Long.parseLong(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "semTrySet":
                args(a, 2, 2);
                return Boolean.toString(semaphore(a[1]).trySetPermits(Integer.parseInt(a[2])));
            case "semAcquire":
                args(a, 3, 3);
                return Boolean.toString(semaphore(a[1]).tryAcquire(
                        Integer.parseInt(a[2]), Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "semRelease":
                args(a, 2, 2);
                semaphore(a[1]).release(Integer.parseInt(a[2]));
                return null;
            case "semReleaseIfExists":
                args(a, 2, 2);
                return Boolean.toString(semaphore(a[1]).releaseIfExists(Integer.parseInt(a[2])));
            case "semAdd":
                args(a, 2, 2);
                semaphore(a[1]).addPermits(Integer.parseInt(a[2]));
                return null;
            case "semAvailable":
                args(a, 1, 1);
                return Integer.toString(semaphore(a[1]).availablePermits());
            case "pesTrySet":
                args(a, 2, 2);
                return Boolean.toString(permits(a[1]).trySetPermits(Integer.parseInt(a[2])));
            case "pesAcquire": {
                args(a, 3, 3);
                long lease = Long.parseLong(a[3]);
                String id = lease < 0
                        ? permits(a[1]).tryAcquire(Long.parseLong(a[2]), TimeUnit.MILLISECONDS)
                        : permits(a[1]).tryAcquire(Long.parseLong(a[2]), lease, TimeUnit.MILLISECONDS);
                return String.valueOf(id);
            }
            case "pesRelease":
                args(a, 2, 2);
                permits(a[1]).release(a[2]);
                return null;
            case "pesTryRelease":
                args(a, 2, 2);
                return Boolean.toString(permits(a[1]).tryRelease(a[2]));
            case "pesUpdateLease":
                args(a, 3, 3);
                return Boolean.toString(permits(a[1]).updateLeaseTime(a[2], Long.parseLong(a[3]), TimeUnit.MILLISECONDS));
            case "pesAvailable":
                args(a, 1, 1);
                return Integer.toString(permits(a[1]).availablePermits());
            case "latchTrySet":
                args(a, 2, 2);
                return Boolean.toString(latch(a[1]).trySetCount(Long.parseLong(a[2])));
            case "latchCountDown":
                args(a, 1, 1);
                latch(a[1]).countDown();
                return null;
            case "latchCount":
                args(a, 1, 1);
                return Long.toString(latch(a[1]).getCount());
            case "latchAwait":
                args(a, 2, 2);
                return Boolean.toString(latch(a[1]).await(Long.parseLong(a[2]), TimeUnit.MILLISECONDS));
            default:
                throw new IllegalArgumentException("unknown command " + a[0]);
        }
    }

    private String connect(String url, long watchdogTimeoutMs, String codec) {
        Config config = new Config();
        switch (codec) {
            case "kryo5":
                break; // Redisson's default codec, Kryo5Codec
            case "string":
                config.setCodec(StringCodec.INSTANCE);
                break;
            default:
                throw new IllegalArgumentException("unknown codec " + codec + " (kryo5 or string)");
        }
        if (url.startsWith("redis+sentinel://")) {
            // redis+sentinel://host:port[,host:port…]/<master name>[/db]: Redisson in sentinel
            // mode, reading from the master too (its default reads from replicas).
            String rest = url.substring("redis+sentinel://".length());
            String[] parts = rest.split("/");
            SentinelServersConfig sentinel = config.useSentinelServers()
                    .setMasterName(parts[1])
                    .setReadMode(ReadMode.MASTER)
                    .setCheckSentinelsList(false);
            if (parts.length > 2) {
                sentinel.setDatabase(Integer.parseInt(parts[2]));
            }
            for (String host : parts[0].split(",")) {
                sentinel.addSentinelAddress("redis://" + host);
            }
        } else if (url.startsWith("redis+cluster://")) {
            // redis+cluster://host:port[,host:port…][?sharded_pubsub=auto|on|off]: Redisson in
            // cluster mode, reading from the masters, its sharded subscription mode AUTO unless
            // the URL says otherwise.
            String rest = url.substring("redis+cluster://".length());
            String query = "";
            int q = rest.indexOf('?');
            if (q >= 0) {
                query = rest.substring(q + 1);
                rest = rest.substring(0, q);
            }
            ClusterServersConfig cluster = config.useClusterServers().setReadMode(ReadMode.MASTER);
            for (String host : rest.replaceAll("/+$", "").split(",")) {
                cluster.addNodeAddress("redis://" + host);
            }
            for (String pair : query.split("&")) {
                if (pair.startsWith("sharded_pubsub=")) {
                    cluster.setShardedSubscriptionMode(ShardedSubscriptionMode.valueOf(
                            pair.substring("sharded_pubsub=".length()).toUpperCase()));
                }
            }
        } else {
            config.useSingleServer().setAddress(url);
        }
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

    /** The lock of the current {@link #kind} named {@code name}. */
    private RLock lock(String name) {
        switch (kind) {
            case "fair":
                return client().getFairLock(name);
            case "spin":
                return client().getSpinLock(name);
            case "fenced":
                return client().getFencedLock(name);
            case "nonReentrant":
                return client().getNonReentrantLock(name);
            case "nonReentrantFair":
                return client().getNonReentrantFairLock(name);
            case "read":
                return client().getReadWriteLock(name).readLock();
            case "write":
                return client().getReadWriteLock(name).writeLock();
            case "group": {
                // <group>/<value>,<value>…, each value URL-encoded (UTF-8): getMultiLock(group, values)
                int slash = name.lastIndexOf('/');
                if (slash < 0) {
                    throw new IllegalArgumentException("a group lock is named <group>/<value>,<value>..., got " + name);
                }
                java.util.List<Object> values = new java.util.ArrayList<>();
                for (String v : name.substring(slash + 1).split(",", -1)) {
                    values.add(decode(v));
                }
                return client().getMultiLock(name.substring(0, slash), values);
            }
            default:
                return client().getLock(name);
        }
    }

    /** The hash field Redisson names {@code value} by in a group lock, with the client's codec. */
    private String groupField(String value) throws java.io.IOException {
        io.netty.buffer.ByteBuf encoded = client().getConfig().getCodec().getValueEncoder().encode(value);
        try {
            return org.redisson.misc.Hash.hash128toBase64(encoded);
        } finally {
            encoded.release();
        }
    }

    /** A URL-encoded (UTF-8) word: {@code %20} for a space, {@code %2C} for a comma, "" as is. */
    private static String decode(String word) {
        return java.net.URLDecoder.decode(word, java.nio.charset.StandardCharsets.UTF_8);
    }

    private RFencedLock fenced(String name) {
        return client().getFencedLock(name);
    }

    private RSemaphore semaphore(String name) {
        return client().getSemaphore(name);
    }

    private RPermitExpirableSemaphore permits(String name) {
        return client().getPermitExpirableSemaphore(name);
    }

    private RCountDownLatch latch(String name) {
        return client().getCountDownLatch(name);
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
