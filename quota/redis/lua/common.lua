-- common.lua: what every operation reads first, and the bucket, window
-- and observation helpers they share.
--
-- KEYS: [1] S the root's state hash, [2] L its lease zset, [3] T the
-- ticket's record (Reserve, Settle, Cancel, Renew; otherwise any key of the
-- root's slot), [4] Q its queue zset, [5] N its line, [6] F its finish
-- hash, [7] W its waiting hash; then, for a tenant's budget nested in the
-- root, [8] its state hash, [9] its lease zset and [10] its queue zset.
-- (See the package doc for what each holds.)
--
-- ARGV, read in order by arg, args and numbers (the Go side is args.go's
-- keyState.args):
--   now in unix µs, or '' to read Redis TIME; the call's tenant ('' for
--   none); its weight (quota.Policies.Weight); max wait µs (the shorter of
--   the budgets'); the number of budgets, 1 or 2; then for each, the root
--   first: its priority reserve (fraction), 1 if it adopts observed limits
--   else 0, its lease TTL µs, the most its margin's burst grows to
--   (storekit.MaxBurst), n its number of limits, then n × (axis id,
--   kind, effective capacity, period µs, burst share: quota.Limit.BurstTime
--   over its period, 0 for other kinds), in quota.Axes() order;
--   for each daily limit of each budget, in the same order, 6 midnights
--   (unix µs) around the caller's clock;
--   a name for a new epoch, then for each budget the epoch of its state the
--   caller last saw ('' for none), then for each daily limit of each budget
--   the window the caller last saw, "start used", or '';
--   then the operation's own arguments (see its file).
--
-- The constants (BUCKET, LEASE_RETRY, …) are written in from Go, where
-- they stand, from lua.go's table; so are the names S, L, T, Q, N, F and W,
-- as KEYS[1] to KEYS[7]: a local each function over it captured would cost
-- every call a closure's upvalue.

local argv, argi = ARGV, 0
-- arg returns the next argument.
local function arg()
  argi = argi + 1
  return argv[argi]
end

-- args returns the next n arguments: one call for several, as a call is a
-- good part of the cost of reading one.
local function args(n)
  local i = argi
  argi = i + n
  return unpack(argv, i + 1, argi)
end

-- numbers returns the next n arguments parsed, as a table.
local function numbers(n)
  local t, i = {}, argi
  for k = 1, n do t[k] = argv[i + k] * 1 end
  argi = i + n
  return t
end

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


local now = arg()
if now == '' then
  local tm = redis.call('TIME')
  now = tm[1] * 1000000 + tm[2]
else
  now = tonumber(now)
end
local nowS = fmt(now)
local tenant, weight, maxWait, nBudgets = args(4)
tenant, weight, maxWait = '.' .. tenant, weight * 1, maxWait * 1

-- A cost is written as its parts, the last "out" or, for a priced call,
-- "out$spend" (output tokens, then Money): a call with no price keeps the
-- form earlier releases read. outSpend reads that part as two numbers,
-- lastPart writes it.
local function outSpend(s)
  local o, m = string.match(s or '', '^([^$]+)%$(.+)$')
  if o then return tonumber(o), tonumber(m) end
  return tonumber(s), 0
end

local function lastPart(out, spend)
  if spend and spend ~= 0 then return fmt(out) .. '$' .. fmt(spend) end
  return fmt(out)
end

-- A budget: its keys, st its state hash as read, prio its priority reserve,
-- adopts, leaseTTL its policy's lease TTL µs, n its number of axes, axes,
-- conc its concurrency axis, daily whether it has daily axes and nd how
-- many, pu/pr its pause's end and reason, paused; ep its state's epoch,
-- known the one the caller saw and seen the caller's view of its daily
-- windows; mb/mr/mf the key-wide margin a release before per-axis margins
-- wrote (each bucket's own unless it has one; cautious makes them its
-- buckets' most cautious where a reply or a write needs that), mx the
-- most a bucket's margin's burst grows to; w the writes to its state hash
-- not yet made, nw their number (see put).
-- Each axis: id and kind as passed, cap (the adopted one if it counts, see
-- the package doc), conf the configured capacity as passed, period µs
-- (buckets only), ci its cost part (none for concurrency), st its budget's
-- state, mb/mr/mf its margin's burst, rate and burst refused (buckets; see
-- gates.lua), rate and burst (buckets: with the margin), lv a level just read
-- (see adjust); for a bucket, lk, tk, gk and hk the names of its level,
-- its level's time, its gate and its gate's time in st (made once: each
-- is read and written several times a call), and ls/ln and gs/gn the
-- level's and the gate's string last parsed and its number (see level).
-- cautious sets b's mb/mr/mf to its buckets' margin at its most cautious
-- (storekit.Cautious): the least burst, with the burst refused of its
-- axis, and the least rate; 1, 1, 0 with no bucket.
local function cautious(b)
  local mb, mr, mf
  for k = 1, #b.axes do
    local a = b.axes[k]
    if a.kind == BUCKET then
      if not mb or a.mb < mb then mb, mf = a.mb, a.mf end
      if not mr or a.mr < mr then mr = a.mr end
    end
  end
  b.mb, b.mr, b.mf = mb or 1, mr or 1, mf or 0
end

local lastP, period -- axes usually share a period: parse each one once
local function budget(Sk, Lk, Qk)
  local st = {}
  local raw = redis.call('HGETALL', Sk)
  for j = 1, #raw, 2 do st[raw[j]] = raw[j + 1] end
  -- A state rarely holds a pause or a margin: tonumber is spared then.
  local pu, mb, mr, mf = st['pu'], st['mb'], st['mr'], st['mf']
  pu = pu and tonumber(pu) or 0
  local prio, adopts, leaseTTL, mx, n = args(5)
  local b = {S = Sk, L = Lk, Q = Qk, st = st, prio = prio * 1, adopts = adopts == '1',
    leaseTTL = leaseTTL * 1, n = n * 1, axes = {}, conc = nil, daily = false, nd = 0,
    pu = pu, pr = st['pr'], paused = pu > now, ep = st['ep'], known = nil, seen = {},
    mb = mb and tonumber(mb) or 1, mr = mr and tonumber(mr) or 1, mf = mf and tonumber(mf) or 0,
    mx = mx * 1, w = {}, nw = 0}
  for k = 1, b.n do
    local id, kind, conf, p, bs = args(5)
    if kind == BUCKET and p ~= lastP then
      lastP = p
      period = p * 1
    end
    local cap
    if b.adopts and st['o' .. id] == conf and st['c' .. id] then cap = tonumber(st['c' .. id]) else cap = conf * 1 end
    -- The cost part the axis charges, none for concurrency (tested here, as
    -- a table of them would be built on every call).
    local ci
    if id == '1' or id == '5' then
      ci = 1
    elseif id == '2' or id == '6' then
      ci = 2
    elseif id == '3' then
      ci = 3
    elseif id == '4' then
      ci = 4
    elseif id == '8' or id == '9' then
      ci = 5
    end
    -- Every field is named here so the table is sized once.
    local a = {id = id, kind = kind, cap = cap, conf = conf, ci = ci,
      period = kind == BUCKET and period or nil, bs = kind == BUCKET and bs * 1 or nil,
      mb = nil, mr = nil, mf = nil, nb = nil, nr = nil, nf = nil,
      rate = nil, burst = nil, lv = nil, ws = nil, we = nil, st = st,
      lk = nil, tk = nil, gk = nil, hk = nil, ls = nil, ln = nil, gs = nil, gn = nil}
    if kind == BUCKET then
      -- The axis's own margin, or the key-wide one a release before
      -- per-axis margins wrote (or none).
      local m = st['m' .. id]
      if m then
        local x, y, z = string.match(m, '^(%S+) (%S+) (%S+)$')
        a.mb, a.mr, a.mf = x * 1, y * 1, z * 1
      else
        a.mb, a.mr, a.mf = b.mb, b.mr, b.mf
      end
      a.rate, a.burst = a.cap / period * a.mr, a.cap * a.bs * a.mb
      a.lk, a.tk, a.gk, a.hk = 'l' .. id, 't' .. id, 'g' .. id, 'h' .. id
    end
    if kind == LEASES then
      b.conc = a
    elseif kind == DAILY then
      b.daily = true
      b.nd = b.nd + 1
    end
    b.axes[k] = a
  end
  return b
end

-- put writes v to field k of budget b's state, and v2 to k2 if given (a
-- level and its time, say: fields go in pairs): to st at once, and to the
-- state hash with every other write of the operation, in one HSET when it
-- ends (done). A hash written once costs one command, where each part of
-- an operation writing its own fields would cost one each.
local function put(b, k, v, k2, v2)
  local st, w, n = b.st, b.w, b.nw
  st[k], w[n + 1], w[n + 2] = v, k, v
  if k2 then
    st[k2], w[n + 3], w[n + 4] = v2, k2, v2
    n = n + 2
  end
  b.nw = n + 2
