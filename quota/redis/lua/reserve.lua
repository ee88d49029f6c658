-- reserve.lua: quota.Store.Reserve.
--
-- ARGV after common.lua's: the ticket, low (1/0), the cost (requests,
-- tokens, input, output tokens, spend), the prompt (0: charge the cost as
-- passed), the calibration's min and max ratio and half-life µs, the
-- grant's TTL µs (within the policy's lease TTL) and place (1/0:
-- quota.Reservation.Place).
--
-- Reply: a decision (see reply in tickets.lua); or, for a cost that can
-- never fit a budget as passed, {0, axis, cost, the capacity open to the
-- priority, rounded down, 1 if the budget is the tenant's own else 0}; or,
-- for a ticket reserved under another tenant, {-1, that tenant}. A cost
-- that fits is charged at the root's learned ratio (quota.Calibrate), no
-- axis more than the capacity open to it in any budget, and the ticket
-- keeps what was charged.

local ticketID, low = args(2)
low = low == '1'
local cost = numbers(5)
local prompt, minR, maxR, half, grantTTL, place = args(6)
prompt, grantTTL, place = prompt * 1, grantTTL * 1, place == '1'
minR, maxR, half = minR * 1, maxR * 1, half * 1
local queueTTL = leaseTTL
local c1, c4 = fmt(cost[1]), lastPart(cost[4], cost[5])

for _, b in ipairs(budgets) do
  local mine = b == own and 1 or 0
  -- A call takes one concurrency slot: Low needs one below the reserve.
  local conc = b.conc
  if low and conc and conc.cap - conc.cap * b.prio < 1 then
    return done({0, tonumber(conc.id), 1, math.floor(conc.cap - conc.cap * b.prio), mine})
  end
  for k = 1, b.n do
    local a = b.axes[k]
    if a.ci then
      local c = cost[a.ci]
      local limit = a.cap
      if low then limit = a.cap - a.cap * b.prio end
      if c > limit then return done({0, tonumber(a.id), c, math.floor(limit), mine}) end
    end
  end
end

local ct, cin = cost[2], cost[3]
if prompt > 0 then
  local r = ratioAt(minR, maxR, half)
  if r ~= 1 then
    local scaled, rawT, rawIn = math.ceil(r * prompt), ct, cin
    if cin >= prompt then cin = cin + scaled - prompt end
    if ct >= prompt then
      ct = ct + scaled - prompt
      if ct < cost[4] then ct = cost[4] end
    end
    for _, b in ipairs(budgets) do
      for k = 1, b.n do
        local a = b.axes[k]
        if a.ci == 2 or a.ci == 3 then
          local limit = a.cap
          if low then limit = a.cap - a.cap * b.prio end
          limit = math.floor(limit)
          if a.ci == 2 and ct > limit then ct = math.max(limit, rawT) end
          if a.ci == 3 and cin > limit then cin = math.max(limit, rawIn) end
        end
      end
    end
    cost[2], cost[3] = ct, cin
  end
end

local t, other = ticket()
if other then return wrongTenant(other) end
-- p is the call's budget whose pause ends last (the tenant's among
-- equals), or nil when none is paused.
local p
for _, b in ipairs(budgets) do
  if b.paused and (not p or b.pu > p.pu) then p = b end
