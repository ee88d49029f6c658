-- line.lua: queued tickets, and the line of those waiting for capacity,
-- in weighted fair share (see the memory store's line.go).
--
-- A queued ticket is a member of each queue zset of its budgets, scored by
-- its expiry, and, while it waits for capacity, of the root's line N,
-- scored by its fair-share tag: "#q c1 c2 c3 c4 w n id", its place in the
-- order of arrival in line (or "-"), its charge (see outSpend), the time it was
-- charged at, its tenant ("." and the name) and its id, so that one that
-- lapses unclaimed is refunded without reading its record.

-- member is t's entry in the queue zsets and the line.
local function member(t, id)
  return '#' .. t.q .. ' ' .. t.c1 .. ' ' .. t.c2 .. ' ' .. t.c3 .. ' ' .. t.c4 .. ' ' .. t.w .. ' ' .. t.n .. ' ' .. id
end

-- parseMember reads member m: its place (nil for "-"), its charge (5
-- parts), the time it was charged at and its tenant; nil for a member of a
-- form this script cannot read.
local function parseMember(m)
  local q, c1, c2, c3, c4, w, n = string.match(m, '^#(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+) ')
  local c = {tonumber(c1), tonumber(c2), tonumber(c3), outSpend(c4)}
  if not (c[1] and c[2] and c[3] and c[4] and c[5] and tonumber(w)) then return nil end
  return {q = tonumber(q), c = c, w = tonumber(w), n = n}
end

-- unreadable counts, in the root's state (xu), a record or member of a
-- form this script cannot read, which it dropped.
local function unreadable()
  root.st['xu'] = fmt(redis.call('HINCRBY', S, 'xu', 1))
end

-- parts reads "count c1 c2 c3 c4" (c4 with its spend, see outSpend; nil:
-- none) into a table of numbers: the count, then the cost's 5 parts.
local function parts(raw)
  local c, c1, c2, c3, c4 = string.match(raw or '', '^(%S+) (%S+) (%S+) (%S+) (%S+)$')
  if not c then return {0, 0, 0, 0, 0, 0} end
  local o, m = outSpend(c4)
  return {tonumber(c), tonumber(c1), tonumber(c2), tonumber(c3), o, m}
end

-- count adds sign × the cost of member m, of tenant n, to the line's
-- totals: the root's q1..q5 and the tenant's entry in W.
local function count(n, c, sign)
  local st = root.st
  for k = 1, 5 do
    put(root, 'q' .. k, fmt((tonumber(st['q' .. k] or '') or 0) + sign * c[k]))
  end
  local w = parts(redis.call('HGET', W, n))
  w[1] = w[1] + sign
  if w[1] <= 0 then
    redis.call('HDEL', W, n)
  else
    redis.call('HSET', W, n, fmt(w[1]) .. ' ' .. fmt(w[2] + sign * c[1]) .. ' ' .. fmt(w[3] + sign * c[2]) .. ' ' ..
      fmt(w[4] + sign * c[3]) .. ' ' .. lastPart(w[5] + sign * c[4], w[6] + sign * c[5]))
  end
end

-- unline takes member m out of the line, if it is in it; the line that
-- empties starts afresh (its virtual time, counter, totals and tags).
local function unline(m)
  if redis.call('ZREM', N, m) == 0 then return end
  if redis.call('ZCARD', N) == 0 then
    redis.call('DEL', F, W)
    drop(root, 'fv', 'fq', 'fb', 'q1', 'q2', 'q3', 'q4', 'q5')
    return
  end
  local p = parseMember(m)
  if p then count(p.n, p.c, -1) end
end

-- sums returns the cost in the root's line: in total and ahead of (tag,
-- seq), of every tenant and of the call's tenant (when its budget is
-- nested), each per part. The totals are kept as tickets enter and leave;
-- the cost ahead is read off the shorter side of the place, so a call
-- reads the tickets ahead of its place or those behind it, whichever are
-- fewer: O(log queued + that) per call.
local function sums(tag, seq)
  local st = root.st
  local tot = {tonumber(st['q1'] or '') or 0, tonumber(st['q2'] or '') or 0, tonumber(st['q3'] or '') or 0,
    tonumber(st['q4'] or '') or 0, tonumber(st['q5'] or '') or 0}
  local otot = {0, 0, 0, 0}
  if own then
    local w = parts(redis.call('HGET', W, tenant))
    otot = {w[2], w[3], w[4], w[5]}
  end
  -- Only the bucket parts (1..4) are summed: the line waits on buckets.
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
  -- The members are read here without parseMember's tables: this loop is
  -- the cost of a call in the middle of a long line. What does not read
  -- as a member in line (no place, or a part that is no number) counts for
  -- nothing, as in parseMember.
  local sum, osum = {0, 0, 0, 0}, {0, 0, 0, 0}
  for j = 1, #side, 2 do
    local q, c1, c2, c3, c4, tn = string.match(side[j], '^#(%S+) (%S+) (%S+) (%S+) (%S+) %S+ (%S+) ')
    q = tonumber(q)
    if q then
      local score = tonumber(side[j + 1])
      if (score < tag or (score == tag and q < seq)) == front then
        c1, c2, c3, c4 = tonumber(c1), tonumber(c2), tonumber(c3), (outSpend(c4))
        if c1 and c2 and c3 and c4 then
          sum[1], sum[2], sum[3], sum[4] = sum[1] + c1, sum[2] + c2, sum[3] + c3, sum[4] + c4
          if own and tn == tenant then
            osum[1], osum[2], osum[3], osum[4] = osum[1] + c1, osum[2] + c2, osum[3] + c3, osum[4] + c4
          end
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
local zero = {0, 0, 0, 0}
local function lineWaits(busy, tag, seq, cost, low)
  local tot, ahd, otot, oahd = zero, zero, zero, zero
  if busy then tot, ahd, otot, oahd = sums(tag, seq) end
  local wait, waxis = 0, '0'
  if own then wait, waxis = lineWait(own, cost, low, oahd, otot) end
  local w, a = lineWait(root, cost, low, ahd, tot)
  if w > wait then wait, waxis = w, a end
  return wait, waxis
end

-- setFinish records tag as the call's tenant's latest; the hash lives as
-- long as a ticket may wait in line after the last write. Once it holds
-- more tags than the bound fb (FINISH_PRUNE at first), the tags behind the
-- line's virtual time, which count for nothing, are dropped, and the bound
-- becomes twice what is left: a busy line keeps one tag per tenant still
-- ahead of it, at O(1) a call amortized.
local function setFinish(tag)
  redis.call('HSET', F, tenant, fmt(tag))
  redis.call('PEXPIRE', F, fmt(math.ceil((maxWait + leaseTTL) / 1000) + TICKET_GRACE))
  local bound = tonumber(root.st['fb'] or '') or FINISH_PRUNE
  if redis.call('HLEN', F) <= bound then return end
  local v = tonumber(root.st['fv'] or '') or 0
  local raw, drop = redis.call('HGETALL', F), {}
  for j = 1, #raw, 2 do
    local f = tonumber(raw[j + 1])
    if not f or f <= v then drop[#drop + 1] = raw[j] end
  end
  if #drop > 0 then redis.call('HDEL', F, unpack(drop)) end
  bound = 2 * (#raw / 2 - #drop)
  if bound < FINISH_PRUNE then bound = FINISH_PRUNE end
  put(root, 'fb', fmt(bound))
end
