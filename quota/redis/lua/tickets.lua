-- tickets.lua: ticket records, replies and grants.
--
-- A ticket is one string (GET and SET … PX are a call each, where a hash
-- would need two to write): "s m x a c1 c2 c3 c4 w n g q", with s q(ueued)
-- or g(ranted), m maturity µs (the one first told; once granted, the time
-- its call starts, see lease), x expiry µs, a the axis of the wait,
-- c1..c4 the charged cost (requests, tokens, input, output tokens, the
-- last with its spend: see outSpend), w the
-- time it was charged at in µs, which names the day of every daily window
-- charged (Settle and Cancel correct a window only while that day lasts),
-- n "." followed by the tenant it was reserved under (the tickets of an
-- account and its tenants share the root's namespace, and a call under
-- another tenant is told so), g its tag while it waits in line, else "-",
-- and q its place in the order of arrival in line ("-": never in line).
-- Its PX only collects garbage: x decides.

-- ticket returns the live ticket T, or nil; and, when it was reserved
-- under another tenant than the call's, that tenant ("." and its name). A
-- record of a form this script cannot read is dropped and counted.
--
-- Its fields are the record's strings, which saveTicket writes back as
-- they are, and, parsed once (parsing is most of a script's own work),
-- cost, the charge as numbers (5 parts), and at, the time it was charged
-- at (w): neither changes but where lease moves a ticket's daily charges
-- into today's windows, which keeps w and at in step.
local function ticket()
  local raw = redis.call('GET', T)
  if not raw then return nil end
  local t = {}
  t.s, t.m, t.x, t.a, t.c1, t.c2, t.c3, t.c4, t.w, t.n, t.g, t.q =
    string.match(raw, '^([qg]) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')
  local x, at = tonumber(t.x), tonumber(t.w)
  local c = {tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), outSpend(t.c4)}
  if not (t.s and tonumber(t.m) and x and at and c[1] and c[2] and c[3] and c[4] and c[5]) then
    redis.call('DEL', T)
    unreadable()
    return nil
  end
  if x <= now then
    return nil -- expired: unknown, whatever PEXPIRE has not yet collected
  end
  if t.n ~= tenant then return nil, t.n end
  t.cost, t.at = c, at
  return t
end

-- saveTicket writes t, whose fields are strings, to expire at expiry
-- (formatted as x, if given), and keeps the call's queue zsets in step: a
-- queued ticket is their member until expiry, a granted one is not. fresh
-- says t was never written: a grant then has no member to take out.
local function saveTicket(t, id, expiry, x, fresh)
  x = x or fmt(expiry)
  t.x = x
  redis.call('SET', T, t.s .. ' ' .. t.m .. ' ' .. x .. ' ' .. t.a .. ' ' .. t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' ..
    t.c4 .. ' ' .. t.w .. ' ' .. t.n .. ' ' .. t.g .. ' ' .. t.q,
    'PX', fmt(math.ceil((expiry - now) / 1000) + TICKET_GRACE))
  if fresh and t.s ~= 'q' then return end
  local m = member(t, id)
  for _, b in ipairs(budgets) do
    if t.s == 'q' then
      redis.call('ZADD', b.Q, x, m)
    else
      redis.call('ZREM', b.Q, m)
    end
  end
end

