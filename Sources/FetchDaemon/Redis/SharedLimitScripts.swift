import FetchEngine

/// The Lua scripts of shared limits, run inside Redis with EVALSHA. Every script reads the
/// time with Redis's own `TIME` (microseconds), so the daemons' clocks never matter. A host's
/// keys share the hash tag `{scheme://name:port}`, so a Redis Cluster keeps them in one slot:
///
/// - `fetchd:{host}:tat`: the GCRA's theoretical arrival time (µs), expiring once it is past;
/// - `fetchd:{host}:leases`: a sorted set of slot leases, scored by their expiry (µs);
/// - `fetchd:{host}:pause`: when a Retry-After pause ends (µs).
///
/// Messages go on one channel, `fetchd:wake`: `free HOST` when a slot comes free while all
/// were leased, `pause HOST MICROSECONDS` when a pause begins or grows.
enum SharedLimitScripts {
    static let channel = "fetchd:wake"

    static func keys(_ host: HostKey) -> (tat: String, leases: String, pause: String) {
        let tag = "fetchd:{\(host.description)}"
        return ("\(tag):tat", "\(tag):leases", "\(tag):pause")
    }

    private static let clock = """
        if redis.replicate_commands then pcall(redis.replicate_commands) end
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

        """

    /// KEYS: tat, leases, pause. ARGV: rps (0: none), burst, maxConcurrent (0: none), lease
    /// µs, lease id, cost (units of the rate the request takes; 1 when left out). Answers
    /// {1, delay µs} (the request may start after the delay: its place is taken now),
    /// {0, "paused", µs left} or {0, "full", µs until the earliest lease expires}. The GCRA is
    /// the local scheduler's (docs/rate-limits.md), weighted: a request of cost c conforms
    /// once the bucket holds c, and takes c intervals; a start at most the slack after `tat`
    /// counts from `tat`.
    static let admit = RedisScript(name: "admit", source: clock + """
        local rps, burst, cap = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
        local lease_us = tonumber(ARGV[4])
        local p = redis.call('GET', KEYS[3])
        if p and tonumber(p) > now then return {0, 'paused', math.floor(tonumber(p) - now)} end
        if cap > 0 then
          redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
          if redis.call('ZCARD', KEYS[2]) >= cap then
            local first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
            return {0, 'full', math.floor(tonumber(first[2]) - now)}
          end
        end
        local delay = 0
        if rps > 0 then
          local interval = 1000000 / rps
          local slack = math.min(interval / 2, 2000)
          local tat = tonumber(redis.call('GET', KEYS[1]) or '-1')
          if tat < 0 then tat = now - 1000000000 end
          local cost = math.min(math.max(tonumber(ARGV[6] or '1') or 1, 0), burst)
          local start = math.max(now, tat - (burst - cost) * interval)
          delay = start - now
          local from = start
          if start <= tat + slack then from = tat end
          local new = from + cost * interval
          redis.call('SET', KEYS[1], string.format('%.0f', new), 'PX', math.ceil((new - now) / 1000) + 1000)
        end
        if cap > 0 then
          redis.call('ZADD', KEYS[2], string.format('%.0f', now + delay + lease_us), ARGV[5])
          redis.call('PEXPIRE', KEYS[2], math.ceil((delay + 2 * lease_us) / 1000))
        end
        return {1, math.floor(delay)}
        """)

    /// KEYS: leases. ARGV: maxConcurrent, lease id, channel, host. Gives a slot back and, when
    /// every slot was taken (someone may wait), says so on the channel.
    static let release = RedisScript(name: "release", source: """
        local n = redis.call('ZCARD', KEYS[1])
        local removed = redis.call('ZREM', KEYS[1], ARGV[2])
        if removed == 1 and tonumber(ARGV[1]) > 0 and n >= tonumber(ARGV[1]) then
          redis.call('PUBLISH', ARGV[3], 'free ' .. ARGV[4])
        end
        return removed
        """)

    /// KEYS: leases. ARGV: lease µs, lease ids...: the running slots' leases start again (a
    /// lease that had expired while Redis was away is taken again).
    static let renew = RedisScript(name: "renew", source: clock + """
        local lease_us = tonumber(ARGV[1])
        for i = 2, #ARGV do
          redis.call('ZADD', KEYS[1], string.format('%.0f', now + lease_us), ARGV[i])
        end
        redis.call('PEXPIRE', KEYS[1], math.ceil(2 * lease_us / 1000))
        return #ARGV - 1
        """)

    /// KEYS: pause. ARGV: µs, channel, host. Pauses the host for everyone (a pause only
    /// grows) and tells every daemon how long it has left.
    static let pause = RedisScript(name: "pause", source: clock + """
        local untilT = now + tonumber(ARGV[1])
        local old = tonumber(redis.call('GET', KEYS[1]) or '0')
        if old > untilT then untilT = old end
        redis.call('SET', KEYS[1], string.format('%.0f', untilT), 'PX', math.ceil((untilT - now) / 1000) + 1)
        redis.call('PUBLISH', ARGV[2], 'pause ' .. ARGV[3] .. ' ' .. string.format('%.0f', untilT - now))
        return math.floor(untilT - now)
        """)
}
