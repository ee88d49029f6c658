-- snapshot.lua: quota.Store.Snapshot, read-only (EVALSHA_RO).
--
-- ARGV after common.lua's: the root's calibration's min and max ratio and
-- half-life µs (0 0 0: off).
--
-- It writes nothing, so it reads the state as the next write will find
-- it (see upkeep.lua): queued tickets that lapsed count as refunded, and a
-- state the caller finds lost as recovered, buckets empty, daily windows
-- as used as the caller saw them and every free slot held.
--
-- Reply: {now, the target's paused until or '', its pause reason, the
-- root's estimate ratio, its margin at its most cautious (burst, rate and
-- burst refused), the records and members the root dropped as unreadable; then per limit of the target:
-- axis, capacity, available, reset µs or '', its burst (buckets; else 0),
-- its margin "burst rate refused" (a root's buckets; else '');
-- then per tenant with tickets in line (the call's tenant alone for a
-- nested tenant's budget), by name: its name, its tickets, their cost (5
-- parts)}: O(tenants in line + lapsed tickets).

local minR, maxR, half = tonumber(arg()), tonumber(arg()), tonumber(arg())

local b = target
local lost = b.known ~= '' and b.ep ~= b.known and (not b.ep or b.st['ef'] ~= nil)
cautious(root)
local out = {nowS, '', '', '1', fmt(root.mb), fmt(root.mr), fmt(root.mf), root.st['xu'] or '0'}
if half ~= 0 then out[4] = fmt(ratioAt(minR, maxR, half)) end
if b.paused then out[2], out[3] = fmt(b.pu), b.pr or '' end

-- What the lapsed queued tickets give back, per part and per daily axis,
-- and take out of the line, per tenant.
local back, lapsed = {0, 0, 0, 0, 0}, {}
local backDaily = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', b.Q, '-inf', nowS)) do
  local p = parseMember(m)
  if p then
    for k = 1, 5 do back[k] = back[k] + p.c[k] end
    for k = 1, b.n do
      local a = b.axes[k]
      if a.kind == DAILY and p.w >= a.ws and p.w < a.we then
        backDaily[a.id] = (backDaily[a.id] or 0) + p.c[a.ci]
      end
    end
    if p.q and redis.call('ZSCORE', N, m) then
      local l = lapsed[p.n] or {0, 0, 0, 0, 0, 0}
      l[1] = l[1] + 1
      for k = 1, 5 do l[k + 1] = l[k + 1] + p.c[k] end
      lapsed[p.n] = l
    end
  end
end

local j = 0
for k = 1, b.n do
  local a = b.axes[k]
  local avail, reset = 0, ''
  if a.kind == BUCKET then
    if lost then
      avail = b.st['l' .. a.id] and level(a) or 0
      if avail > 0 then avail = 0 end
    else
      avail = level(a) + back[a.ci]
      if avail > a.burst then avail = a.burst end
    end
  elseif a.kind == DAILY then
    j = j + 1
    local u = used(a)
    if lost then u = counted(b, a, j, true) end
    u = u - (backDaily[a.id] or 0)
    if u < 0 then u = 0 end
    avail, reset = a.cap - u, fmt(a.we)
  elseif not lost then
    avail = a.cap - redis.call('ZCOUNT', b.L, '(' .. nowS, '+inf')
  end
  out[#out + 1] = a.id
  out[#out + 1] = fmt(a.cap)
  out[#out + 1] = fmt(avail)
  out[#out + 1] = reset
  out[#out + 1] = a.kind == BUCKET and fmt(a.burst) or '0'
  if a.kind == BUCKET and b == root then
    out[#out + 1] = fmt(a.mb) .. ' ' .. fmt(a.mr) .. ' ' .. fmt(a.mf)
  else
    out[#out + 1] = ''
  end
end

local by, names = {}, {}
if own then
  local w = redis.call('HGET', W, tenant)
  if w then by[tenant], names[1] = parts(w), tenant end
else
  local raw = redis.call('HGETALL', W)
  for i = 1, #raw, 2 do
    by[raw[i]], names[#names + 1] = parts(raw[i + 1]), raw[i]
  end
end
table.sort(names)
for _, n in ipairs(names) do
  local g, l = by[n], lapsed[n] or {0, 0, 0, 0, 0, 0}
  if g[1] - l[1] > 0 then
    out[#out + 1] = string.sub(n, 2)
    for k = 1, 6 do out[#out + 1] = fmt(g[k] - l[k]) end
  end
end
return out
