package redis

import goredis "github.com/redis/go-redis/v9"

// script is the one Lua script behind every Store method: each call is one
// EVALSHA, atomic for the key, so replicas never race between reading a level
// and charging it.
//
// KEYS: [1] the key's state hash, [2] its lease zset, [3] the ticket's record
// (Reserve, Settle, Cancel, Renew; otherwise any key of the same slot), [4]
// its queue zset: the tickets queued and not yet granted, scored by expiry,
// each member "c1 c2 c3 c4 w id" (the ticket's charge, the time it was
// charged at and its id), so that one that lapses unclaimed is refunded
// without reading its record.
//
// ARGV, built by args.go:
//
//	1  op: reserve | settle | cancel | renew | pause | observe | snapshot
//	2  now in unix µs, or "" to read Redis TIME
//	3  max wait µs   4 lease TTL µs   5 priority reserve (fraction)
//	6  1 if the policy adopts observed limits, else 0
//	7  n, the number of limits, then n × (axis, kind, effective capacity,
//	   period µs), in quota.Axes() order
//	…  for each daily limit, 6 midnights (unix µs) around the caller's clock
//	…  the epoch of the key's state the caller last saw ('' for none), a
//	   name for a new one, then for each daily limit the window the caller
//	   last saw, "start used" as the reserve reply gave it, or ''
//	…  the op's own arguments (see each op below)
//
// State hash fields, per axis id a: l<a>/t<a> bucket level and the time it
// was computed at, w<a>/d<a> daily window start and units used in it,
// c<a> adopted effective capacity and o<a> the configured effective capacity
// it was adopted under; pu/pr pause end and reason; er/et the learned
// estimate ratio and the time it was learned at, e1/e2 its last two samples
// (quota.Ratio); ep the state's epoch, ef set while nobody can tell whether
// it replaced a lost one, rv when the placeholder leases of the last
// recovery lapse and lp how many are left (see recover). An adopted capacity
// counts only for a policy that adopts and is configured as o<a> says, so a
// changed configuration wins over what an earlier one adopted. The state
// hash and lease zset have no TTL: there is one of each per key with a
// policy.
//
// A ticket is one string (GET and SET … PX are a call each, where a hash
// would need two to write): "s m x a c1 c2 c3 c4 w", with s q(ueued) or
// g(ranted), m maturity µs, x expiry µs, a the axis of the wait, c1..c4
// the charged cost (requests, tokens, input, output tokens) and w the time
// it was charged at in µs, which names the day of every daily window
// charged: Settle and Cancel correct a window only while that day lasts.
// A ticket written before w existed lacks it and is corrected in any day.
// Its PX only collects garbage: x decides. A queued ticket is also a member
// of the queue zset until it is granted, cancelled or lapses; every call
// first refunds up to SWEEP queued tickets that lapsed (a call that never
// ran costs nothing).
//
// Lua numbers are doubles and Redis truncates them to integers on return, so
// every fractional value travels as a string formatted with %.17g (integers
// below 2^53 take %d, the same digits for less work), and the reserve reply
// returns only integers below 2^53 as numbers. Parsing (strtod) and
// formatting are most of the script's own cost, so it does each once.
var script = goredis.NewScript(`
local S, L, T, Q = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op = ARGV[1]
local BUCKET, DAILY, LEASES = '1', '2', '3'
local LEASE_RETRY = 1000000 -- quota.DefaultLeaseRetry
local MIN_WAIT = 1000
local EPSILON = 1e-9 -- units: float noise, not a deficit
local TICKET_GRACE = 3600 * 1000 -- ms past a ticket's own expiry
local SWEEP = 4 -- lapsed queued tickets refunded per call (memory's sweepBudget)
local EXACT = 9007199254740992 -- 2^53: doubles below it are exact integers

-- fmt writes x as %.17g does; integers, the common case, take the cheaper
-- %d (the same digits below 2^53; -0 keeps %.17g's sign).
local function fmt(x)
  if x % 1 == 0 and x < EXACT and x > -EXACT and (x ~= 0 or 1 / x > 0) then
    return string.format('%d', x)
  end
  return string.format('%.17g', x)
end

-- num returns x as is when Redis can return it exactly as an integer (one
-- below 2^53), and formatted otherwise.
local function num(x)
  if x % 1 == 0 and x < EXACT and x > -EXACT then return x end
  return fmt(x)
end

local now
if ARGV[2] == '' then
  local tm = redis.call('TIME')
  now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
else
  now = tonumber(ARGV[2])
end
local nowS = fmt(now)

local st = {}
do
  local raw = redis.call('HGETALL', S)
  for j = 1, #raw, 2 do st[raw[j]] = raw[j + 1] end
end

-- costOn maps an axis id to the index of the cost part it charges.
local costOn = {['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 1, ['6'] = 2}

-- Each axis: id and kind as passed, cap (the adopted one if it counts, see
-- the header), conf the configured capacity as passed, period µs (buckets
-- only), ci its cost part (none for concurrency).
local adopts = ARGV[6] == '1'
local n = tonumber(ARGV[7])
local axes = {}
local conc, daily
local nd = 0 -- daily limits
local lastP, period -- axes usually share a period: parse each one once
local i = 8
for k = 1, n do
  local id, kind, conf = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  if kind == BUCKET and ARGV[i + 3] ~= lastP then
    lastP = ARGV[i + 3]
    period = tonumber(lastP)
  end
  local cap = conf
  if adopts and st['o' .. id] == conf and st['c' .. id] then cap = st['c' .. id] end
  -- Every field is named here so the table is sized once (lv: see adjust).
  local a = {id = id, kind = kind, cap = tonumber(cap), conf = conf, ci = costOn[id],
    period = kind == BUCKET and period or nil, lv = nil}
  if kind == LEASES then
    conc = a
  elseif kind == DAILY then
    daily = true
  end
  axes[k] = a
  i = i + 4
end
if daily then
  for k = 1, n do
    local a = axes[k]
    if a.kind == DAILY then
      local from = tonumber(ARGV[i])
      for j = 1, 5 do
        local to = tonumber(ARGV[i + j])
        if from <= now and now < to then a.ws, a.we = from, to end
        from = to
      end
      if not a.ws then
        return redis.error_reply('ERR tollgate: clock ' .. now .. ' is outside the daily windows passed for axis ' .. a.id .. '; the caller clock and Redis TIME disagree by days')
      end
      i = i + 6
      nd = nd + 1
    end
  end
end

-- The axes' level times are usually one write's now: parse each one once.
local lastT, lastTN
local function level(a)
  local l = st['l' .. a.id]
  if not l then return a.cap end
  l = tonumber(l)
  local ts = st['t' .. a.id]
  if ts ~= lastT then lastT, lastTN = ts, tonumber(ts) end
  local dt = now - lastTN
  if dt > 0 then l = l + dt * a.cap / a.period end
  if l > a.cap then l = a.cap end
  return l
end

local function used(a)
  if tonumber(st['w' .. a.id]) == a.ws then return tonumber(st['d' .. a.id]) end
  return 0
end

local pausedUntil = st['pu']
pausedUntil = pausedUntil and tonumber(pausedUntil) or 0
local paused = pausedUntil > now

-- ratioAt returns the key's learned estimate ratio at now, within
-- [minR, maxR], back toward 1 by half every half µs since it was learned:
-- quota.Ratio.ValueAt.
local function ratioAt(minR, maxR, half)
  local v = tonumber(st['er'] or '')
  if not v then return 1 end
  local age = now - tonumber(st['et'])
  if age > 0 then v = 1 + (v - 1) * 2 ^ (-age / half) end
  if v < minR then v = minR end
  if v > maxR then v = maxR end
  return v
end

-- learn folds one sample (the provider's count over the prompt's estimate)
-- into the ratio: quota.Ratio.Learn. With the last two, the ratio rises at
-- once to their median, or falls RATIO_FALL of the way to their highest.
local RATIO_FALL = 0.5 -- quota's ratioFall
local function learn(sample, minR, maxR, half)
  local cur = ratioAt(minR, maxR, half)
  local s = sample
  if s < minR then s = minR end
  if s > maxR then s = maxR end
  local p1 = tonumber(st['e1'] or '') or cur
  local p2 = tonumber(st['e2'] or '') or cur
  local lo, hi = s, p1
  if lo > hi then lo, hi = hi, lo end
  local top = hi
  if p2 > top then top = p2 end
  if hi > p2 then hi = p2 end
  local m = lo > hi and lo or hi
  local v = cur
  if m > cur then
    v = m
  elseif top < cur then
    v = cur + RATIO_FALL * (top - cur)
  end
  if v < minR then v = minR end
  if v > maxR then v = maxR end
  local at = nowS
  if st['et'] and tonumber(st['et']) > now then at = st['et'] end
  redis.call('HSET', S, 'er', fmt(v), 'et', at, 'e1', fmt(s), 'e2', st['e1'] or '')
end

-- stamp is the time to date a bucket's new level at: now, unless the clock
-- has stepped back past the level's own time. A level is never dated back,
-- or the span the clock repeats would earn a second refill.
local function stamp(a)
  local ts = st['t' .. a.id]
  if ts and tonumber(ts) > now then return ts end
  return nowS
end

-- adjust charges delta[1..4] (negative: refunds) against every axis and
-- keeps st current for what follows; a bucket's level is a.lv when the
-- caller has just read it. Given at, the time a ticket was charged at, a
-- daily window is left alone unless at falls in its current day: a new day
-- owes nothing for an estimate made the day before.
-- Refunds never lift a bucket above its capacity nor a window below zero.
local function adjust(delta, at)
  local hs, h = {}, 0
  for k = 1, n do
    local a = axes[k]
    local c = a.ci and delta[a.ci]
    if c and at and a.kind == DAILY and (at < a.ws or at >= a.we) then c = nil end
    if a.kind == BUCKET and c then
      local l = (a.lv or level(a)) - c
      if c < 0 and l > a.cap then l = a.cap end
      local lk, tk = 'l' .. a.id, 't' .. a.id
      st[lk], st[tk] = fmt(l), stamp(a)
      hs[h + 1], hs[h + 2], hs[h + 3], hs[h + 4] = lk, st[lk], tk, st[tk]
      h = h + 4
    elseif a.kind == DAILY and c then
      local u = used(a) + c
      if u < 0 then u = 0 end
      local wk, dk = 'w' .. a.id, 'd' .. a.id
      st[wk], st[dk] = fmt(a.ws), fmt(u)
      hs[h + 1], hs[h + 2], hs[h + 3], hs[h + 4] = wk, st[wk], dk, st[dk]
      h = h + 4
    end
  end
  if h > 0 then redis.call('HSET', S, unpack(hs)) end
end

-- observe applies what a provider reported, from ARGV[j]: m, then m ×
-- (axis id, adopted effective capacity or -1, remaining or -1). Levels are
-- only lowered; an adopted capacity replaces the policy's, recorded with the
-- configured capacity it was adopted under.
local function observe(j)
  local m = tonumber(ARGV[j])
  local hs = {}
  for k = 0, m - 1 do
    local id, adopt, rem = ARGV[j + 1 + 3 * k], tonumber(ARGV[j + 2 + 3 * k]), tonumber(ARGV[j + 3 + 3 * k])
    for q = 1, n do
      local a = axes[q]
      if a.id == id then
        if a.kind == BUCKET then
          local l = level(a)
          if adopt > 0 then
            a.cap = adopt
            hs[#hs + 1] = 'c' .. id; hs[#hs + 1] = fmt(adopt)
            hs[#hs + 1] = 'o' .. id; hs[#hs + 1] = a.conf
            if l > adopt then l = adopt end
          end
          if rem >= 0 and rem < l then l = rem end
          st['l' .. id], st['t' .. id] = fmt(l), stamp(a)
          hs[#hs + 1] = 'l' .. id; hs[#hs + 1] = st['l' .. id]
          hs[#hs + 1] = 't' .. id; hs[#hs + 1] = st['t' .. id]
        elseif a.kind == DAILY then
          if adopt > 0 then
            a.cap = adopt
            hs[#hs + 1] = 'c' .. id; hs[#hs + 1] = fmt(adopt)
            hs[#hs + 1] = 'o' .. id; hs[#hs + 1] = a.conf
          end
          local u = used(a)
          if rem >= 0 and a.cap - rem > u then u = a.cap - rem end
          st['w' .. id], st['d' .. id] = fmt(a.ws), fmt(u)
          hs[#hs + 1] = 'w' .. id; hs[#hs + 1] = st['w' .. id]
          hs[#hs + 1] = 'd' .. id; hs[#hs + 1] = st['d' .. id]
        end
      end
    end
  end
  if #hs > 0 then redis.call('HSET', S, unpack(hs)) end
end

-- member is t's entry in the queue zset.
local function member(t, id)
  return t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. ' ' .. t.w .. ' ' .. id
end

-- sweep refunds up to SWEEP queued tickets that lapsed before now, never
-- granted: daily windows only while the day they were charged in lasts.
local function sweep()
  local due = redis.call('ZRANGEBYSCORE', Q, '-inf', nowS, 'LIMIT', 0, SWEEP)
  for _, m in ipairs(due) do
    local c1, c2, c3, c4, w = string.match(m, '^(%S+) (%S+) (%S+) (%S+) (%S*) ')
    if c1 then
      adjust({-tonumber(c1), -tonumber(c2), -tonumber(c3), -tonumber(c4)}, tonumber(w))
    end
    redis.call('ZREM', Q, m)
  end
end

-- The epoch names one life of the key's state: a new one begins when the
-- state hash is created. A caller that saw another epoch and finds the
-- hash gone, or recreated by a caller that could not tell it was lost
-- (ef), knows the state was lost (a restart without persistence, a
-- failover, an eviction) and recovers it. A caller that saw none cannot
-- tell a lost key from a new one.
local known, seenAt = ARGV[i], i + 2
local ep = st['ep']
local PLACEHOLDER = '\0lost ' -- a placeholder lease's name, before rv and its number

-- begin names a new epoch: one generation past the caller's, the caller's
-- name for it and now, so that it differs from every epoch anyone saw.
local function begin()
  return (tonumber(string.match(known, '^(%d+)%.')) or 0) + 1 .. '.' .. ARGV[i + 1] .. '@' .. nowS
end

-- seen returns the use of the j-th daily limit a's current window that the
-- caller last saw, 0 if it saw another window or none.
local function seen(a, j)
  local ws, u = string.match(ARGV[seenAt + j - 1], '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then return tonumber(u) end
  return 0
end

-- recover restarts the key's state after a loss, from what the caller saw:
-- every bucket empty (or lower) and dated now, so it refills at its rate
-- and hands out no burst it never had; every daily window at least as used
-- as the caller last saw it; every concurrency slot no live lease holds
-- taken by a placeholder until the policy's lease TTL from now, for the
-- calls granted before the loss, which take them over as they renew or
-- settle (regrant). Queued tickets are gone with their records: their
-- callers are charged again when they come back. With lost false (a
-- caller that saw an older epoch recovered the state already), only the
-- daily windows are raised to what this caller saw.
local function recover(lost)
  local hs, j = {}, 0
  for k = 1, n do
    local a = axes[k]
    local id = a.id
    if a.kind == DAILY then
      j = j + 1
      local u = seen(a, j)
      if u > used(a) then
        st['w' .. id], st['d' .. id] = fmt(a.ws), fmt(u)
        hs[#hs + 1] = 'w' .. id; hs[#hs + 1] = st['w' .. id]
        hs[#hs + 1] = 'd' .. id; hs[#hs + 1] = st['d' .. id]
      end
    elseif lost and a.kind == BUCKET then
      local l = st['l' .. id] and level(a) or 0
      if l > 0 then l = 0 end
      st['l' .. id], st['t' .. id] = fmt(l), stamp(a)
      hs[#hs + 1] = 'l' .. id; hs[#hs + 1] = st['l' .. id]
      hs[#hs + 1] = 't' .. id; hs[#hs + 1] = st['t' .. id]
    elseif lost then
      local rv = fmt(now + tonumber(ARGV[4]))
      local free = math.floor(a.cap) - redis.call('ZCOUNT', L, '(' .. nowS, '+inf')
      for q = 1, free do redis.call('ZADD', L, rv, PLACEHOLDER .. rv .. ' ' .. q) end
      st['lp'], st['rv'] = fmt(free > 0 and free or 0), rv
      hs[#hs + 1] = 'lp'; hs[#hs + 1] = st['lp']
      hs[#hs + 1] = 'rv'; hs[#hs + 1] = rv
    end
  end
  if lost then
    if not ep then ep = begin() end
    st['ep'], st['ef'] = ep, nil
    hs[#hs + 1] = 'ep'; hs[#hs + 1] = ep
    redis.call('HDEL', S, 'ef')
  end
  if #hs > 0 then redis.call('HSET', S, unpack(hs)) end
end

if ep ~= known then
  if known ~= '' then
    recover(not ep or st['ef'] ~= nil)
  elseif not ep then
    ep = begin()
    st['ep'], st['ef'] = ep, '1'
    redis.call('HSET', S, 'ep', ep, 'ef', '1')
  end
end
i = i + 2 + nd

-- regrant keeps, for ticket id whose record is gone, the grant it held: its
-- own lease if it still has one (the record alone was evicted), else a
-- placeholder recover left, until x (formatted µs), or releases it when x
-- is nil. It reports whether the ticket held a grant so: never on a key
-- without a concurrency limit, where no lease says which calls ran.
local function regrant(id, x)
  if not conc then return false end
  local held = redis.call('ZSCORE', L, id)
  if not (held and tonumber(held) > now) then
    local rv, lp = st['rv'], tonumber(st['lp'] or '0')
    if lp < 1 or tonumber(rv) <= now or redis.call('ZREM', L, PLACEHOLDER .. rv .. ' ' .. lp) == 0 then
      return false
    end
    st['lp'] = fmt(lp - 1)
    redis.call('HSET', S, 'lp', st['lp'])
  end
  if x then redis.call('ZADD', L, x, id) else redis.call('ZREM', L, id) end
  return true
end

sweep()

local function ticket()
  local raw = redis.call('GET', T)
  if not raw then return nil end
  local t = {}
  t.s, t.m, t.x, t.a, t.c1, t.c2, t.c3, t.c4, t.w =
    string.match(raw, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*)$')
  if not t.x or tonumber(t.x) <= now then
    return nil -- expired: unknown, whatever PEXPIRE has not yet collected
  end
  return t
end

-- saveTicket writes t, whose fields are strings, to expire at expiry
-- (formatted as x, if given), and keeps the queue zset in step: a queued
-- ticket is its member until expiry, a granted one is not.
local function saveTicket(t, id, expiry, x)
  x = x or fmt(expiry)
  local w = t.w ~= '' and ' ' .. t.w or ''
  redis.call('SET', T, t.s .. ' ' .. t.m .. ' ' .. x .. ' ' .. t.a .. ' ' ..
    t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. w,
    'PX', fmt(math.ceil((expiry - now) / 1000) + TICKET_GRACE))
  if t.s == 'q' then
    redis.call('ZADD', Q, x, member(t, id))
  else
    redis.call('ZREM', Q, member(t, id))
  end
end

-- reply: {outcome, wait µs, reason, axis, pause reason, lease expiry µs or
-- '', now µs, then the cost ticket t holds charged (4 parts, 0 without
-- t), then the grant's expiry µs or ''}, the times as num gives them;
-- outcome 1 granted, 2 queued, 3 refused; reason as quota.Reason (1
-- capacity, 2 daily limit, 3 concurrency full, 4 paused). Then the key's
-- epoch, 0 when the caller passed it (an integer costs the caller less to
-- read than an empty string), and for each daily limit its window as
-- "start used", '' before its first charge: what a caller passes back.
local function reply(outcome, wait, reason, axis, preason, lease, t, expiry)
  local r = {outcome, num(wait), reason, tonumber(axis) or 0, preason or '', lease and num(lease) or '', num(now), 0, 0, 0, 0,
    expiry and num(expiry) or '', ep ~= known and ep or 0}
  if t then r[8], r[9], r[10], r[11] = tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), tonumber(t.c4) end
  if daily then
    for k = 1, n do
      local a = axes[k]
      if a.kind == DAILY then
        local w = st['w' .. a.id]
        r[#r + 1] = w and tonumber(w) == a.ws and w .. ' ' .. st['d' .. a.id] or ''
      end
    end
  end
  return r
end

-- lease grants a matured ticket for grantTTL µs, taking a concurrency slot
-- if the key has a concurrency limit (step 4f), or queues it (for the
-- policy's queueTTL past now) while every slot open to its priority is
-- taken; low says the priority reserve is closed to it (quota.Low). A
-- ticket already granted is renewed: its record and lease live grantTTL
-- from now, unless they already live longer. fresh says the ticket was
-- charged by this call and has no record yet.
local function lease(t, ticketID, fresh, grantTTL, queueTTL, low)
  local exp = now + grantTTL
  if t.s == 'g' and tonumber(t.x) > exp then exp = tonumber(t.x) end
  local x = fmt(exp)
  if not conc then
    t.s = 'g'
    saveTicket(t, ticketID, exp, x)
    return reply(1, 0, 0, 0, nil, nil, t, exp)
  end
  local held = redis.call('ZSCORE', L, ticketID)
  if held and tonumber(held) > now then
    redis.call('ZADD', L, x, ticketID)
    saveTicket(t, ticketID, exp, x)
    return reply(1, 0, 0, 0, nil, exp, t, exp)
  end
  redis.call('ZREMRANGEBYSCORE', L, '-inf', nowS)
  local open = conc.cap
  if low then open = conc.cap - conc.cap * tonumber(ARGV[5]) end
  if redis.call('ZCARD', L) + 1 <= open then
    redis.call('ZADD', L, x, ticketID)
    t.s = 'g'
    saveTicket(t, ticketID, exp, x)
    return reply(1, 0, 0, 0, nil, exp, t, exp)
  end
  local first = redis.call('ZRANGE', L, 0, 0, 'WITHSCORES')
  local wait = LEASE_RETRY
  if first[2] then wait = tonumber(first[2]) - now end
  if wait > LEASE_RETRY then wait = LEASE_RETRY end
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

if op == 'reserve' then
  -- ARGV: ticket, low (1/0), cost requests, tokens, input, output, prompt
  -- (0: charge the cost as passed), then the calibration's min and max
  -- ratio and half-life µs, the grant's TTL µs (within the policy's lease
  -- TTL) and place (1/0: quota.Reservation.Place). A cost that can never
  -- fit as passed replies {0, axis, cost, the capacity open to the
  -- priority, rounded down}; one that fits is charged at the learned ratio
  -- (quota.Calibrate), no axis more than the capacity open to it, and the
  -- ticket keeps what was charged.
  local ticketID = ARGV[i]
  local low = ARGV[i + 1] == '1'
  local prioRes = low and tonumber(ARGV[5])
  local queueTTL = tonumber(ARGV[4])
  local grantTTL = tonumber(ARGV[i + 10])
  local place = ARGV[i + 11] == '1'
  local cost = {}

  -- A call takes one concurrency slot: Low needs one below the reserve.
  if low and conc and conc.cap - conc.cap * prioRes < 1 then
    return {0, tonumber(conc.id), 1, math.floor(conc.cap - conc.cap * prioRes)}
  end

  for k = 1, n do
    local a = axes[k]
    local ci = a.ci
    if ci then
      local c = cost[ci]
      if not c then
        c = tonumber(ARGV[i + 1 + ci])
        cost[ci] = c
      end
      local limit = a.cap
      if low then limit = a.cap - a.cap * prioRes end
      if c > limit then return {0, tonumber(a.id), c, math.floor(limit)} end
    end
  end

  local ct, cin = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local prompt = tonumber(ARGV[i + 6])
  if prompt > 0 then
    local r = ratioAt(tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9]))
    if r ~= 1 then
      local scaled, rawT, rawIn = math.ceil(r * prompt), ct, cin
      if cin >= prompt then cin = cin + scaled - prompt end
      if ct >= prompt then
        ct = ct + scaled - prompt
        local out = tonumber(ARGV[i + 5])
        if ct < out then ct = out end
      end
      for k = 1, n do
        local a = axes[k]
        if a.ci == 2 or a.ci == 3 then
          local limit = a.cap
          if low then limit = a.cap - a.cap * prioRes end
          limit = math.floor(limit)
          if a.ci == 2 and ct > limit then ct = math.max(limit, rawT) end
          if a.ci == 3 and cin > limit then cin = math.max(limit, rawIn) end
        end
      end
      if cost[2] then cost[2] = ct end
      if cost[3] then cost[3] = cin end
    end
  end

  local t = ticket()
  if t then
    local mat = tonumber(t.m)
    if t.s == 'g' then
      if paused then
        -- Granted before the pause and never settled: the call waits the
        -- pause out in line, holding no lease.
        redis.call('ZREM', L, ticketID)
        t.s, t.m, t.a = 'q', fmt(pausedUntil), '0'
        saveTicket(t, ticketID, pausedUntil + queueTTL)
        return reply(2, pausedUntil - now, 4, 0, st['pr'], nil, t)
      end
      return lease(t, ticketID, false, grantTTL, queueTTL, low)
    end
    if now < mat then
      if paused and pausedUntil > mat then
        return reply(2, pausedUntil - now, 4, 0, st['pr'], nil, t)
      end
      return reply(2, mat - now, 1, t.a, nil, nil, t)
    end
    if paused then return reply(2, pausedUntil - now, 4, 0, st['pr'], nil, t) end
    if place then return reply(2, 0, 0, 0, nil, nil, t) end
    return lease(t, ticketID, false, grantTTL, queueTTL, low)
  end

  if paused then return reply(3, pausedUntil - now, 4, 0, st['pr']) end

  if daily then
    for k = 1, n do
      local a = axes[k]
      if a.kind == DAILY then
        local limit = a.cap
        if low then limit = a.cap - a.cap * prioRes end
        if used(a) + cost[a.ci] > limit then
          return reply(3, a.we - now, 2, a.id)
        end
      end
    end
  end

  local wait, waxis = 0, '0'
  for k = 1, n do
    local a = axes[k]
    if a.kind == BUCKET then
      local need = cost[a.ci]
      if low then need = need + a.cap * prioRes end
      a.lv = level(a)
      local deficit = need - a.lv
      local w = 0
      if deficit > EPSILON then w = deficit * a.period / a.cap end
      if w > wait then wait, waxis = w, a.id end
    end
  end
  if wait > 0 and wait > tonumber(ARGV[3]) then return reply(3, wait, 1, waxis) end

  adjust(cost)
  t = {s = 'q', m = wait == 0 and nowS or fmt(now + wait), a = waxis,
    c1 = ARGV[i + 2], c2 = fmt(ct), c3 = fmt(cin), c4 = ARGV[i + 5], w = nowS}
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

elseif op == 'settle' then
  -- ARGV: actual requests, tokens, input, output, ticket id, prompt,
  -- counted (1/0), the calibration's min and max ratio and half-life µs,
  -- the cost the caller was told the ticket holds charged (4 parts), then
  -- observations (see observe). The observations, and with a counted
  -- actual the ratio's lesson (actual input over prompt), apply whether or
  -- not the ticket is held. A ticket no longer held is charged what the
  -- actual cost exceeds its charge by, refunding nothing (its estimate is
  -- still charged, and its call may have run); if its record alone is
  -- gone, it releases the grant it held (regrant). Reply 1, or 0 if the
  -- ticket is not held as granted.
  local t, held = ticket(), 0
  if t and t.s == 'g' then
    local delta = {}
    for j = 1, 4 do delta[j] = tonumber(ARGV[i + j - 1]) - tonumber(t['c' .. j]) end
    adjust(delta, tonumber(t.w))
    redis.call('ZREM', L, ARGV[i + 4])
    redis.call('DEL', T)
    held = 1
  elseif not t then
    local over, any = {}, false
    for j = 1, 4 do
      over[j] = tonumber(ARGV[i + j - 1]) - tonumber(ARGV[i + 9 + j])
      if over[j] > 0 then any = true else over[j] = 0 end
    end
    if any then adjust(over) end
    if regrant(ARGV[i + 4]) then held = 1 end
  end
  observe(i + 14)
  local prompt, input = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 2])
  if ARGV[i + 6] == '1' and prompt > 0 and input > 0 then
    learn(input / prompt, tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9]))
  end
  return held

elseif op == 'cancel' then
  -- ARGV: ticket id. Reply 1, or 0 if unknown.
  local t = ticket()
  if not t then
    redis.call('DEL', T)
    if conc then redis.call('ZREM', L, ARGV[i]) end
    return 0
  end
  adjust({-tonumber(t.c1), -tonumber(t.c2), -tonumber(t.c3), -tonumber(t.c4)}, tonumber(t.w))
  redis.call('ZREM', L, ARGV[i])
  redis.call('ZREM', Q, member(t, ARGV[i]))
  redis.call('DEL', T)
  return 1

elseif op == 'renew' then
  -- ARGV: ticket id, TTL µs (within the policy's lease TTL). The grant's
  -- record and lease live that long from now, unless they already live
  -- longer. A ticket whose record is gone keeps the grant it held
  -- (regrant). Reply the time it now has left in µs, or '' if the ticket
  -- is not held as granted.
  local t = ticket()
  local exp = now + tonumber(ARGV[i + 1])
  if not t then
    if regrant(ARGV[i], fmt(exp)) then return fmt(exp - now) end
    return ''
  end
  if t.s ~= 'g' then return '' end
  if tonumber(t.x) > exp then exp = tonumber(t.x) end
  local x = fmt(exp)
  redis.call('ZADD', L, 'XX', x, ARGV[i])
  saveTicket(t, ARGV[i], exp, x)
  return fmt(exp - now)

elseif op == 'pause' then
  -- ARGV: how long µs, reason: the pause ends that long after now.
  local untilT = now + tonumber(ARGV[i])
  if untilT > now and untilT > pausedUntil then
    redis.call('HSET', S, 'pu', fmt(untilT), 'pr', ARGV[i + 1])
  end
  return 1

elseif op == 'observe' then
  -- ARGV: observations (see observe).
  observe(i)
  return 1

elseif op == 'snapshot' then
  -- ARGV: the calibration's min and max ratio and half-life µs (0 0 0: off).
  -- Reply: {now, paused until or '', pause reason, estimate ratio, then per
  -- limit: axis, capacity, available, reset µs or ''}.
  local out = {nowS, '', '', '1'}
  if ARGV[i + 2] ~= '0' then out[4] = fmt(ratioAt(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))) end
  if paused then out[2], out[3] = fmt(pausedUntil), st['pr'] or '' end
  for k = 1, n do
    local a = axes[k]
    local avail, reset = 0, ''
    if a.kind == BUCKET then
      avail = level(a)
    elseif a.kind == DAILY then
      avail, reset = a.cap - used(a), fmt(a.we)
    else
      avail = a.cap - redis.call('ZCOUNT', L, '(' .. nowS, '+inf')
    end
    out[#out + 1] = a.id
    out[#out + 1] = fmt(a.cap)
    out[#out + 1] = fmt(avail)
    out[#out + 1] = reset
  end
  return out
end

return redis.error_reply('ERR tollgate: unknown op ' .. tostring(op))
`)
