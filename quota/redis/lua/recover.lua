-- recover.lua: epochs, and recovering a budget's state after a loss.
--
-- The epoch names one life of a budget's state: a new one begins when its
-- state hash is created. A caller that saw another epoch and finds the hash
-- gone, or recreated by a caller that could not tell it was lost (ef),
-- knows the state was lost (a restart without persistence, a failover, an
-- eviction) and recovers it. A caller that saw none cannot tell a lost
-- budget from a new one.

-- begin names a new epoch of budget b: one generation past the caller's,
-- the caller's name for it and now, so that it differs from every epoch
-- anyone saw.
local function begin(b)
  return (tonumber((string.match(b.known, '^(%d+)%.'))) or 0) + 1 .. '.' .. epochName .. '@' .. nowS -- (…) is one value: gopher-lua's match returns none on a miss
end

-- seen returns the use of budget b's j-th daily limit a's current window
-- that the caller last saw, 0 if it saw another window or none.
local function seen(b, a, j)
  local ws, u = string.match(b.seen[j], '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then return tonumber(u) end
  return 0
end

-- counted returns the use of budget b's j-th daily limit a's current
-- window once the caller's view of it is counted, and what the views
-- counted so far come to (kept as r<a>, "start use"), or nil when the
-- caller's view adds nothing. A window recovered after a loss (lost) holds
-- what was used since (by callers that could not tell it was lost) plus
-- what the recovering caller saw; every caller that saw the lost epoch
-- adds what it saw beyond the views counted before it, so grants the
-- recovering caller had not seen are charged as soon as a caller that saw
-- them comes back. A window recovered by a release that kept no r<a> is
-- raised to the caller's view, as that release did.
local function counted(b, a, j, lost)
  local u, d = seen(b, a, j), used(a)
  if lost then return d + u, u end
  local ws, r = string.match(b.st['r' .. a.id] or '', '^(%S+) (%S+)$')
  if ws and tonumber(ws) == a.ws then
    r = tonumber(r)
    if u > r then return d + u - r, u end
  elseif u > d then
    return u, nil
  end
  return nil, nil
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
      local l = st['l' .. id] and level(a) or 0
      if l > 0 then l = 0 end
      local ts = stamp(a)
      put(b, 'l' .. id, fmt(l), 't' .. id, ts)
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

-- checkEpochs recovers each budget whose state the caller finds lost, and
-- names the epoch of each whose state begins with this call.
local function checkEpochs()
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

-- regrant keeps, for ticket id whose record is gone, the grant it held on
-- every budget with a concurrency limit: its own lease where it still has
-- one (the record alone was evicted), else a placeholder recover left,
-- until x (formatted µs), or releases it when x is nil. A placeholder goes
-- only to a ticket whose caller proves it was granted in the epoch lost:
-- proofs holds, per budget (root first), the epoch the caller was granted
-- the ticket in, or ''. It reports whether the ticket held a grant so,
-- changing nothing when one budget cannot say it did: never on budgets
-- without a concurrency limit, where no lease says which calls ran.
local function regrant(id, x, proofs)
  local takes, any = {}, false
  for _, b in ipairs(budgets) do
    if b.conc then
      any = true
      local held = redis.call('ZSCORE', b.L, id)
      if not (held and tonumber(held) > now) then
        local rv, lp = b.st['rv'], tonumber(b.st['lp'] or '0')
        local proof = proofs[b == root and 1 or 2]
        if lp < 1 or tonumber(rv) <= now or proof == '' or proof ~= b.st['pe'] or
          not redis.call('ZSCORE', b.L, PLACEHOLDER .. rv .. ' ' .. lp) then
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
    put(b, 'lp', fmt(lp - 1))
  end
  for _, b in ipairs(budgets) do
    if b.conc then
      if x then redis.call('ZADD', b.L, x, id) else redis.call('ZREM', b.L, id) end
    end
  end
  return true
end