end

-- flush makes budget b's pending writes.
local function flush(b)
  if b.nw > 0 then
    redis.call('HSET', b.S, unpack(b.w, 1, b.nw))
    b.nw = 0
  end
end

-- drop deletes fields of budget b's state, after the writes before it.
local function drop(b, ...)
  flush(b)
  redis.call('HDEL', b.S, ...)
  for _, k in ipairs({...}) do b.st[k] = nil end
end

local root = budget(S, L, Q)
local own
if nBudgets == '2' then own = budget(KEYS[8], KEYS[9], KEYS[10]) end

-- done makes the operation's pending writes and returns r: every reply of
-- an operation that writes passes through it.
local function done(r)
  flush(root)
  if own then flush(own) end
  return r
end
-- budgets lists the call's budgets, the tenant's first; both, the root
-- first (the order of the arguments and replies); target is the one its
-- key names (Pause, Observe, Snapshot).
local budgets, both = {root}, {root}
local target = root
if own then budgets, both, target = {own, root}, {root, own}, own end

for _, b in ipairs(both) do
  for k = 1, b.n do
    local a = b.axes[k]
    if a.kind == DAILY then
      local from = arg() * 1
      for _ = 1, 5 do
        local to = arg() * 1
        if from <= now and now < to then a.ws, a.we = from, to end
        from = to
      end
      if not a.ws then
        return redis.error_reply('ERR tollgate: clock ' .. nowS .. ' is outside the daily windows passed for axis ' ..
          a.id .. '; the caller clock and Redis TIME disagree by days')
      end
    end
  end