end
if t then
  local mat, ax = tonumber(t.m), t.a
  local inLine = t.s == 'q' and t.g ~= '' and t.g ~= '-'
  if inLine then
    -- A ticket in line matures when its place does, and never before
    -- the maturity it was first told.
    local w, a = lineWaits(true, tonumber(t.g), tonumber(t.q), t.cost, low)
    if now + w > mat then
      mat, ax = now + w, a
      -- Its place lapses as long after its new maturity as after its
      -- first.
      local life = place and grantTTL or queueTTL
      if mat + life > tonumber(t.x) then saveTicket(t, ticketID, mat + life) end
    end
  end
  if t.s == 'g' then
    if p then
      -- Granted before the pause and never settled: the call waits the
      -- pause out in line, holding no lease.
      for _, b in ipairs(budgets) do
        if b.conc then redis.call('ZREM', b.L, ticketID) end
      end
      t.s, t.m, t.a = 'q', fmt(p.pu), '0'
      saveTicket(t, ticketID, p.pu + queueTTL)
      return reply(2, p.pu - now, 4, 0, p.pr, nil, t)
    end
    return lease(t, ticketID, false, grantTTL, queueTTL, low)
  end
  if now < mat then
    if p and p.pu > mat then
      return reply(2, p.pu - now, 4, 0, p.pr, nil, t)
    end
    return reply(2, mat - now, 1, ax, nil, nil, t)
  end
  if p then return reply(2, p.pu - now, 4, 0, p.pr, nil, t) end
  if inLine then
    -- Served: out of the line, its tag the line's virtual time.
    local v = tonumber(root.st['fv'] or '') or 0
    if tonumber(t.g) > v then
      put(root, 'fv', t.g)
    end
    unline(member(t, ticketID))
    t.g = '-'
    saveTicket(t, ticketID, tonumber(t.x), t.x)
  end
  if place then return reply(2, 0, 0, 0, nil, nil, t) end
  return lease(t, ticketID, false, grantTTL, queueTTL, low)
end

if p then return reply(3, p.pu - now, 4, 0, p.pr) end

-- A spent window refuses until it resets: the latest reset among the
-- budgets, each naming its first spent window.
local refusal, spent, spentOwn = 0, nil, false
for _, b in ipairs(budgets) do
  if b.daily then
    for k = 1, b.n do
      local a = b.axes[k]
      if a.kind == DAILY then
        local limit = a.cap
        if low then limit = a.cap - a.cap * b.prio end
        if used(a) + cost[a.ci] > limit then
          if not spent or a.we - now > refusal then refusal, spent, spentOwn = a.we - now, a.id, b == own end
          break
        end
      end
    end
  end
end
if spent then return reply(3, refusal, spentOwn and 5 or 2, spent) end

-- The call's tag: its cost's dominant share of the root's buckets over
-- its tenant's weight, past the line's virtual time and its tenant's
-- latest tag.
local fv, fq = root.st['fv'], root.st['fq']
local busy = fq ~= nil -- the line's counter lives while it holds a ticket
local v, seq = fv and tonumber(fv) or 0, (fq and tonumber(fq) or 0) + 1
local share = 0
for k = 1, root.n do
  local a = root.axes[k]
  if a.kind == BUCKET and cost[a.ci] / a.cap > share then share = cost[a.ci] / a.cap end
end
local base = v
if busy then
  -- Its tenant's latest tag counts if it is past the line's virtual time;
  -- one behind it counts for nothing, and is dropped.
  local f = tonumber(redis.call('HGET', F, tenant) or '')
  if f and f <= v then
    redis.call('HDEL', F, tenant)
  elseif f and f > base then
    base = f
  end
end
local tag = base + share / weight
local wait, waxis = lineWaits(busy, tag, seq, cost, low)
if wait > 0 and wait > maxWait then return reply(3, wait, 1, waxis) end

for _, b in ipairs(budgets) do adjust(b, cost) end
t = {s = 'q', m = wait == 0 and nowS or fmt(now + wait), a = waxis,
  c1 = c1, c2 = fmt(ct), c3 = fmt(cin), c4 = c4, w = nowS, n = tenant, g = '-', q = '-', cost = cost, at = now}
if wait > 0 then
  -- In line, as its tenant's latest.
  t.g, t.q = fmt(tag), fmt(seq)
  put(root, 'fq', t.q)
  setFinish(tag)
  redis.call('ZADD', N, t.g, member(t, ticketID))
  count(tenant, cost, 1)
elseif busy then
  -- Served at once, past a line: its tag is the line's virtual time.
  if tag > v then put(root, 'fv', fmt(tag)) end
  setFinish(tag)
end
-- A place waits for its call grantTTL once mature; other queued
-- tickets, the policy's lease TTL.
local life = place and grantTTL or queueTTL
if wait > 0 then
  saveTicket(t, ticketID, now + wait + life)
  return reply(2, wait, 1, waxis, nil, nil, t)
end
if place then
  saveTicket(t, ticketID, now + life)
  return reply(2, 0, 0, 0, nil, nil, t)
end
return lease(t, ticketID, true, grantTTL, queueTTL, low)

