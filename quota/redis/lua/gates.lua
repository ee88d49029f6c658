-- gates.lua: the start gates, and the learned margin.
--
-- The start gates (see quota's burst.go): per bucket axis of the root, a
-- level charged when a call is granted, as of the time the call starts,
-- holding at most the axis's burst (its capacity × the burst share passed
-- × the margin's burst) and refilled at its rate: g<a> the level, h<a>
-- the time it is dated at (a start yet to come, or the last one). A gate
-- with no level is full.

-- gateLevel returns the root's gate of axis a as of at, and its burst. A
-- gate is parsed once, and one written (gate) not at all, as a level is.
local function gateLevel(a, at)
  local burst = a.burst
  local g = a.st[a.gk]
  if not g then return burst, burst end
  if g ~= a.gs then a.gs, a.gn = g, tonumber(g) end
  local l, ts = a.gn, timeOf(a.st[a.hk])
  if at > ts then l = l + (at - ts) * a.rate end
  if l > burst then l = burst end
  return l, burst
end

-- gate charges sign × cost to the root's gates as of now + wait, after
-- every level it was dated at (a negative part refunds, never above the
-- burst, and only to a gate not dated past now, or dated at own, the
-- start being given back), and keeps its st current.
local function gate(cost, wait, sign, own)
  for k = 1, root.n do
    local a = root.axes[k]
    local c = a.kind == BUCKET and cost[a.ci] or 0
    local at = now + wait
    local ts = a.st[a.hk]
    ts = ts and timeOf(ts)
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
      local s = fmt(l)
      put(root, a.gk, s, a.hk, at == now and nowS or fmt(at))
      a.gs, a.gn = s, l
    end
  end
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
      local ts = a.st[a.hk]
      ts = ts and timeOf(ts)
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
    for k = 1, root.n do
      local a = root.axes[k]
      if a.kind == BUCKET then
        putLevel(root, a, level(a) - a.rate * wait)
        a.lv = nil
      end
    end
  end
  return wait
end

-- remargin makes each bucket axis a of the root whose new margin the
-- caller set (a.nb, a.nr, a.nf: burst, rate, burst refused) have it from
-- now: its buckets and gates keep what they owe (a level below its burst
-- is a debt the calls after it wait for; a smaller burst moves the level
-- down by as much, a larger one leaves it to earn the rest) and refill at
-- the new rate after. It writes each axis's margin to m<axis> (every
-- bucket's, the first time), and the root's at its most cautious to mb,
-- mr and mf, which a release before per-axis margins reads for every axis.
local function remargin()
  local writes = {}
  for k = 1, root.n do
    local a = root.axes[k]
    if a.kind == BUCKET and a.nb then
      local burst = a.cap * a.bs * a.nb
      local delta = burst - a.burst
      if delta > 0 then delta = 0 end
      if a.st[a.lk] then
        local l = level(a) + delta
        if l > burst then l = burst end
        writes[#writes + 1], writes[#writes + 2], writes[#writes + 3], writes[#writes + 4] = a.lk, fmt(l), a.tk, stamp(a)
      end
      local ts = a.st[a.hk]
      ts = ts and timeOf(ts)
      if ts then
        local at = ts > now and ts or now
        local g = gateLevel(a, at) + delta
        if g > burst then g = burst end
        writes[#writes + 1], writes[#writes + 2], writes[#writes + 3], writes[#writes + 4] = a.gk, fmt(g), a.hk, fmt(at)
      end
      a.mb, a.mr, a.mf, a.nb, a.nr, a.nf = a.nb, a.nr, a.nf, nil, nil, nil
      a.rate, a.burst = a.cap / a.period * a.mr, burst
      put(root, 'm' .. a.id, fmt(a.mb) .. ' ' .. fmt(a.mr) .. ' ' .. fmt(a.mf))
    elseif a.kind == BUCKET and not a.st['m' .. a.id] then
      -- Every bucket has its own from the first, so that none reads the
      -- root's most cautious as its own.
      put(root, 'm' .. a.id, fmt(a.mb) .. ' ' .. fmt(a.mr) .. ' ' .. fmt(a.mf))
    end
  end
  cautious(root)
  put(root, 'mb', fmt(root.mb), 'mr', fmt(root.mr))
  put(root, 'mf', fmt(root.mf))
  for j = 1, #writes, 4 do put(root, writes[j], writes[j + 1], writes[j + 2], writes[j + 3]) end
end

