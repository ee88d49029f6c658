package released

import goredis "github.com/redis/go-redis/v9"

// script is the one Lua script behind every Store method: each call is one
// EVALSHA, atomic for the key, so replicas never race between reading a level
// and charging it.
//
// A call is charged to one budget, or to two: a tenant's own budget nested
// in its account's. The account's budget (or the tenant's, when its account
// has none) is the root: it holds the tickets, and its ratio calibrates
// every call charged to it. Each budget has a state hash, a lease zset and a
// queue zset; a call's decision reads and writes every budget it is charged
// to, the tenant's first among equals.
//
// KEYS: [1] the root's state hash, [2] its lease zset, [3] the ticket's
// record (Reserve, Settle, Cancel, Renew; otherwise any key of the same
// slot), [4] its queue zset: the tickets queued and not yet granted, scored
// by expiry, each member "#q c1 c2 c3 c4 w n id" (the ticket's place in the
// order of arrival in line, or "-", its charge, the time it was charged at,
// its tenant and its id), so that one that lapses unclaimed is refunded
// without reading its record (a member written before q and n existed
// reads "c1 c2 c3 c4 w id"); [5] its line: the members of the tickets
// waiting for capacity, scored by their fair-share tags (see the memory
// store's line.go); [6] its finish hash: each tenant's latest tag, by "."
// and the tenant's name, expiring when the line goes idle; [7] its waiting
// hash: each tenant's tickets in line and their cost, "count c1 c2 c3 c4",
// by the same names; then, for a tenant's budget nested in the root, [8]
// its state hash, [9] its lease zset and [10] its queue zset, holding the
// same members for the tenant's tickets.
//
// ARGV, built by args.go:
//
//	1  op: reserve | settle | cancel | renew | pause | observe | snapshot
//	2  now in unix µs, or "" to read Redis TIME
//	3  the call's tenant ("" for none)   4 its weight (quota.Policies.Weight)
//	5  max wait µs   6 lease TTL µs (each the shorter of the budgets')
//	7  the number of budgets, 1 or 2, then for each, the root first: its
//	   priority reserve (fraction), 1 if it adopts observed limits else 0,
//	   n its number of limits, then n × (axis, kind, effective capacity,
//	   period µs, burst share: quota.Limit.BurstTime over its period, 0
//	   for other kinds than buckets), in quota.Axes() order
//	…  for each daily limit of each budget, in the same order, 6 midnights
//	   (unix µs) around the caller's clock
//	…  a name for a new epoch, then for each budget the epoch of its state
//	   the caller last saw ('' for none), then for each daily limit of each
//	   budget the window the caller last saw, "start used" as the reserve
//	   reply gave it, or ''
//	…  the op's own arguments (see each op below)
//
// State hash fields (of each budget), per axis id a: l<a>/t<a> bucket level
// and the time it was computed at, w<a>/d<a> daily window start and units
// used in it,
// c<a> adopted effective capacity and o<a> the configured effective capacity
// it was adopted under; g<a>/h<a> a bucket's start gate and the time it is
// dated at, and mb/mr the margin's burst and rate (quota.Margin), kept by
// the root (see start); pu/pr pause end and reason; er/et the learned
// estimate ratio and the time it was learned at, e1/e2 its last two samples
// (quota.Ratio), kept by the root; ep the state's epoch, ef set while nobody
// can tell whether it replaced a lost one, rv when the placeholder leases of
// the last recovery lapse and lp how many are left (see recover); fv/fq the line's virtual time (the tag
// of the ticket served last) and arrival counter, and q1..q4 the cost in
// line per part, kept by the root while its line is not empty. An adopted capacity
// counts only for a policy that adopts and is configured as o<a> says, so a
// changed configuration wins over what an earlier one adopted. The state
// hash and lease zset have no TTL: there is one of each per key with a
// policy.
//
// A ticket is one string (GET and SET … PX are a call each, where a hash
// would need two to write): "s m x a c1 c2 c3 c4 w n g q", with s q(ueued)
// or g(ranted), m maturity µs (the one first told; once granted, the time
// its call starts, see lease), x expiry µs, a the axis
// of the wait, c1..c4 the charged cost (requests, tokens, input, output
// tokens), w the time it was charged at in µs, which names the day of every
// daily window charged: Settle and Cancel correct a window only while that
// day lasts; n "." followed by the tenant it was reserved under: the
// tickets of an account and its tenants share the root's namespace, and a
// call under another tenant is told so; g its tag while it waits in line,
// else "-", and q its place in the order of arrival in line ("-": never in
// line). A ticket written before w existed lacks it and is corrected in any
// day; one written before n, any tenant may use, and it waits outside the
// line.
// Its PX only collects garbage: x decides. A queued ticket is also a member
// of each queue zset of its budgets until it is granted, cancelled or
// lapses; every call first refunds, on each budget it reads, up to SWEEP
// queued tickets that lapsed (a call that never ran costs nothing).
//
// Lua numbers are doubles and Redis truncates them to integers on return, so
// every fractional value travels as a string formatted with %.17g (integers
// below 2^53 take %d, the same digits for less work), and the reserve reply
// returns only integers below 2^53 as numbers. Parsing (strtod) and
// formatting are most of the script's own cost, so it does each once.
var script = goredis.NewScript(`
local S, L, T, Q, N, F, W = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7]
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
local tenant = '.' .. ARGV[3]

-- costOn maps an axis id to the index of the cost part it charges.
local costOn = {['1'] = 1, ['2'] = 2, ['3'] = 3, ['4'] = 4, ['5'] = 1, ['6'] = 2}

-- A budget: its keys, st its state hash as read, prio its priority reserve,
-- adopts, n its number of axes, axes, conc its concurrency axis, daily
-- whether it has daily axes and nd how many, pu/pr its pause's end and
-- reason, paused; ep its state's epoch, known the one the caller saw and
-- seenAt where the caller's view of its daily windows starts in ARGV.
-- Each axis: id and kind as passed, cap (the adopted one if it counts, see
-- the header), conf the configured capacity as passed, period µs (buckets
-- only), ci its cost part (none for concurrency), st its budget's state.
local lastP, period -- axes usually share a period: parse each one once
local function budget(Sk, Lk, Qk, i)
  local st = {}
  local raw = redis.call('HGETALL', Sk)
  for j = 1, #raw, 2 do st[raw[j]] = raw[j + 1] end
  local pu = st['pu']
  pu = pu and tonumber(pu) or 0
  local b = {S = Sk, L = Lk, Q = Qk, st = st, prio = tonumber(ARGV[i]), adopts = ARGV[i + 1] == '1',
    n = tonumber(ARGV[i + 2]), axes = {}, conc = nil, daily = false, nd = 0, pu = pu, pr = st['pr'], paused = pu > now,
    ep = st['ep'], known = nil, seenAt = nil,
    mb = tonumber(st['mb'] or '') or 1, mr = tonumber(st['mr'] or '') or 1}
  i = i + 3
  for k = 1, b.n do
    local id, kind, conf = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if kind == BUCKET and ARGV[i + 3] ~= lastP then
      lastP = ARGV[i + 3]
      period = tonumber(lastP)
    end
    local cap = conf
    if b.adopts and st['o' .. id] == conf and st['c' .. id] then cap = st['c' .. id] end
    -- Every field is named here so the table is sized once (lv: see adjust).
    local a = {id = id, kind = kind, cap = tonumber(cap), conf = conf, ci = costOn[id],
      period = kind == BUCKET and period or nil, bs = kind == BUCKET and tonumber(ARGV[i + 4]) or nil,
      rate = nil, burst = nil, lv = nil, st = st}
    if kind == BUCKET then a.rate, a.burst = a.cap / period * b.mr, a.cap * a.bs * b.mb end
    if kind == LEASES then
      b.conc = a
    elseif kind == DAILY then
      b.daily = true
      b.nd = b.nd + 1
    end
    b.axes[k] = a
    i = i + 5
  end
  return b, i
end

local i = 8
local root, own
root, i = budget(S, L, Q, i)
if ARGV[7] == '2' then own, i = budget(KEYS[8], KEYS[9], KEYS[10], i) end
-- budgets lists the call's budgets, the tenant's first; target is the one
-- its key names (Pause, Observe, Snapshot).
local budgets = {root}
local target = root
if own then budgets, target = {own, root}, own end

for _, b in ipairs({root, own}) do
  if b.daily then
    for k = 1, b.n do
      local a = b.axes[k]
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
      end
    end
  end
end
local epochName = ARGV[i]
i = i + 1
for _, b in ipairs({root, own}) do
  b.known = ARGV[i]
  i = i + 1
end
for _, b in ipairs({root, own}) do
  b.seenAt = i
  i = i + b.nd
end

-- The axes' level times are usually one write's now: parse each one once.
local lastT, lastTN
local function level(a)
  local l = a.st['l' .. a.id]
  if not l then return a.burst end
  l = tonumber(l)
  local ts = a.st['t' .. a.id]
  if ts ~= lastT then lastT, lastTN = ts, tonumber(ts) end
  local dt = now - lastTN
  if dt > 0 then l = l + dt * a.rate end
  if l > a.burst then l = a.burst end
  return l
end

local function used(a)
  if tonumber(a.st['w' .. a.id]) == a.ws then return tonumber(a.st['d' .. a.id]) end
  return 0
end

-- pause returns the call's budget whose pause ends last (the tenant's
-- among equals), or nil when none is paused.
local function pause()
  local p
  for _, b in ipairs(budgets) do
    if b.paused and (not p or b.pu > p.pu) then p = b end
  end
  return p
end

-- ratioAt returns the root's learned estimate ratio at now, within
-- [minR, maxR], back toward 1 by half every half µs since it was learned:
-- quota.Ratio.ValueAt.
local function ratioAt(minR, maxR, half)
  local v = tonumber(root.st['er'] or '')
  if not v then return 1 end
  local age = now - tonumber(root.st['et'])
  if age > 0 then v = 1 + (v - 1) * 2 ^ (-age / half) end
  if v < minR then v = minR end
  if v > maxR then v = maxR end
  return v
end

-- learn folds one sample (the provider's count over the prompt's estimate)
-- into the root's ratio: quota.Ratio.Learn. With the last two, the ratio
-- rises at once to their median, or falls RATIO_FALL of the way to their
-- highest.
local RATIO_FALL = 0.5 -- quota's ratioFall
local function learn(sample, minR, maxR, half)
  local st = root.st
  local cur = ratioAt(minR, maxR, half)
  local s = sample
  if s < minR then s = minR end
  if s > maxR then s = maxR end
  local p1 = tonumber(st['e1'] or '') or cur
  local p2 = tonumber(st['e2'] or '') or cur
  local lo, hi = math.min(s, p1), math.max(s, p1) -- no swap: gopher-lua (miniredis) gets a, b = b, a wrong
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
  redis.call('HSET', root.S, 'er', fmt(v), 'et', at, 'e1', fmt(s), 'e2', st['e1'] or '')
end

-- stamp is the time to date a bucket's new level at: now, unless the clock
-- has stepped back past the level's own time. A level is never dated back,
-- or the span the clock repeats would earn a second refill.
local function stamp(a)
  local ts = a.st['t' .. a.id]
  if ts and tonumber(ts) > now then return ts end
  return nowS
end

-- adjust charges delta[1..4] (negative: refunds) against every axis of
-- budget b and keeps its st current for what follows; a bucket's level is
-- a.lv when the caller has just read it. Given at, the time a ticket was
-- charged at, a daily window is left alone unless at falls in its current
-- day: a new day owes nothing for an estimate made the day before.
-- Refunds never lift a bucket above its capacity nor a window below zero.
local function adjust(b, delta, at)
  local hs, h = {}, 0
  for k = 1, b.n do
    local a = b.axes[k]
    local c = a.ci and delta[a.ci]
    if c and at and a.kind == DAILY and (at < a.ws or at >= a.we) then c = nil end
    if a.kind == BUCKET and c then
      local l = (a.lv or level(a)) - c
      if c < 0 and l > a.burst then l = a.burst end
      local lk, tk = 'l' .. a.id, 't' .. a.id
      b.st[lk], b.st[tk] = fmt(l), stamp(a)
      hs[h + 1], hs[h + 2], hs[h + 3], hs[h + 4] = lk, b.st[lk], tk, b.st[tk]
      h = h + 4
    elseif a.kind == DAILY and c then
      local u = used(a) + c
      if u < 0 then u = 0 end
      local wk, dk = 'w' .. a.id, 'd' .. a.id
      b.st[wk], b.st[dk] = fmt(a.ws), fmt(u)
      hs[h + 1], hs[h + 2], hs[h + 3], hs[h + 4] = wk, b.st[wk], dk, b.st[dk]
      h = h + 4
    end
  end
  if h > 0 then redis.call('HSET', b.S, unpack(hs)) end
end

-- observe applies to budget b what a provider reported, from ARGV[j]: m,
-- then m × (axis id, adopted effective capacity or -1, remaining or -1).
-- Levels are only lowered; an adopted capacity replaces the policy's,
-- recorded with the configured capacity it was adopted under.
local function observe(b, j)
  local m = tonumber(ARGV[j])
  local hs = {}
  local st = b.st
  for k = 0, m - 1 do
    local id, adopt, rem = ARGV[j + 1 + 3 * k], tonumber(ARGV[j + 2 + 3 * k]), tonumber(ARGV[j + 3 + 3 * k])
    for q = 1, b.n do
      local a = b.axes[q]
      if a.id == id then
        if a.kind == BUCKET then
          local l = level(a)
          if adopt > 0 then
            a.cap, a.rate, a.burst = adopt, adopt / a.period * b.mr, adopt * a.bs * b.mb
            hs[#hs + 1] = 'c' .. id; hs[#hs + 1] = fmt(adopt)
            hs[#hs + 1] = 'o' .. id; hs[#hs + 1] = a.conf
            if l > a.burst then l = a.burst end
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
  if #hs > 0 then redis.call('HSET', b.S, unpack(hs)) end
end

-- The epoch names one life of a budget's state: a new one begins when its
-- state hash is created. A caller that saw another epoch and finds the hash
-- gone, or recreated by a caller that could not tell it was lost (ef),
-- knows the state was lost (a restart without persistence, a failover, an
-- eviction) and recovers it. A caller that saw none cannot tell a lost
-- budget from a new one.
local PLACEHOLDER = '\0lost ' -- a placeholder lease's name, before rv and its number

-- begin names a new epoch of budget b: one generation past the caller's,
-- the caller's name for it and now, so that it differs from every epoch
-- anyone saw.
local function begin(b)
  return (tonumber((string.match(b.known, '^(%d+)%.'))) or 0) + 1 .. '.' .. epochName .. '@' .. nowS -- (…) is one value: gopher-lua's match returns none on a miss
end

-- seen returns the use of budget b's j-th daily limit a's current window
-- that the caller last saw, 0 if it saw another window or none.
local function seen(b, a, j)
  local ws, u = string.match(ARGV[b.seenAt + j - 1], '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then return tonumber(u) end
  return 0
end

-- recover restarts budget b's state after a loss, from what the caller
-- saw: every bucket empty (or lower) and dated now, so it refills at its
-- rate and hands out no burst it never had; every daily window at least as
-- used as the caller last saw it; every concurrency slot no live lease
-- holds taken by a placeholder until the policy's lease TTL from now, for
-- the calls granted before the loss, which take them over as they renew or
-- settle (regrant). Queued tickets are gone with their records: their
-- callers are charged again when they come back; a root whose hash was
-- gone starts its line afresh. With lost false (a caller that saw an older
-- epoch recovered the state already), only the daily windows are raised to
-- what this caller saw.
local function recover(b, lost)
  local st = b.st
  local hs, j = {}, 0
  for k = 1, b.n do
    local a = b.axes[k]
    local id = a.id
    if a.kind == DAILY then
      j = j + 1
      local u = seen(b, a, j)
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
      local rv = fmt(now + tonumber(ARGV[6]))
      local free = math.floor(a.cap) - redis.call('ZCOUNT', b.L, '(' .. nowS, '+inf')
      for q = 1, free do redis.call('ZADD', b.L, rv, PLACEHOLDER .. rv .. ' ' .. q) end
      st['lp'], st['rv'] = fmt(free > 0 and free or 0), rv
      hs[#hs + 1] = 'lp'; hs[#hs + 1] = st['lp']
      hs[#hs + 1] = 'rv'; hs[#hs + 1] = rv
    end
  end
  if lost then
    if b == root and not b.ep then redis.call('DEL', N, F, W) end
    if not b.ep then b.ep = begin(b) end
    st['ep'], st['ef'] = b.ep, nil
    hs[#hs + 1] = 'ep'; hs[#hs + 1] = b.ep
    redis.call('HDEL', b.S, 'ef')
  end
  if #hs > 0 then redis.call('HSET', b.S, unpack(hs)) end
end

for _, b in ipairs({root, own}) do
  if b.ep ~= b.known then
    if b.known ~= '' then
      recover(b, not b.ep or b.st['ef'] ~= nil)
    elseif not b.ep then
      b.ep = begin(b)
      b.st['ep'], b.st['ef'] = b.ep, '1'
      redis.call('HSET', b.S, 'ep', b.ep, 'ef', '1')
    end
  end
end

-- regrant keeps, for ticket id whose record is gone, the grant it held on
-- every budget with a concurrency limit: its own lease where it still has
-- one (the record alone was evicted), else a placeholder recover left,
-- until x (formatted µs), or releases it when x is nil. It reports whether
-- the ticket held a grant so, changing nothing when one budget cannot say
-- it did: never on budgets without a concurrency limit, where no lease
-- says which calls ran.
local function regrant(id, x)
  local takes, any = {}, false
  for _, b in ipairs(budgets) do
    if b.conc then
      any = true
      local held = redis.call('ZSCORE', b.L, id)
      if not (held and tonumber(held) > now) then
        local rv, lp = b.st['rv'], tonumber(b.st['lp'] or '0')
        if lp < 1 or tonumber(rv) <= now or not redis.call('ZSCORE', b.L, PLACEHOLDER .. rv .. ' ' .. lp) then
          return false
        end
        takes[#takes + 1] = b
      end
    end
  end
  if not any then return false end
  for _, b in ipairs(takes) do
    local lp = tonumber(b.st['lp'])
    redis.call('ZREM', b.L, PLACEHOLDER .. b.st['rv'] .. ' ' .. lp)
    b.st['lp'] = fmt(lp - 1)
    redis.call('HSET', b.S, 'lp', b.st['lp'])
  end
  for _, b in ipairs(budgets) do
    if b.conc then
      if x then redis.call('ZADD', b.L, x, id) else redis.call('ZREM', b.L, id) end
    end
  end
  return true
end

-- The start gates (see quota's burst.go): per bucket axis of the root, a
-- level charged when a call is granted, as of the time the call starts,
-- holding at most the axis's burst (its capacity × the burst share passed
-- × the margin's burst) and refilled at its rate: g<a> the level, h<a>
-- the time it is dated at (a start yet to come, or the last one). A gate
-- with no level is full.

-- gateLevel returns the root's gate of axis a as of at, and its burst.
local function gateLevel(a, at)
  local burst = a.burst
  local g = a.st['g' .. a.id]
  if not g then return burst, burst end
  local l, ts = tonumber(g), tonumber(a.st['h' .. a.id])
  if at > ts then l = l + (at - ts) * a.rate end
  if l > burst then l = burst end
  return l, burst
end

-- gate charges sign × cost to the root's gates as of now + wait, after
-- every level it was dated at (a negative part refunds, never above the
-- burst, and only to a gate not dated past now, or dated at own, the
-- start being given back), and keeps its st current.
local function gate(cost, wait, sign, own)
  local hs, h = {}, 0
  for k = 1, root.n do
    local a = root.axes[k]
    local c = a.kind == BUCKET and cost[a.ci] or 0
    local at = now + wait
    local ts = tonumber(a.st['h' .. a.id] or '')
    if ts and ts > at then
      at = ts
      -- A gate dated at a start yet to come holds the level after that
      -- start: what is given back now cannot be added there, or the next
      -- call would start together with it, unless that start is the one
      -- given back (own). Else it is given back to nobody.
      if sign * c < 0 and ts ~= own then c = 0 end
    end
    if c ~= 0 then
      local l = gateLevel(a, at) - sign * c
      if l > a.burst then l = a.burst end
      local gk, hk = 'g' .. a.id, 'h' .. a.id
      a.st[gk], a.st[hk] = fmt(l), fmt(at)
      hs[h + 1], hs[h + 2], hs[h + 3], hs[h + 4] = gk, a.st[gk], hk, a.st[hk]
      h = h + 4
    end
  end
  if h > 0 then redis.call('HSET', root.S, unpack(hs)) end
end

-- start charges cost to the root's gates and returns the µs until the
-- call may start: until every gate holds its share of the cost, or its
-- whole burst for a call larger (a gate dated at a start yet to come is
-- read as of that start).
local function start(cost)
  local wait = 0
  for k = 1, root.n do
    local a = root.axes[k]
    local c = a.kind == BUCKET and cost[a.ci] or 0
    if c > 0 then
      local from = now
      local ts = tonumber(a.st['h' .. a.id] or '')
      if ts and ts > from then from = ts end
      local l, burst = gateLevel(a, from)
      local need = c < burst and c or burst
      local w = from - now
      if need - l > EPSILON * math.max(1, need) then w = w + (need - l) / a.rate end
      if w > wait then wait = w end
    end
  end
  wait = math.ceil(wait)
  gate(cost, wait, 1)
  -- The line never runs ahead of the starts: a bucket refills every axis
  -- at once while a call waits on one, which the provider's window does
  -- not, so a grant the gates start later owes the buckets the time it
  -- waits, and the calls behind it in line wait as long.
  if wait > 0 then
    local hs = {}
    for k = 1, root.n do
      local a = root.axes[k]
      if a.kind == BUCKET then
        local lk, tk = 'l' .. a.id, 't' .. a.id
        a.st[lk], a.st[tk] = fmt(level(a) - a.rate * wait), stamp(a)
        a.lv = nil
        hs[#hs + 1], hs[#hs + 2], hs[#hs + 3], hs[#hs + 4] = lk, a.st[lk], tk, a.st[tk]
      end
    end
    redis.call('HSET', root.S, unpack(hs))
  end
  return wait
end

-- remargin makes the root's margin (mb, mr) from now: its buckets and
-- gates keep what they owe (a level below its burst is a debt the calls
-- after it wait for; a new burst moves the level by as much as the burst
-- moves) and refill at the new rate after.
local function remargin(mb, mr)
  local hs = {'mb', fmt(mb), 'mr', fmt(mr)}
  for k = 1, root.n do
    local a = root.axes[k]
    if a.kind == BUCKET then
      local burst = a.cap * a.bs * mb
      local delta = burst - a.burst
      local lk, tk = 'l' .. a.id, 't' .. a.id
      if a.st[lk] then
        local l = level(a) + delta
        if l > burst then l = burst end
        hs[#hs + 1], hs[#hs + 2], hs[#hs + 3], hs[#hs + 4] = lk, fmt(l), tk, stamp(a)
      end
      local ts = tonumber(a.st['h' .. a.id] or '')
      if ts then
        local at = ts > now and ts or now
        local g = gateLevel(a, at) + delta
        if g > burst then g = burst end
        hs[#hs + 1], hs[#hs + 2], hs[#hs + 3], hs[#hs + 4] = 'g' .. a.id, fmt(g), 'h' .. a.id, fmt(at)
      end
    end
  end
  redis.call('HSET', root.S, unpack(hs))
end

-- member is t's entry in the queue zsets and the line.
local function member(t, id)
  if t.q == '' then -- written before tickets had places in line
    return t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. ' ' .. t.w .. ' ' .. id
  end
  return '#' .. t.q .. ' ' .. t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. ' ' .. t.w .. ' ' .. t.n .. ' ' .. id
end

-- parts reads "count c1 c2 c3 c4" (nil: none) into a table of numbers.
local function parts(raw)
  local c, c1, c2, c3, c4 = string.match(raw or '', '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
  if not c then return {0, 0, 0, 0, 0} end
  return {tonumber(c), tonumber(c1), tonumber(c2), tonumber(c3), tonumber(c4)}
end

-- inLine returns the cost in the root's line per part, all tenants'.
local function inLine()
  local st = root.st
  return {tonumber(st['q1'] or '') or 0, tonumber(st['q2'] or '') or 0, tonumber(st['q3'] or '') or 0,
    tonumber(st['q4'] or '') or 0}
end

-- count adds sign × the cost of member m, of tenant n, to the line's
-- totals: the root's q1..q4 and the tenant's entry in W.
local function count(n, c, sign)
  local st = root.st
  local hs = {}
  for k = 1, 4 do
    st['q' .. k] = fmt((tonumber(st['q' .. k] or '') or 0) + sign * c[k])
    hs[#hs + 1] = 'q' .. k
    hs[#hs + 1] = st['q' .. k]
  end
  redis.call('HSET', S, unpack(hs))
  local w = parts(redis.call('HGET', W, n))
  w[1] = w[1] + sign
  if w[1] <= 0 then
    redis.call('HDEL', W, n)
  else
    redis.call('HSET', W, n, fmt(w[1]) .. ' ' .. fmt(w[2] + sign * c[1]) .. ' ' .. fmt(w[3] + sign * c[2]) .. ' ' ..
      fmt(w[4] + sign * c[3]) .. ' ' .. fmt(w[5] + sign * c[4]))
  end
end

-- unline takes member m out of the line, if it is in it; the line that
-- empties starts afresh (its virtual time, counter, totals and tags).
local function unline(m)
  if redis.call('ZREM', N, m) == 0 then return end
  if redis.call('ZCARD', N) == 0 then
    redis.call('DEL', F, W)
    redis.call('HDEL', S, 'fv', 'fq', 'q1', 'q2', 'q3', 'q4')
    local st = root.st
    st['fv'], st['fq'], st['q1'], st['q2'], st['q3'], st['q4'] = nil, nil, nil, nil, nil, nil
    return
  end
  local c1, c2, c3, c4, n = string.match(m, '^#%S+ (%S+) (%S+) (%S+) (%S+) %S+ (%S+) ')
  count(n, {tonumber(c1), tonumber(c2), tonumber(c3), tonumber(c4)}, -1)
end

-- sweep refunds to budget b up to SWEEP of its queued tickets that lapsed
-- before now, never granted: daily windows only while the day they were
-- charged in lasts.
local function sweep(b)
  local due = redis.call('ZRANGEBYSCORE', b.Q, '-inf', nowS, 'LIMIT', 0, SWEEP)
  for _, m in ipairs(due) do
    local c1, c2, c3, c4, w
    if string.byte(m) == 35 then -- '#'
      c1, c2, c3, c4, w = string.match(m, '^#%S+ (%S+) (%S+) (%S+) (%S+) (%S+) ')
    else
      c1, c2, c3, c4, w = string.match(m, '^(%S+) (%S+) (%S+) (%S+) (%S*) ')
    end
    if c1 then
      adjust(b, {-tonumber(c1), -tonumber(c2), -tonumber(c3), -tonumber(c4)}, tonumber(w))
    end
    redis.call('ZREM', b.Q, m)
    unline(m)
  end
end
for _, b in ipairs(budgets) do sweep(b) end

-- ticket returns the live ticket T, or nil; and, when it was reserved
-- under another tenant than the call's, that tenant ("." and its name).
local function ticket()
  local raw = redis.call('GET', T)
  if not raw then return nil end
  local t = {}
  t.s, t.m, t.x, t.a, t.c1, t.c2, t.c3, t.c4, t.w, t.n, t.g, t.q =
    string.match(raw, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) ?(%S*) ?(%S*) ?(%S*) ?(%S*)$')
  if not t.x or tonumber(t.x) <= now then
    return nil -- expired: unknown, whatever PEXPIRE has not yet collected
  end
  if t.n ~= '' and t.n ~= tenant then return nil, t.n end
  return t
end

-- saveTicket writes t, whose fields are strings, to expire at expiry
-- (formatted as x, if given), and keeps the call's queue zsets in step: a
-- queued ticket is their member until expiry, a granted one is not.
local function saveTicket(t, id, expiry, x)
  x = x or fmt(expiry)
  t.x = x
  local w = t.w ~= '' and ' ' .. t.w or ''
  local n = t.n ~= '' and ' ' .. t.n or ''
  local gq = t.q ~= '' and ' ' .. t.g .. ' ' .. t.q or ''
  redis.call('SET', T, t.s .. ' ' .. t.m .. ' ' .. x .. ' ' .. t.a .. ' ' ..
    t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. w .. n .. gq,
    'PX', fmt(math.ceil((expiry - now) / 1000) + TICKET_GRACE))
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
-- '', now µs, then the cost ticket t holds charged (4 parts, 0 without
-- t), then the grant's expiry µs or ''}, the times as num gives them;
-- outcome 1 granted, 2 queued, 3 refused; reason as quota.Reason (1
-- capacity, 2 daily limit, 3 concurrency full, 4 paused). Then each
-- budget's epoch, root first, 0 when the caller passed it (an integer costs
-- the caller less to read than an empty string), and for each daily limit
-- of each budget its window as "start used", '' before its first charge:
-- what a caller passes back.
local function reply(outcome, wait, reason, axis, preason, lease, t, expiry)
  local r = {outcome, num(wait), reason, tonumber(axis) or 0, preason or '', lease and num(lease) or '', num(now), 0, 0, 0, 0,
    expiry and num(expiry) or '', root.ep ~= root.known and root.ep or 0}
  if t then r[8], r[9], r[10], r[11] = tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), tonumber(t.c4) end
  if own then r[14] = own.ep ~= own.known and own.ep or 0 end
  for _, b in ipairs({root, own}) do
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
  return r
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
    local c = {tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), tonumber(t.c4)}
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
  saveTicket(t, ticketID, exp, x)
  return reply(1, wait, 0, 0, nil, leased and exp or nil, t, exp)
end

-- The line, in weighted fair share (see the memory store's line.go).

-- sums returns the cost in the root's line: in total and ahead of (tag,
-- seq), of every tenant and of the call's tenant (when its budget is
-- nested), each per part. The totals are kept as tickets enter and leave;
-- the cost ahead is read off the shorter side of the place, so a call
-- reads the tickets ahead of its place or those behind it, whichever are
-- fewer: O(log queued + that) per call.
local function sums(tag, seq)
  local tot, otot = inLine(), {0, 0, 0, 0}
  if own then
    local w = parts(redis.call('HGET', W, tenant))
    otot = {w[2], w[3], w[4], w[5]}
  end
  local n = redis.call('ZCARD', N)
  if n == 0 then return tot, {0, 0, 0, 0}, otot, {0, 0, 0, 0} end
  local tagS = fmt(tag)
  local front = redis.call('ZCOUNT', N, '-inf', tagS)
  front = front <= n - front
  local side
  if front then
    side = redis.call('ZRANGEBYSCORE', N, '-inf', tagS, 'WITHSCORES')
  else
    side = redis.call('ZRANGEBYSCORE', N, tagS, '+inf', 'WITHSCORES')
  end
  local sum, osum = {0, 0, 0, 0}, {0, 0, 0, 0}
  for j = 1, #side, 2 do
    local q, c1, c2, c3, c4, tn = string.match(side[j], '^#(%S+) (%S+) (%S+) (%S+) (%S+) %S+ (%S+) ')
    if q then
      local score = tonumber(side[j + 1])
      q = tonumber(q)
      if (score < tag or (score == tag and q < seq)) == front then
        c1, c2, c3, c4 = tonumber(c1), tonumber(c2), tonumber(c3), tonumber(c4)
        sum[1], sum[2], sum[3], sum[4] = sum[1] + c1, sum[2] + c2, sum[3] + c3, sum[4] + c4
        if own and tn == tenant then
          osum[1], osum[2], osum[3], osum[4] = osum[1] + c1, osum[2] + c2, osum[3] + c3, osum[4] + c4
        end
      end
    end
  end
  if front then return tot, sum, otot, osum end
  return tot, {tot[1] - sum[1], tot[2] - sum[2], tot[3] - sum[3], tot[4] - sum[4]},
    otot, {otot[1] - osum[1], otot[2] - osum[2], otot[3] - osum[3], otot[4] - osum[4]}
end

-- lineWait returns how long until every bucket of budget b covers cost
-- (and, for low, the reserve) after the cost ahead of it in line, the
-- level counting the cost in line (total) as available to the line; and
-- the axis that takes longest (the first of equals).
local function lineWait(b, cost, low, ahead, total)
  local wait, waxis = 0, '0'
  for k = 1, b.n do
    local a = b.axes[k]
    if a.kind == BUCKET then
      -- A call needs its cost, or the whole burst for a call larger (the
      -- reserve kept back from Low).
      local res = low and a.burst * b.prio or 0
      local c = cost[a.ci]
      if c > a.burst - res then c = a.burst - res end
      local need = ahead[a.ci] + c + res - total[a.ci]
      a.lv = level(a)
      local deficit = need - a.lv
      local w = 0
      if deficit > EPSILON then w = deficit / a.rate end
      if w > wait then wait, waxis = w, a.id end
    end
  end
  return wait, waxis
end

-- lineWaits returns the wait of a call costing cost placed at (tag, seq)
-- in the line (busy: not empty), over its budgets (the tenant's first
-- among equals).
local NONE = {0, 0, 0, 0}
local function lineWaits(busy, tag, seq, cost, low)
  local tot, ahd, otot, oahd = NONE, NONE, NONE, NONE
  if busy then tot, ahd, otot, oahd = sums(tag, seq) end
  local wait, waxis = 0, '0'
  if own then wait, waxis = lineWait(own, cost, low, oahd, otot) end
  local w, a = lineWait(root, cost, low, ahd, tot)
  if w > wait then wait, waxis = w, a end
  return wait, waxis
end

-- finish returns the call's tenant's latest tag, if it is past the line's
-- virtual time v; a tag behind it counts for nothing, and is dropped.
local function finish(v)
  local f = tonumber(redis.call('HGET', F, tenant) or '')
  if f and f <= v then
    redis.call('HDEL', F, tenant)
    return nil
  end
  return f
end

-- setFinish records tag as the call's tenant's latest; the hash lives as
-- long as a ticket may wait in line after the last write.
local function setFinish(tag)
  redis.call('HSET', F, tenant, fmt(tag))
  redis.call('PEXPIRE', F, fmt(math.ceil((tonumber(ARGV[5]) + tonumber(ARGV[6])) / 1000) + TICKET_GRACE))
end

-- wrongTenant is the reply to a call under a ticket reserved under tenant
-- n, another tenant than the call's.
local function wrongTenant(n) return {-1, string.sub(n, 2)} end

if op == 'reserve' then
  -- ARGV: ticket, low (1/0), cost requests, tokens, input, output, prompt
  -- (0: charge the cost as passed), then the calibration's min and max
  -- ratio and half-life µs, the grant's TTL µs (within the policy's lease
  -- TTL) and place (1/0: quota.Reservation.Place). A cost that can never
  -- fit a budget as passed replies {0, axis, cost, the capacity open to
  -- the priority, rounded down, 1 if the budget is the tenant's own else
  -- 0}; one that fits is charged at the root's learned ratio
  -- (quota.Calibrate), no axis more than the capacity open to it in any
  -- budget, and the ticket keeps what was charged. A ticket reserved under
  -- another tenant replies {-1, that tenant}.
  local ticketID = ARGV[i]
  local low = ARGV[i + 1] == '1'
  local queueTTL = tonumber(ARGV[6])
  local grantTTL = tonumber(ARGV[i + 10])
  local place = ARGV[i + 11] == '1'
  local cost = {tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])}

  for _, b in ipairs(budgets) do
    local mine = b == own and 1 or 0
    -- A call takes one concurrency slot: Low needs one below the reserve.
    local conc = b.conc
    if low and conc and conc.cap - conc.cap * b.prio < 1 then
      return {0, tonumber(conc.id), 1, math.floor(conc.cap - conc.cap * b.prio), mine}
    end
    for k = 1, b.n do
      local a = b.axes[k]
      if a.ci then
        local c = cost[a.ci]
        local limit = a.cap
        if low then limit = a.cap - a.cap * b.prio end
        if c > limit then return {0, tonumber(a.id), c, math.floor(limit), mine} end
      end
    end
  end

  local ct, cin = cost[2], cost[3]
  local prompt = tonumber(ARGV[i + 6])
  if prompt > 0 then
    local r = ratioAt(tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9]))
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
  local p = pause()
  if t then
    local mat, ax = tonumber(t.m), t.a
    local inLine = t.s == 'q' and t.g ~= '' and t.g ~= '-'
    if inLine then
      -- A ticket in line matures when its place does, and never before
      -- the maturity it was first told.
      local w, a = lineWaits(true, tonumber(t.g), tonumber(t.q),
        {tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), tonumber(t.c4)}, low)
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
        root.st['fv'] = t.g
        redis.call('HSET', S, 'fv', t.g)
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
  local refusal, spent = 0, nil
  for _, b in ipairs(budgets) do
    if b.daily then
      for k = 1, b.n do
        local a = b.axes[k]
        if a.kind == DAILY then
          local limit = a.cap
          if low then limit = a.cap - a.cap * b.prio end
          if used(a) + cost[a.ci] > limit then
            if not spent or a.we - now > refusal then refusal, spent = a.we - now, a.id end
            break
          end
        end
      end
    end
  end
  if spent then return reply(3, refusal, 2, spent) end

  -- The call's tag: its cost's dominant share of the root's buckets over
  -- its tenant's weight, past the line's virtual time and its tenant's
  -- latest tag.
  local busy = root.st['fq'] ~= nil -- the line's counter lives while it holds a ticket
  local v, seq = tonumber(root.st['fv'] or '') or 0, (tonumber(root.st['fq'] or '') or 0) + 1
  local share = 0
  for k = 1, root.n do
    local a = root.axes[k]
    if a.kind == BUCKET and cost[a.ci] / a.cap > share then share = cost[a.ci] / a.cap end
  end
  local base = v
  if busy then
    local f = finish(v)
    if f and f > base then base = f end
  end
  local tag = base + share / tonumber(ARGV[4])
  local wait, waxis = lineWaits(busy, tag, seq, cost, low)
  if wait > 0 and wait > tonumber(ARGV[5]) then return reply(3, wait, 1, waxis) end

  for _, b in ipairs(budgets) do adjust(b, cost) end
  t = {s = 'q', m = wait == 0 and nowS or fmt(now + wait), a = waxis,
    c1 = ARGV[i + 2], c2 = fmt(ct), c3 = fmt(cin), c4 = ARGV[i + 5], w = nowS, n = tenant, g = '-', q = '-'}
  if wait > 0 then
    -- In line, as its tenant's latest.
    t.g, t.q = fmt(tag), fmt(seq)
    redis.call('HSET', S, 'fq', t.q)
    setFinish(tag)
    redis.call('ZADD', N, t.g, member(t, ticketID))
    count(tenant, cost, 1)
  elseif busy then
    -- Served at once, past a line: its tag is the line's virtual time.
    if tag > v then redis.call('HSET', S, 'fv', fmt(tag)) end
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

elseif op == 'settle' then
  -- ARGV: actual requests, tokens, input, output, ticket id, prompt,
  -- counted (1/0), the calibration's min and max ratio and half-life µs,
  -- the cost the caller was told the ticket holds charged (4 parts), the
  -- margin's gains (burst, rate: quota.BurstGain, RateGain), then
  -- observations (see observe), applied to the root: a provider reports
  -- on the account. The observations, and with a counted actual the
  -- root's lesson (actual input over prompt), apply whether or not the
  -- ticket is held. A ticket no longer held is charged what the actual
  -- cost exceeds its charge by, on every budget, refunding nothing (its
  -- estimate is still charged, and its call may have run); if its record
  -- alone is gone, it releases the grant it held (regrant). Reply 1, or 0
  -- if the ticket is not held as granted; a ticket reserved under another
  -- tenant replies {-1, that tenant} and changes nothing.
  local t, other = ticket()
  if other then return wrongTenant(other) end
  local held = 0
  if t and t.s == 'g' then
    local delta = {}
    for j = 1, 4 do delta[j] = tonumber(ARGV[i + j - 1]) - tonumber(t['c' .. j]) end
    for _, b in ipairs(budgets) do
      adjust(b, delta, tonumber(t.w))
      if b.conc then redis.call('ZREM', b.L, ARGV[i + 4]) end
    end
    -- The gates are corrected too: a provider counts what a call used.
    gate(delta, 0, 1)
    redis.call('DEL', T)
    held = 1
  elseif not t then
    local over, any = {}, false
    for j = 1, 4 do
      over[j] = tonumber(ARGV[i + j - 1]) - tonumber(ARGV[i + 9 + j])
      if over[j] > 0 then any = true else over[j] = 0 end
    end
    if any then
      for _, b in ipairs(budgets) do adjust(b, over) end
    end
    if regrant(ARGV[i + 4]) then held = 1 end
  end
  observe(root, i + 16)
  local prompt, input = tonumber(ARGV[i + 5]), tonumber(ARGV[i + 2])
  if ARGV[i + 6] == '1' and prompt > 0 and input > 0 then
    learn(input / prompt, tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8]), tonumber(ARGV[i + 9]))
  end
  -- A call counted as it went earns back a little of the margin.
  if ARGV[i + 6] == '1' and (root.mb < 1 or root.mr < 1) then
    local mb, mr = root.mb + tonumber(ARGV[i + 14]), root.mr + tonumber(ARGV[i + 15])
    remargin(mb < 1 and mb or 1, mr < 1 and mr or 1)
  end
  return held

elseif op == 'cancel' then
  -- ARGV: ticket id. Reply 1, or 0 if unknown; {-1, tenant} for a ticket
  -- reserved under another tenant.
  local t, other = ticket()
  if other then return wrongTenant(other) end
  if not t then
    redis.call('DEL', T)
    for _, b in ipairs(budgets) do
      if b.conc then redis.call('ZREM', b.L, ARGV[i]) end
    end
    return 0
  end
  local m = member(t, ARGV[i])
  -- A grant given up before its call started gives its start back.
  if t.s == 'g' then gate({tonumber(t.c1), tonumber(t.c2), tonumber(t.c3), tonumber(t.c4)}, 0, -1, tonumber(t.m)) end
  for _, b in ipairs(budgets) do
    adjust(b, {-tonumber(t.c1), -tonumber(t.c2), -tonumber(t.c3), -tonumber(t.c4)}, tonumber(t.w))
    if b.conc then redis.call('ZREM', b.L, ARGV[i]) end
    redis.call('ZREM', b.Q, m)
  end
  unline(m)
  redis.call('DEL', T)
  return 1

elseif op == 'renew' then
  -- ARGV: ticket id, TTL µs (within the policy's lease TTL). The grant's
  -- record and leases live that long from now, unless they already live
  -- longer. A ticket whose record is gone keeps the grant it held
  -- (regrant). Reply the time it now has left in µs, or '' if the ticket
  -- is not held as granted; {-1, tenant} for a ticket reserved under
  -- another tenant.
  local t, other = ticket()
  if other then return wrongTenant(other) end
  local exp = now + tonumber(ARGV[i + 1])
  if not t then
    if regrant(ARGV[i], fmt(exp)) then return fmt(exp - now) end
    return ''
  end
  if t.s ~= 'g' then return '' end
  if tonumber(t.x) > exp then exp = tonumber(t.x) end
  local x = fmt(exp)
  for _, b in ipairs(budgets) do
    if b.conc then redis.call('ZADD', b.L, 'XX', x, ARGV[i]) end
  end
  saveTicket(t, ARGV[i], exp, x)
  return fmt(exp - now)

elseif op == 'pause' then
  -- ARGV: how long µs, reason, lesson (1/0: quota.RateLimitedPause), the
  -- margin's least burst and rate and their cuts (quota.MinBurstMargin,
  -- MinRateMargin, BurstCut, RateCut): the target's pause ends that long
  -- after now. A lesson cuts the root's margin, unless a pause of the
  -- root is in force already (one burst's 429s are one lesson).
  local untilT = now + tonumber(ARGV[i])
  if ARGV[i + 2] == '1' and untilT > now and not root.paused then
    local mb, mr = root.mb * tonumber(ARGV[i + 5]), root.mr * tonumber(ARGV[i + 6])
    local minB, minR = tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
    remargin(mb > minB and mb or minB, mr > minR and mr or minR)
  end
  if untilT > now and untilT > target.pu then
    redis.call('HSET', target.S, 'pu', fmt(untilT), 'pr', ARGV[i + 1])
  end
  return 1

elseif op == 'observe' then
  -- ARGV: observations (see observe), applied to the target.
  observe(target, i)
  return 1

elseif op == 'snapshot' then
  -- ARGV: the root's calibration's min and max ratio and half-life µs (0 0
  -- 0: off). Reply: {now, the target's paused until or '', its pause
  -- reason, the root's estimate ratio, its margin's burst and rate, then
  -- per limit of the target: axis, capacity, available, reset µs or '',
  -- its burst (buckets; else 0), then per tenant with tickets in
  -- line (the call's tenant alone for a nested tenant's budget), by name:
  -- its name, its tickets, their cost (4 parts)}: O(tenants in line).
  local out = {nowS, '', '', '1', fmt(root.mb), fmt(root.mr)}
  if ARGV[i + 2] ~= '0' then out[4] = fmt(ratioAt(tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]))) end
  if target.paused then out[2], out[3] = fmt(target.pu), target.pr or '' end
  for k = 1, target.n do
    local a = target.axes[k]
    local avail, reset = 0, ''
    if a.kind == BUCKET then
      avail = level(a)
    elseif a.kind == DAILY then
      avail, reset = a.cap - used(a), fmt(a.we)
    else
      avail = a.cap - redis.call('ZCOUNT', target.L, '(' .. nowS, '+inf')
    end
    out[#out + 1] = a.id
    out[#out + 1] = fmt(a.cap)
    out[#out + 1] = fmt(avail)
    out[#out + 1] = reset
    out[#out + 1] = a.kind == BUCKET and fmt(a.burst) or '0'
  end
  local by, names = {}, {}
  if own then
    local w = redis.call('HGET', W, tenant)
    if w then by[tenant], names[1] = parts(w), tenant end
  else
    local raw = redis.call('HGETALL', W)
    for j = 1, #raw, 2 do
      by[raw[j]], names[#names + 1] = parts(raw[j + 1]), raw[j]
    end
  end
  table.sort(names)
  for _, n in ipairs(names) do
    local g = by[n]
    out[#out + 1] = string.sub(n, 2)
    for k = 1, 5 do out[#out + 1] = fmt(g[k]) end
  end
  return out
end

return redis.error_reply('ERR tollgate: unknown op ' .. tostring(op))
`)
