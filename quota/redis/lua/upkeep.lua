-- upkeep.lua: what every operation that writes does before its own work:
-- it recovers each budget whose state the caller finds lost, names the
-- epoch of each whose state begins with this call (see recover.lua), and
-- refunds the queued tickets that lapsed.
--
-- It is the chunk's own code, not functions, so that what it needs only
-- for a state lost or new (begin, recover) is made only then: Redis makes
-- every function a script defines anew on every call, at a cost that
-- grows with the functions made before it.

if root.ep ~= root.known or (own and own.ep ~= own.known) then
  -- begin names a new epoch of budget b: one generation past the caller's,
  -- the caller's name for it and now, so that it differs from every epoch
  -- anyone saw.
  local function begin(b)
    return (tonumber((string.match(b.known, '^(%d+)%.'))) or 0) + 1 .. '.' .. epochName .. '@' .. nowS -- (…) is one value: gopher-lua's match returns none on a miss
  end

  -- recover restarts budget b's state after a loss, from what the caller
  -- saw: every bucket empty (or lower) and dated now, so it refills at its
  -- rate and hands out no burst it never had; every daily window as used as
  -- the callers that saw the lost epoch last saw it (counted); every concurrency slot no live lease
  -- holds taken by a placeholder until the policy's lease TTL from now, for
  -- the calls granted before the loss, which take them over as they renew or
  -- settle (regrant). Queued tickets are gone with their records: their
  -- callers are charged again when they come back; a root whose hash was
  -- gone starts its line afresh. With lost false (a caller that saw an older
  -- epoch recovered the state already), only the daily windows count what
  -- this caller saw.
  local function recover(b, lost)
    local st = b.st
    local j = 0
    for k = 1, b.n do
      local a = b.axes[k]
      local id = a.id
      if a.kind == DAILY then
        j = j + 1
        local u, r = counted(b, a, j, lost)
        if u then
          put(b, 'w' .. id, fmt(a.ws), 'd' .. id, fmt(u))
        end
        if r then put(b, 'r' .. id, fmt(a.ws) .. ' ' .. fmt(r)) end
      elseif lost and a.kind == BUCKET then
        local l = st[a.lk] and level(a) or 0
        if l > 0 then l = 0 end
        putLevel(b, a, l)
      elseif lost then
        local rv = fmt(now + b.leaseTTL)
        local free = math.floor(a.cap) - redis.call('ZCOUNT', b.L, '(' .. nowS, '+inf')
        for q = 1, free do redis.call('ZADD', b.L, rv, PLACEHOLDER .. rv .. ' ' .. q) end
        put(b, 'lp', fmt(free > 0 and free or 0), 'rv', rv)
      end
    end
    if lost then
      if b == root and not b.ep then redis.call('DEL', N, F, W) end
      if not b.ep then b.ep = begin(b) end
      -- pe names the epoch lost: a grant made in it proves so (regrant).
      if st['ef'] then drop(b, 'ef') end
      put(b, 'ep', b.ep, 'pe', b.known)
      put(b, 'v', FORMAT)
    end
  end

  for _, b in ipairs(both) do
    if b.ep ~= b.known then
      if b.known ~= '' then
        recover(b, not b.ep or b.st['ef'] ~= nil)
      elseif not b.ep then
        b.ep = begin(b)
        put(b, 'ep', b.ep, 'ef', '1')
        put(b, 'v', FORMAT)
      end
    end
  end
end

-- Each budget of the call is refunded up to SWEEP of its queued tickets
-- that lapsed before now, never granted: daily windows only while the day
-- they were charged in lasts.
for _, b in ipairs(budgets) do
  local due = redis.call('ZRANGEBYSCORE', b.Q, '-inf', nowS, 'LIMIT', 0, SWEEP)
  for _, m in ipairs(due) do
    local p = parseMember(m)
    if p then
      adjust(b, {-p.c[1], -p.c[2], -p.c[3], -p.c[4], -p.c[5]}, p.w)
    else
      unreadable()
    end
    redis.call('ZREM', b.Q, m)
    unline(m)
  end
end