end
local epochName = arg()
for _, b in ipairs(both) do b.known = arg() end
for _, b in ipairs(both) do
  for j = 1, b.nd do b.seen[j] = arg() end
end
-- leaseTTL is the longest a ticket lives unrenewed: the shorter of the
-- budgets' lease TTLs.
local leaseTTL = root.leaseTTL
if own and own.leaseTTL < leaseTTL then leaseTTL = own.leaseTTL end

-- timeOf returns time ts of a state parsed: the times of the axes' levels
-- and gates are usually one write's now, this call's or an earlier one's,
-- so each is parsed once.
local lastT, lastTN
local function timeOf(ts)
  if ts == nowS then return now end
  if ts ~= lastT then lastT, lastTN = ts, tonumber(ts) end
  return lastTN
end

-- level returns bucket a's level at now. A level is parsed once, and one
-- written (putLevel) not at all: fmt gives back the very number.
local function level(a)
  local l = a.st[a.lk]
  if not l then return a.burst end
  if l ~= a.ls then a.ls, a.ln = l, tonumber(l) end
  l = a.ln
  local dt = now - timeOf(a.st[a.tk])
  if dt > 0 then l = l + dt * a.rate end
  if l > a.burst then l = a.burst end
  return l
end

local function used(a)
  if tonumber(a.st['w' .. a.id]) == a.ws then return tonumber(a.st['d' .. a.id]) end
  return 0
end

-- stamp is the time to date a bucket's new level at: now, unless the clock
-- has stepped back past the level's own time. A level is never dated back,
-- or the span the clock repeats would earn a second refill.
local function stamp(a)
  local ts = a.st[a.tk]
  if ts and timeOf(ts) > now then return ts end
  return nowS
end

-- putLevel writes level l of bucket a of budget b, dated at stamp(a).
local function putLevel(b, a, l)
  local s = fmt(l)
  put(b, a.lk, s, a.tk, stamp(a))
  a.ls, a.ln = s, l
end

-- adjust charges delta[1..5] (negative: refunds) against every axis of
-- budget b and keeps its st current for what follows; a bucket's level is
-- a.lv when the caller has just read it. Given at, the time a ticket was
-- charged at, a daily window is left alone unless at falls in its current
-- day: a new day owes nothing for an estimate made the day before.
-- Refunds never lift a bucket above its capacity nor a window below zero.
local function adjust(b, delta, at)
  for k = 1, b.n do
    local a = b.axes[k]
    local c = a.ci and delta[a.ci]
    if c and at and a.kind == DAILY and (at < a.ws or at >= a.we) then c = nil end
    if a.kind == BUCKET and c then
      local l = (a.lv or level(a)) - c
      if c < 0 and l > a.burst then l = a.burst end
      putLevel(b, a, l)
    elseif a.kind == DAILY and c then
      local u = used(a) + c
      if u < 0 then u = 0 end
      put(b, 'w' .. a.id, fmt(a.ws), 'd' .. a.id, fmt(u))
    end
  end
end

-- observe applies to budget b what a provider reported, read from the
-- arguments: m, then m × (axis id, adopted effective capacity or -1,
-- remaining or -1). Levels are only lowered; an adopted capacity replaces
-- the policy's, recorded with the configured capacity it was adopted under.
local function observe(b)
  local m = arg() * 1
  for _ = 1, m do
    local id, adopt, rem = args(3)
    adopt, rem = adopt * 1, rem * 1
    for q = 1, b.n do
      local a = b.axes[q]
      if a.id == id then
        if a.kind == BUCKET then
          local l = level(a)
          if adopt > 0 then
            a.cap, a.rate, a.burst = adopt, adopt / a.period * a.mr, adopt * a.bs * a.mb
            put(b, 'c' .. id, fmt(adopt), 'o' .. id, a.conf)
            if l > a.burst then l = a.burst end
          end
          if rem >= 0 and rem < l then l = rem end
          putLevel(b, a, l)
        elseif a.kind == DAILY then
          if adopt > 0 then
            a.cap = adopt
            put(b, 'c' .. id, fmt(adopt), 'o' .. id, a.conf)
          end
          local u = used(a)
          if rem >= 0 and a.cap - rem > u then u = a.cap - rem end
          put(b, 'w' .. id, fmt(a.ws), 'd' .. id, fmt(u))
        end
      end
    end
  end
end