-- reply: {outcome, wait µs (for a grant, the µs until its start), reason,
-- axis, pause reason, lease expiry µs or
-- '', now µs, then the cost ticket t holds charged (5 parts, 0 without
-- t), then the grant's expiry µs or ''}, the times as num gives them;
-- outcome 1 granted, 2 queued, 3 refused; reason as quota.Reason (1
-- capacity, 2 a window of the root spent, 3 concurrency full, 4 paused),
-- or 5, a window of the tenant's own budget spent. Then each
-- budget's epoch, root first, 0 when the caller passed it (an integer costs
-- the caller less to read than an empty string), and for each daily limit
-- of each budget its window as "start used", '' before its first charge:
-- what a caller passes back.
local function reply(outcome, wait, reason, axis, preason, lease, t, expiry)
  local r = {outcome, num(wait), reason, tonumber(axis) or 0, preason or '', lease and num(lease) or '', num(now), 0, 0, 0, 0, 0,
    expiry and num(expiry) or '', root.ep ~= root.known and root.ep or 0}
  if t then
    local c = t.cost
    r[8], r[9], r[10], r[11], r[12] = num(c[1]), num(c[2]), num(c[3]), num(c[4]), num(c[5])
  end
  if own then r[15] = own.ep ~= own.known and own.ep or 0 end
  for _, b in ipairs(both) do
    if b.daily then
      for k = 1, b.n do
        local a = b.axes[k]
        if a.kind == DAILY then
          local w = b.st['w' .. a.id]
          r[#r + 1] = w and tonumber(w) == a.ws and w .. ' ' .. b.st['d' .. a.id] or ''
        end
      end
    end
  end
  return done(r)
end

-- lease grants a matured ticket for grantTTL µs, taking a concurrency slot
-- of every budget with a concurrency limit (step 4f), or queues it (for
-- the policy's queueTTL past now) while any of them has every slot open to
-- its priority taken, to try again when the last of them may have one;
-- low says the priority reserve is closed to it (quota.Low). A ticket
-- already granted is renewed: its record and leases live grantTTL from
-- now, unless they already live longer. fresh says the ticket was charged
-- by this call and has no record yet.
local function lease(t, ticketID, fresh, grantTTL, queueTTL, low)
  local exp = now + grantTTL
  if t.s == 'g' and tonumber(t.x) > exp then exp = tonumber(t.x) end
  local x = fmt(exp)
  local leased, full, wait = false, false, 0
  for _, b in ipairs(budgets) do
    local conc = b.conc
    if conc then
      leased = true
      local held = redis.call('ZSCORE', b.L, ticketID)
      if not held or tonumber(held) <= now then
        redis.call('ZREMRANGEBYSCORE', b.L, '-inf', nowS)
        local open = conc.cap
        if low then open = conc.cap - conc.cap * b.prio end
        if redis.call('ZCARD', b.L) + 1 > open then
          local first = redis.call('ZRANGE', b.L, 0, 0, 'WITHSCORES')
          local w = LEASE_RETRY
          if first[2] then w = tonumber(first[2]) - now end
          if w > LEASE_RETRY then w = LEASE_RETRY end
          if not full or w > wait then wait = w end
          full = true
        end
      end
    end
  end
  if full then
    if wait < MIN_WAIT then wait = MIN_WAIT end
    -- Waiting for a slot, the ticket lives the policy's lease TTL from its
    -- caller's latest visit (a claimed place included).
    if fresh or t.s ~= 'q' then
      t.s, t.m = 'q', nowS
      saveTicket(t, ticketID, now + queueTTL)
    elseif tonumber(t.x) < now + queueTTL then
      saveTicket(t, ticketID, now + queueTTL)
    end
    return reply(2, wait, 3, 7, nil, nil, t)
  end
  if t.s ~= 'g' then
    -- A queued ticket charged on a day before the current one moves its
    -- daily charges into today's windows, where its call runs: the day the
    -- call is granted in owes its estimate. spent is the first daily axis
    -- whose window today has no room for the call (low: within the
    -- priority reserve), which changes nothing.
    local w, c = t.at, t.cost
    local moves, spent
    for _, b in ipairs(budgets) do
      for k = 1, b.n do
        local a = b.axes[k]
        if not spent and a.kind == DAILY and w < a.ws and c[a.ci] > 0 then
          local limit = a.cap
          if low then limit = a.cap - a.cap * b.prio end
          if used(a) + c[a.ci] > limit then
            spent = a
          else
            moves = moves or {}
            moves[#moves + 1] = {b, a}
          end
        end
      end
    end
    if moves and not spent then
      for _, m in ipairs(moves) do
        local b, a = m[1], m[2]
        local u = used(a) + c[a.ci]
        put(b, 'w' .. a.id, fmt(a.ws), 'd' .. a.id, fmt(u))
      end
      -- Its queue members name the day it was charged in: they go with it.
      local old = member(t, ticketID)
      for _, b in ipairs(budgets) do redis.call('ZREM', b.Q, old) end
      t.w, t.at = nowS, now
    end
    if spent then
      -- Today has no room for it: the call is refused as a new one would
      -- be, and its ticket is given up.
      local c = t.cost
      local m = member(t, ticketID)
      for _, b in ipairs(budgets) do
        adjust(b, {-c[1], -c[2], -c[3], -c[4], -c[5]}, t.at)
        redis.call('ZREM', b.Q, m)
      end
      redis.call('DEL', T)
      return reply(3, spent.we - now, own and spent.st == own.st and 5 or 2, spent.id)
    end
  end
  -- A new grant takes its start from the gates (its m the start, from
  -- then on) and lives grantTTL from it; a grant renewed before its start
  -- keeps it.
  local wait = 0
  if t.s == 'g' and tonumber(t.m) >= now then
    wait = tonumber(t.m) - now
  else
    -- A grant come back after its start (a retry dispatched late, or an
    -- attempt that crashed) gave that start to nobody: it gives it back
    -- and takes one anew, so it cannot start together with the call after
    -- it.
    local c = t.cost
    if t.s == 'g' then gate(c, 0, -1, tonumber(t.m)) end
    wait = start(c)
    t.m = fmt(now + wait)
    if now + wait + grantTTL > exp then
      exp = now + wait + grantTTL
      x = fmt(exp)
    end
  end
  if leased then
    for _, b in ipairs(budgets) do
      if b.conc then redis.call('ZADD', b.L, x, ticketID) end
    end
  end
  t.s = 'g'
  saveTicket(t, ticketID, exp, x, fresh)
  return reply(1, wait, 0, 0, nil, leased and exp or nil, t, exp)
end

-- wrongTenant is the reply to a call under a ticket reserved under tenant
-- n, another tenant than the call's.
local function wrongTenant(n) return done({-1, string.sub(n, 2)}) end
